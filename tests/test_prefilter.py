"""The byte-level prefilter (lint_gpu_tests/parsing/prefilter.py): a file that names nothing an
enabled rule starts from is not parsed and reports nothing (GPU900 included); every file that
can hold a violation is analysed, rule by rule, however it spells the names."""

from __future__ import annotations

from pathlib import Path

import pytest

from lint_gpu_tests import api
from lint_gpu_tests.checking.checker import CheckResult, check_source
from lint_gpu_tests.checking.conftest_index import ConftestIndex
from lint_gpu_tests.codes import OPT_IN_CODES, RULE_CODES
from lint_gpu_tests.config import Config, config_from_table
from lint_gpu_tests.parsing.prefilter import (
    RUNNER_FACTORY_FIXTURE,
    enabled_rule_codes,
    literal_run,
    names_variable,
    prefilter_for,
    rule_words,
)
from lint_gpu_tests.rule import Example
from lint_gpu_tests.rules import ALL_RULES, triggers_of
from lint_gpu_tests.rules import gpu007_engines_oversubscribe_device as gpu007
from lint_gpu_tests.running import run as run_module

BROKEN_PLAIN = b"def f(:\n    pass\n"
BROKEN_NAMING_LLM = b"from vllm import LLM\n\ndef f(:\n    LLM()\n"


def example_cases() -> list[tuple[str, Example, Config]]:
    cases = []
    for rule in ALL_RULES:
        for example in (*rule.INVALID, *rule.VALID):
            config = config_from_table(dict(example.config), "example") if example.config \
                else Config()
            cases.append((rule.code, example, config))
    return cases


@pytest.mark.parametrize(("code", "example", "config"), example_cases())
def test_every_example_is_analysed_by_its_rule_alone(code: str, example: Example,
                                                     config: Config, tmp_path: Path) -> None:
    """The prefilter lets through every example its rule reports on (one calling an engine
    helper of another module too: laid out with it, :meth:`Example.lay_out`)."""
    path = example.lay_out(str(tmp_path)) if example.modules else example.path
    data = example.source.encode()
    alone = config.with_overrides(select=(code,), extend_select=())
    check_bytes = run_module._check_bytes
    assert check_bytes(data, path, config, prefilter=True) == check_source(data, path, config)
    assert check_bytes(data, path, alone, prefilter=True) == check_source(data, path, alone)
    if check_source(data, path, alone):
        assert api.may_hold_violation(data, path, alone)


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the paths :func:`lint_gpu_tests.running.run.check_module` (parse and analysis) is
    called for."""
    seen: list[str] = []
    real = run_module.check_module

    def record(source: bytes, path: str, config: Config,
               conftests: ConftestIndex | None = None) -> CheckResult:
        seen.append(path)
        return real(source, path, config, conftests)

    monkeypatch.setattr(run_module, "check_module", record)
    return seen


def test_a_file_that_names_nothing_is_not_parsed(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("test_plain.py").write_bytes(BROKEN_PLAIN)
    Path("test_vllm_env.py").write_bytes(b'VLLM_USE_V1 = "1"\n\ndef test_x(vllm_runner_x):\n'
                                         b'    pass\n')
    seen = _recording(monkeypatch)
    result = api.check_paths(["."], Config(root=str(tmp_path)), jobs=1, cache=False)
    assert seen == []
    assert [(f.path, f.violations, f.error) for f in result.files] == [
        ("test_plain.py", [], None), ("test_vllm_env.py", [], None)]


def test_gpu900_is_reported_for_an_analysed_broken_file(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("test_broken.py").write_bytes(BROKEN_NAMING_LLM)
    Path("test_plain.py").write_bytes(BROKEN_PLAIN)
    seen = _recording(monkeypatch)
    result = api.check_paths(["."], Config(root=str(tmp_path)), jobs=1, cache=False)
    assert seen == ["test_broken.py"]
    assert [(v.path, v.code, v.location.row, v.location.column, v.message)
            for v in result.violations] == [
        ("test_broken.py", "GPU900", 3, 7, "SyntaxError: invalid syntax")]


def test_gpu900_alone_looks_at_the_files_the_rules_would(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("test_broken.py").write_bytes(BROKEN_NAMING_LLM)
    Path("test_env.py").write_bytes(b"import os\nos.environ[\"VLLM_X\"\n")
    Path("test_other_env.py").write_bytes(b"import os\nos.environ[\"OTHER\"\n")
    Path("test_plain.py").write_bytes(BROKEN_PLAIN)
    config = Config(root=str(tmp_path), select=("GPU900",))
    result = api.check_paths(["."], config, jobs=1, cache=False)
    assert [(v.path, v.code, v.location.row) for v in result.violations] == [
        ("test_broken.py", "GPU900", 3), ("test_env.py", "GPU900", 2)]


ALIASED = '''\
from vllm import LLM as Engine


def test_generate():
    engine = Engine("facebook/opt-125m")
    assert engine.generate(["hi"])
'''

MODULE_ATTRIBUTE = '''\
import vllm as v


def test_generate():
    engine = v.LLM("facebook/opt-125m")
    assert engine.generate(["hi"])
'''


@pytest.mark.parametrize("source", [ALIASED, MODULE_ATTRIBUTE], ids=["alias", "attribute"])
def test_an_engine_named_through_an_alias_is_analysed(source: str) -> None:
    data, config = source.encode(), Config(select=("GPU001",))
    assert api.may_hold_violation(data, "tests/test_x.py", config)
    found = run_module._check_bytes(data, "tests/test_x.py", config, prefilter=True)
    assert [(v.code, v.location.row, v.location.column) for v in found] == [("GPU001", 5, 14)]


ENVIRONMENT_ONLY = b'import os\n\n\ndef test_offline():\n    os.environ["HF_HUB_OFFLINE"] = "1"\n'


def test_an_environment_change_without_an_engine_is_analysed() -> None:
    found = run_module._check_bytes(ENVIRONMENT_ONLY, "tests/test_x.py", Config(), prefilter=True)
    assert [(v.code, v.location.row, v.location.column) for v in found] == [("GPU008", 5, 5)]
    assert not api.may_hold_violation(ENVIRONMENT_ONLY, "tests/test_x.py",
                                      Config(select=("GPU001",)))


def test_per_file_ignores_narrow_what_a_file_is_parsed_for(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("test_a.py", "test_b.py"):
        Path(name).write_bytes(ENVIRONMENT_ONLY + b"def broken(:\n")
    config = config_from_table({"per-file-ignores": {"test_b.py": ["GPU008"]}}, "t",
                               root=str(tmp_path))
    seen = _recording(monkeypatch)
    result = api.check_paths(["."], config, jobs=1, cache=False)
    assert seen == ["test_a.py"]
    assert [(v.path, v.code, v.location.row) for v in result.violations] == [
        ("test_a.py", "GPU900", 6)]


def test_a_conftest_engine_fixture_name_lets_the_file_through(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "conftest.py").write_text(
        "import pytest\nfrom vllm import LLM\n\n\n@pytest.fixture\ndef engine():\n"
        "    yield LLM('m')\n")
    test = tmp_path / "test_gen.py"
    test.write_text("import gc\n\n\ndef test_gen(engine):\n    gc.collect()\n")
    assert api.may_hold_violation(test.read_bytes(), str(test), Config())
    found = run_module._check_bytes(test.read_bytes(), str(test), Config(), prefilter=True)
    assert [(v.code, v.location.row) for v in found] == [("GPU004", 5)]


def test_a_conftest_factory_fixture_name_lets_the_file_through(tmp_path: Path) -> None:
    """A test calling the factory a conftest's fixture hands out owns the engine it gets,
    though its bytes name no engine: the fixture's name lets it through, in a whole run."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "conftest.py").write_text(
        "import pytest\nfrom vllm import LLM\n\n\n@pytest.fixture\ndef make_llm():\n"
        "    def _make(**kwargs):\n        return LLM('m', **kwargs)\n    return _make\n")
    test = tmp_path / "test_gen.py"
    test.write_text("import gc\n\n\ndef test_gen(make_llm):\n    llm = make_llm()\n"
                    "    del llm\n    gc.collect()\n")
    assert api.may_hold_violation(test.read_bytes(), str(test), Config())
    result = api.check_paths([str(test)], Config(root=str(tmp_path)), jobs=1, cache=False)
    assert [(v.code, v.location.row) for v in result.violations] == [
        ("GPU004", 6), ("GPU004", 7)]


@pytest.mark.parametrize(("source", "admitted"), [
    (b"def test_x():\n    assert 1\n", False),
    (b"import vllm\nvllm.LLM('m')\n", True),
    (b"def test(vllm_runner):\n    pass\n", True),
    (b"def test(vllm_runner_factory):\n    pass\n", True),        # GPU007's factory
    (b"x = 'VLLM_USE_V1'\nmy_vllm_runner = 1\n", False),           # not whole words
    (b"import os\nos.environ['VLLM_X'] = '1'\n", True),              # GPU008
    (b"import os\nx = os.environ.get('VLLM_X')\n", False),           # a read changes nothing
    (b"import os\nenv = dict(os.environ)\n", False),
    (b"import os\nos.environb[b'X'] = b'1'\n", False),               # GPU008 ignores environb
    ("x = 'é'\n".encode(), False),                                 # non-ASCII, names nothing
    ("x = ＬＬＭ('m')\n".encode(), True),                           # NFKC: the identifier LLM
    ("# -*- coding: latin-1 -*-\nx = 'é'\n".encode("latin-1"), False),
    ("# -*- coding: latin-1 -*-\nLLM = 'é'\n".encode("latin-1"), True),
    (b"# -*- coding: utf-7 -*-\nx = 1\n", True),                   # bytes may not be ASCII
    (b"# coding: klingon\nx = 1\n", True),                         # unknown codec: GPU900
    (b"x = '\xff'\n", True),                                        # undecodable: GPU900
    (b"x = 1  # decoding: none\n", False),                          # not a declaration
])
def test_admits(source: bytes, admitted: bool) -> None:
    triggers = triggers_of(enabled_rule_codes(Config()))
    assert prefilter_for(Config(), triggers).admits(source) is admitted


def test_words_follow_config() -> None:
    assert rule_words(Config()) == ("LLM", "VllmRunner", "vllm_runner", "vllm_runner_factory")
    custom = Config(engine_classes=("vllm_omni.Omni",), runner_classes=("OmniRunner",),
                    runner_fixture="omni_runner")
    assert rule_words(custom) == ("Omni", "OmniRunner", "omni_runner", "vllm_runner_factory")
    assert RUNNER_FACTORY_FIXTURE == gpu007.RUNNER_FACTORY_FIXTURE


def test_enabled_rule_codes() -> None:
    # The session registers a rule from outside the package (tests/conftest.py): off by
    # default, only its code in full selects it.
    outside = "GPU050"
    assert outside in RULE_CODES and outside in OPT_IN_CODES
    default = tuple(code for code in RULE_CODES if code != outside)
    assert enabled_rule_codes(Config()) == default
    *first, last = default
    assert enabled_rule_codes(Config(select=("GPU",), ignore=(last,))) == tuple(first)
    assert enabled_rule_codes(Config(), default) == default  # GPU900 is left
    assert enabled_rule_codes(Config(), ("GPU",)) == ()
    assert enabled_rule_codes(Config(select=(last,))) == (last,)
    assert enabled_rule_codes(Config(), tuple(first)) == (last,)
    assert enabled_rule_codes(Config(select=("GPU900",))) == default
    assert enabled_rule_codes(Config(extend_select=(outside,))) == tuple(RULE_CODES)
    assert enabled_rule_codes(Config(select=(outside,))) == (outside,)


ENVIRONMENT_CHANGES = [
    'os.environ["VLLM_USE_V1"] = "1"',
    'os.environ ["VLLM_USE_V1"] = "1"',
    '(os.environ)["VLLM_USE_V1"] = "1"',
    'os.environ \\\n    ["VLLM_USE_V1"] = "1"',
    '(os.environ  # the process environment\n )["VLLM_USE_V1"] = "1"',
    'os.environ["VLLM_USE_V1"] += "1"',
    'del os.environ["VLLM_USE_V1"]',
    'os.environ.update(VLLM_USE_V1="1")',
    'os.environ . update({"VLLM_USE_V1": "1"})',
    'os.environ.\\\n    setdefault("VLLM_USE_V1", "1")',
    'os.environ.pop("VLLM_USE_V1", None)',
    'os.putenv("VLLM_USE_V1", "1")',
    'os.unsetenv("VLLM_USE_V1")',
    'from os import environ\n    environ["VLLM_USE_V1"] = "1"',
    'from os import environ as env\n    env["VLLM_USE_V1"] = "1"',
    'from os import (environ\n        as env)\n    env.pop("VLLM_USE_V1")',
    'from os import unsetenv as unset\n    unset("VLLM_USE_V1")',
    'from os import putenv as put\n\n\ndef test_later():\n    put("VLLM_USE_V1", "1")',
    'from os import environ as env\n\n\ndef test_later():\n    env["VLLM_USE_V1"] = "1"',
]


@pytest.mark.parametrize("change", ENVIRONMENT_CHANGES)
def test_every_environment_change_gpu008_reports_is_admitted(change: str) -> None:
    """The prefilter's test for GPU008 is a superset of what the rule finds: each shape is
    reported by GPU008, and its bytes pass."""
    source = f"import os\n\n\ndef test_env():\n    {change}\n".encode()
    config = Config(select=("GPU008",))
    assert [v.code for v in check_source(source, "test_env.py", config)] == ["GPU008"]
    assert prefilter_for(config, triggers_of(enabled_rule_codes(config))).admits(source)


@pytest.mark.parametrize("text", [
    b"LLM", b"LLM(", b"(LLM", b"xLLM", b"LLMx", b"_LLM", b"LLM_", b"1LLM", b"LLM1",
    b"LLMLLM", b"xLLM LLM", b"xLLM LLMy LLM", "é LLM".encode(), "éLLM".encode(),
    b"a.LLM.b", b"", b"LL M",
])
def test_whole_word_test_matches_the_regular_expression(text: bytes) -> None:
    import re

    from lint_gpu_tests.parsing.prefilter import _has_word

    expected = re.search(rb"(?<![A-Za-z0-9_])LLM(?![A-Za-z0-9_])", text) is not None
    assert _has_word(text, b"LLM") is expected


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("comment", ["", "# café\n"])
def test_gpu008_finds_a_change_below_the_first_function_whatever_the_line_ends(
        newline: str, comment: str) -> None:
    """GPU008 scans only the functions spanning a line where a change may start; those lines
    are counted as ``ast`` counts them (a lone CR ends a line; a non-ASCII module too), also
    for a change that runs on over a line continuation."""
    text = (f"{comment}import os\n\n\ndef test_a():\n    pass\n\n\ndef test_b():\n"
            "    os.environ \\\n        [\"VLLM_USE_V1\"] = \"1\"\n").replace("\n", newline)
    found = check_source(text.encode(), "test_env.py", Config(select=("GPU008",)))
    assert [(v.code, v.location.row) for v in found] == [("GPU008", 9 + bool(comment))]


@pytest.mark.parametrize(("pattern", "run"), [
    ("VLLM_*", "VLLM_"), ("CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
    ("*_DEVICES", "_DEVICES"), ("VLLM_?_LONGER*", "_LONGER"), ("A[BC]DEF", "DEF"),
    ("AB[!C]D", "AB"), ("X[]]YZW", "YZW"), ("AB[CD", "AB[CD"), ("*", ""), ("?*", ""),
    ("[AB]", ""),
])
def test_literal_run_is_what_every_matching_name_contains(pattern: str, run: str) -> None:
    import fnmatch

    assert literal_run(pattern) == run
    for name in ("VLLM_USE_V1", "CUDA_VISIBLE_DEVICES", "ADEVICES", "VLLM_X_LONGER", "ACDEF",
                 "ABXD", "X]YZW", "AB[CD", "A", "B"):
        if fnmatch.fnmatchcase(name, pattern):
            assert run in name


@pytest.mark.parametrize(("source", "patterns", "expected"), [
    (b'os.environ["VLLM_X"] = "1"', ("VLLM_*",), True),
    (b'os.environ["OTHER"] = "1"', ("VLLM_*", "HF_HUB_OFFLINE"), False),
    (b'os.environ["OTHER"] = "1"', ("VLLM_*", "*"), True),
    # Bytes are not decoded for a pattern that is not ASCII: it counts as written.
    (b'os.environ["OTHER"] = "1"', ("\u00c9T\u00c9_*",), True),
    ('os.environ["OTHER"] = "1"', ("\u00c9T\u00c9_*",), False),
    ('os.environ["\u00c9T\u00c9_X"] = "1"', ("\u00c9T\u00c9_*",), True),
])
def test_names_variable(source: bytes | str, patterns: tuple[str, ...], expected: bool) -> None:
    assert names_variable(source, patterns) is expected


@pytest.mark.parametrize(("assignment", "reported"), [
    ('os.environ["VLLM_USE_V1"] = "1"', True),
    ('os.environ[NAME] = "1"', True),
    ('os.environ.update(VLLM_USE_V1="1")', True),
    ('os.environ["MYAPP_VISIBLE_DEVICES"] = "0,1"', False),
    # The literal part of the name is not written whole: GPU008 does not look.
    ('os.environ["VL" "LM_USE_V1"] = "1"', False),
    ('os.environ["\\x56LLM_USE_V1"] = "1"', False),
])
def test_gpu008_looks_only_at_files_naming_a_configured_variable(assignment: str,
                                                                 reported: bool) -> None:
    """GPU008's first test and the prefilter's are one: the file must write the literal part
    of a configured variable's name (``VLLM_`` of ``VLLM_*``), so a file the prefilter keeps
    back holds no GPU008, and one it admits is reported as without the prefilter."""
    source = (f'import os\n\nNAME = "VLLM_USE_V1"\n\n\ndef test_env():\n'
              f'    {assignment}\n').encode()
    if "NAME]" not in assignment:
        source = source.replace(b'NAME = "VLLM_USE_V1"\n', b"")
    config = Config(select=("GPU008",))
    found = [v.code for v in check_source(source, "test_env.py", config)]
    assert found == (["GPU008"] if reported else [])
    admitted = prefilter_for(config, triggers_of(enabled_rule_codes(config))).admits(source)
    assert admitted is reported
    assert run_module._check_bytes(source, "test_env.py", config, prefilter=True) == \
        check_source(source, "test_env.py", config)

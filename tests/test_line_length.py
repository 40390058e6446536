"""The project's line length: where it comes from, and fixes that keep to it.

``line-length`` of ``[tool.gpu-test-lint]``, else ruff's, else black's, else 88, resolved per
file; a signature the added fixture makes too long is wrapped as ruff format wraps it; and
fixed files pass ``ruff check --select E501`` and ``ruff format --check`` under line lengths
79, 88, 100 and 120 when their input did.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lint_gpu_tests.config import Config, ConfigError, ConfigResolver, config_as_toml
from lint_gpu_tests.fixing import fixloop
from lint_gpu_tests.interfaces.cli import cli

FIX_DIR = Path(__file__).parent / "fixtures" / "fix"
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
LONG_SIGNATURE = (
    "from vllm import LLM\n\n\n"
    "def test_generates_with_a_long_name(model_name_parameter, prompts_for_it, number_n):\n"
    "    llm = LLM(model=model_name_parameter)\n"
    "    llm.generate(prompts_for_it * number_n)\n"
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _resolved(tmp_path: Path, relative: str = "tests/test_a.py") -> Config:
    return ConfigResolver(cwd=str(tmp_path)).for_file(str(tmp_path / relative))


def test_default_is_88(tmp_path: Path) -> None:
    config = _resolved(tmp_path)
    assert (config.line_length, config.line_length_source) == (88, "")


def test_ruff_setting_is_taken(tmp_path: Path) -> None:
    pyproject = _write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    config = _resolved(tmp_path)
    assert config.line_length == 100
    assert config.line_length_source == f"{pyproject} [tool.ruff]"


def test_black_setting_is_taken_when_ruff_sets_none(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml",
           "[tool.ruff.lint]\nselect = ['E']\n[tool.black]\nline-length = 79\n")
    assert _resolved(tmp_path).line_length == 79


def test_ruff_wins_over_black(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml",
           "[tool.black]\nline-length = 79\n[tool.ruff]\nline-length = 120\n")
    assert _resolved(tmp_path).line_length == 120


def test_own_setting_wins_over_ruff(tmp_path: Path) -> None:
    pyproject = _write(tmp_path / "pyproject.toml",
                       "[tool.ruff]\nline-length = 100\n[tool.gpu-test-lint]\nline-length = 79\n")
    config = _resolved(tmp_path)
    assert config.line_length == 79
    assert config.line_length_source == f"{pyproject} [tool.gpu-test-lint]"


def test_nearest_ruff_toml_wins(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml",
           "[tool.ruff]\nline-length = 100\n[tool.gpu-test-lint]\nselect = ['GPU']\n")
    ruff_toml = _write(tmp_path / "tests" / "ruff.toml", "line-length = 120\n")
    dotted = _write(tmp_path / "other" / ".ruff.toml", "line-length = 79\n")
    resolver = ConfigResolver(cwd=str(tmp_path))
    inner = resolver.for_file(str(tmp_path / "tests" / "test_a.py"))
    assert (inner.line_length, inner.line_length_source) == (120, str(ruff_toml))
    assert resolver.for_file(str(tmp_path / "other" / "test_b.py")).line_length_source == \
        str(dotted)
    assert resolver.for_file(str(tmp_path / "test_c.py")).line_length == 100
    # the rest of the settings are the same config file's
    assert inner.source == str(tmp_path / "pyproject.toml")


def test_a_ready_config_is_taken_as_it_is(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    resolver = ConfigResolver(fixed=Config(), cwd=str(tmp_path))
    assert resolver.for_file(str(tmp_path / "test_a.py")).line_length == 88


@pytest.mark.parametrize("value", ['"100"', "0", "true", "321"])
def test_bad_line_length_is_an_error(tmp_path: Path, value: str) -> None:
    _write(tmp_path / "pyproject.toml", f"[tool.gpu-test-lint]\nline-length = {value}\n")
    with pytest.raises(ConfigError, match="line-length"):
        _resolved(tmp_path)


def test_show_settings_names_the_source(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pyproject = _write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    _write(tmp_path / "tests" / "test_a.py", "def test_a():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["check", "--show-settings", "tests"],
                                prog_name="gpu-test-lint")
    assert result.exit_code == 0, result.output
    assert f"line-length = 100  # from {pyproject} [tool.ruff]\n" in result.output
    assert "line-length = 88  # from the default\n" in config_as_toml(Config())


def _fixed(source: str, width: int) -> str:
    outcome = fixloop.fix_source(source.encode(), "tests/test_a.py",
                                 Config(line_length=width), unsafe=True)
    assert outcome.new_source is not None
    return outcome.new_source.decode()


def test_signature_that_fits_stays_on_one_line() -> None:
    fixed = _fixed(LONG_SIGNATURE, 120)
    assert "def test_generates_with_a_long_name(model_name_parameter, prompts_for_it, " \
        "number_n, vllm_runner):\n" in fixed
    assert "with vllm_runner(model=model_name_parameter) as runner:\n" in fixed


def test_signature_hugs_its_parameters_when_they_fit() -> None:
    assert "def test_generates_with_a_long_name(\n" \
        "    model_name_parameter, prompts_for_it, number_n, vllm_runner\n):\n" in \
        _fixed(LONG_SIGNATURE, 88)


def test_signature_one_parameter_a_line_otherwise() -> None:
    source = LONG_SIGNATURE.replace("test_generates_with_a_long_name", "test_x")
    assert "def test_x(\n    model_name_parameter,\n" \
        "    prompts_for_it,\n    number_n,\n    vllm_runner,\n):\n" in _fixed(source, 62)


def test_signature_already_too_long_is_left_alone() -> None:
    """The user's own over-long line is theirs: the fix appends, as ruff's E501 was
    already reported on it."""
    assert "def test_generates_with_a_long_name(model_name_parameter, prompts_for_it, " \
        "number_n, vllm_runner):\n" in _fixed(LONG_SIGNATURE, 70)


def test_monkeypatch_parameter_wraps_too() -> None:
    source = ("import os\n\n\n"
              "def test_sets_the_environment_for_a_model(model_name_parameter, n):\n"
              "    os.environ['VLLM_USE_V1'] = '1'\n")
    assert "def test_sets_the_environment_for_a_model(\n" \
        "    model_name_parameter, n, monkeypatch\n):\n" in _fixed(source, 79)


#: Fix fixtures whose fix adds a fixture parameter or writes a with-header, and the new case.
#: Not yet: ``mapping_*`` (the docstring of the ``_runner_kwargs`` helper a mapping fix adds is
#: 90 characters wide); the ExitStack group rewrites (``engine_group_*``: the
#: ``weakref.proxy(stack.enter_context(...))`` line is not laid out as ruff format would);
#: ``closure_capture`` (user lines the new block indents by 4 pass 79 and 88: the fix does not
#: re-wrap the user's own statements).
STYLE_CASES = ("signature_wrapped", "multiline_params_trailing_comma", "argument_mapping",
               "target_vllm_defaults", "env_setitem_test", "two_engines_nested",
               "fixture_yield_engine", "env_update_setdefault", "bare_construction_statement",
               "engine_in_loop", "identity_check", "import_sections_kept",
               "fixture_yields_proxy", "aligned_continuation", "async_test",
               "try_finally_extra_statement", "engine_owner_class",
               "runner_without_with_line_length", "runner_fixture_without_with",
               "runner_fixture_yields_runner", "proxy_line_length", "strong_alias")


def _ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert RUFF is not None
    return subprocess.run([RUFF, *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
@pytest.mark.parametrize("width", [79, 88, 100, 120])
@pytest.mark.parametrize("case", STYLE_CASES)
def test_fixed_file_keeps_to_ruff(tmp_path: Path, case: str, width: int) -> None:
    """The case's input formatted by ruff at ``width``, fixed at ``width``, is still
    formatted and has no line over ``width``."""
    config_file = FIX_DIR / case / "config.toml"
    target = "vllm" if config_file.is_file() and "vllm" in config_file.read_text() else \
        "bundled"
    flags = ("--isolated", "--line-length", str(width), "--no-cache")
    before = _write(tmp_path / "test_case.py", (FIX_DIR / case / "before.py").read_text())
    _ruff("format", *flags, before.name, cwd=tmp_path)
    formatted = before.read_text()
    outcome = fixloop.fix_source(
        formatted.encode(), "tests/test_case.py",
        Config(line_length=width, target=target), unsafe=True)
    assert outcome.new_source is not None, "the fixture's fix no longer applies"
    before.write_bytes(outcome.new_source)
    long_lines = _ruff("check", *flags, "--select", "E501", before.name, cwd=tmp_path)
    assert long_lines.returncode == 0, long_lines.stdout
    formatted_after = _ruff("format", *flags, "--diff", before.name, cwd=tmp_path)
    assert formatted_after.returncode == 0, formatted_after.stdout


# ---------------------------------------------------------------- ruff's SIM117, minimal diffs
def _fixed_at(tmp_path: Path, source: str, width: int = 88, target: str = "bundled",
              pyproject: str = "") -> str:
    """``source`` fixed as ``tests/test_a.py`` of a project under ``tmp_path`` (with
    ``pyproject``'s text as its ``pyproject.toml`` when given; with target ``vllm``, a
    ``tests/conftest.py`` defining vLLM's ``vllm_runner`` fixture, as vLLM's tree does)."""
    if pyproject:
        _write(tmp_path / "pyproject.toml", pyproject)
    if target == "vllm":
        _write(tmp_path / "tests" / "conftest.py",
               'import pytest\n\n\n@pytest.fixture(scope="session")\ndef vllm_runner():\n'
               "    return object\n")
    path = _write(tmp_path / "tests" / "test_a.py", source)
    outcome = fixloop.fix_source(source.encode(), str(path),
                                 Config(line_length=width, target=target), unsafe=True)
    assert outcome.new_source is not None
    return outcome.new_source.decode()


BARE_IN_WITH = (
    "from unittest.mock import patch\n\nfrom vllm import LLM\n\n\n"
    "def test_builds(arch):\n"
    "    with patch(\"vllm.core.init\", fake):\n"
    "        LLM(model=arch, tokenizer=TOKENIZER{more})\n"
)


def test_bare_construction_in_a_with_joins_its_header(tmp_path: Path) -> None:
    """ruff's SIM117: no nested with-statement; one line when it fits."""
    fixed = _fixed_at(tmp_path, BARE_IN_WITH.format(more=""))
    assert fixed.endswith(
        "def test_builds(arch, vllm_runner):\n"
        "    with patch(\"vllm.core.init\", fake), vllm_runner(model=arch, tokenizer=TOKENIZER):\n"
        "        pass\n")


def test_joined_header_too_long_is_parenthesized(tmp_path: Path) -> None:
    fixed = _fixed_at(tmp_path, BARE_IN_WITH.format(more=", load_format=\"dummy\""))
    assert fixed.endswith(
        "    with (\n"
        "        patch(\"vllm.core.init\", fake),\n"
        "        vllm_runner(model=arch, tokenizer=TOKENIZER, load_format=\"dummy\"),\n"
        "    ):\n"
        "        pass\n")
    fixed = _fixed_at(tmp_path, BARE_IN_WITH.format(more=", load_format=\"dummy\""), width=66)
    assert fixed.endswith(
        "    with (\n"
        "        patch(\"vllm.core.init\", fake),\n"
        "        vllm_runner(\n"
        "            model=arch, tokenizer=TOKENIZER, load_format=\"dummy\"\n"
        "        ),\n"
        "    ):\n"
        "        pass\n")


def test_no_parenthesized_with_for_python_before_3_9(tmp_path: Path) -> None:
    """``with (a, b):`` is a syntax error before Python 3.9: a project that declares 3.8
    keeps the nested statements when one line is too short."""
    source = BARE_IN_WITH.format(more=", load_format=\"dummy\"")
    fixed = _fixed_at(tmp_path, source, pyproject="[project]\nrequires-python = \">=3.8\"\n")
    assert fixed.endswith(
        "    with patch(\"vllm.core.init\", fake):\n"
        "        with vllm_runner(model=arch, tokenizer=TOKENIZER, load_format=\"dummy\"):\n"
        "            pass\n")
    # ruff's target-version wins over requires-python, as in ruff
    fixed = _fixed_at(tmp_path, source, pyproject="[project]\nrequires-python = \">=3.8\"\n"
                      "[tool.ruff]\ntarget-version = \"py310\"\n")
    assert "    with (\n" in fixed


def test_keywords_and_order_are_kept(tmp_path: Path) -> None:
    """The bundled runner takes ``model=`` and ``tokenizer=``; vLLM's gets the model first
    (``model_name=`` where it is not the first keyword) and ``tokenizer_name=``; no
    argument moves."""
    source = ("from vllm import LLM\n\n\n"
              "def test_a():\n"
              "    llm = LLM(model=M, tokenizer=T, seed=0)\n"
              "    llm.generate(['x'])\n\n\n"
              "def test_b():\n"
              "    llm = LLM(seed=0, model=M)  # seeded\n"
              "    llm.generate(['x'])\n")
    bundled = _fixed_at(tmp_path, source)
    assert "    with vllm_runner(model=M, tokenizer=T, seed=0) as runner:\n" in bundled
    assert "    with vllm_runner(seed=0, model=M) as runner:  # seeded\n" in bundled
    vllm = _fixed_at(tmp_path, source, width=200, target="vllm")
    assert "    with vllm_runner(M, tokenizer_name=T, seed=0, trust_remote_code=False, " in vllm
    assert "    with vllm_runner(seed=0, model_name=M, trust_remote_code=False, " in vllm


def test_a_trailing_comment_splits_no_call(tmp_path: Path) -> None:
    """A comment that already ran past the width does not split the call; one the longer
    header pushes past it gets ruff's layout (the arguments on a line of their own), never
    one argument a line."""
    comment = "# the small model: its weights are cached on the CI runners"
    source = ("from vllm import LLM\n\n\n"
              "def test_a():\n"
              f"    llm = LLM(MODEL)  {comment}\n"
              "    llm.generate(['x'])\n")
    assert f"    with vllm_runner(MODEL) as runner:  {comment}\n" in \
        _fixed_at(tmp_path, source, width=70)
    assert f"    with vllm_runner(\n        MODEL\n    ) as runner:  {comment}\n" in \
        _fixed_at(tmp_path, source, width=88)


@pytest.mark.parametrize(("text", "version"), [
    ("[project]\nrequires-python = \">=3.9,<3.13\"\n", (3, 9)),
    ("[project]\nrequires-python = \"~=3.10\"\n", (3, 10)),
    ("[project]\nrequires-python = \">3.8\"\n", (3, 9)),
    ("[tool.ruff]\ntarget-version = \"py38\"\n[project]\nrequires-python = \">=3.11\"\n",
     (3, 8)),
    ("[tool.black]\nline-length = 100\n", None),
])
def test_oldest_python(tmp_path: Path, text: str, version: tuple[int, int] | None) -> None:
    from lint_gpu_tests.config import oldest_python

    _write(tmp_path / "pyproject.toml", text)
    (tmp_path / "tests").mkdir()
    assert oldest_python(tmp_path / "tests") == version


def test_the_floor_is_resolved_per_directory(tmp_path: Path) -> None:
    """The resolver fills in the oldest Python of each file's directory; a library caller's
    own config is taken as it is, the floor left for the fix to look up."""
    from lint_gpu_tests.config import UNRESOLVED_FLOOR

    _write(tmp_path / "pyproject.toml", "[tool.ruff]\ntarget-version = \"py38\"\n")
    _write(tmp_path / "new" / "ruff.toml", "target-version = \"py311\"\n")
    resolver = ConfigResolver(cwd=str(tmp_path))
    assert resolver.for_file(str(tmp_path / "tests" / "test_a.py")).python_floor == (3, 8)
    assert resolver.for_file(str(tmp_path / "new" / "test_b.py")).python_floor == (3, 11)
    assert ConfigResolver(cwd=str(tmp_path.parent)).for_file(
        str(tmp_path.parent / "test_c.py")).python_floor is None
    assert ConfigResolver.of(Config()).for_file(
        str(tmp_path / "tests" / "test_a.py")).python_floor == UNRESOLVED_FLOOR
    # What only fixes use leaves the cache's key alone (the cache keeps no fixes).
    assert Config().fingerprint() == Config(python_floor=(3, 8), line_length=120).fingerprint()


def test_a_run_that_fixes_nothing_looks_up_nothing_fixes_use(tmp_path: Path) -> None:
    from lint_gpu_tests.config import UNRESOLVED_FLOOR

    _write(tmp_path / "pyproject.toml",
           "[tool.ruff]\ntarget-version = \"py38\"\nline-length = 100\n")
    path = str(tmp_path / "tests" / "test_a.py")
    resolver = ConfigResolver(cwd=str(tmp_path), fix_settings=False)
    plain = resolver.for_file(path)
    assert (plain.python_floor, plain.line_length) == (UNRESOLVED_FLOOR, 88)
    resolver.want_fix_settings()
    sized = resolver.for_file(path)
    assert (sized.python_floor, sized.line_length) == ((3, 8), 100)
    assert sized.fingerprint() == plain.fingerprint()


def test_the_fix_reads_the_floor_from_the_config(tmp_path: Path) -> None:
    """A floor the config carries decides the with-statement's shape, whatever the files
    beside the module say; one not resolved is looked up beside the module, as before."""
    source = BARE_IN_WITH.format(more=", load_format=\"dummy\"")
    path = _write(tmp_path / "tests" / "test_a.py", source)
    _write(tmp_path / "pyproject.toml", "[tool.ruff]\ntarget-version = \"py38\"\n")

    def fixed(config: Config) -> str:
        outcome = fixloop.fix_source(source.encode(), str(path), config, unsafe=True)
        assert outcome.new_source is not None
        return outcome.new_source.decode()

    nested = "        with vllm_runner(model=arch, tokenizer=TOKENIZER, load_format=\"dummy\"):\n"
    assert nested in fixed(Config())  # looked up: py38
    assert nested in fixed(Config(python_floor=(3, 8)))
    assert "    with (\n" in fixed(Config(python_floor=(3, 10)))
    assert "    with (\n" in fixed(Config(python_floor=None))  # the project declares none
    resolved = ConfigResolver(cwd=str(tmp_path)).for_file(str(path))
    assert nested in fixed(resolved)


def test_a_run_looks_the_floor_up_once_per_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """However many files and fix passes: one look-up per directory, by the resolver; the
    codemods read the floor from the config."""
    from lint_gpu_tests import config as config_module
    from lint_gpu_tests.api import check_paths
    from lint_gpu_tests.codemods import _base

    calls: list[str] = []
    real = config_module.oldest_python

    def counting(directory: str, memo: dict[str, tuple[int, int] | None] | None = None
                 ) -> tuple[int, int] | None:
        calls.append(str(directory))
        return real(directory, memo)

    monkeypatch.setattr(config_module, "oldest_python", counting)
    monkeypatch.setattr(_base, "oldest_python", counting)
    _write(tmp_path / "pyproject.toml", "[tool.ruff]\ntarget-version = \"py38\"\n")
    source = BARE_IN_WITH.format(more=", load_format=\"dummy\"")
    for name in ("tests/test_a.py", "tests/test_b.py", "tests/unit/test_c.py"):
        _write(tmp_path / name, source)
    result = check_paths([str(tmp_path)], ConfigResolver(cwd=str(tmp_path)), fix=True,
                         unsafe_fixes=True, jobs=1, cache=False)
    assert len(result.fixed) == 3 and not result.errors
    # The root too: discovery asks its settings (its excludes).
    assert sorted(calls) == [str(tmp_path), str(tmp_path / "tests"),
                             str(tmp_path / "tests" / "unit")]
    assert "        with vllm_runner(" in (tmp_path / "tests" / "unit" / "test_c.py").read_text()

"""Fix units across modules (``lint_gpu_tests/fixing/tree_units.py``): a factory helper of one
module and its callers in others, on the trees under ``tests/fixtures/xunit/`` (described in
its ``README.md``): every report, the exact fixed source of every file, the diff of every
file, all or nothing."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, ConfigResolver
from lint_gpu_tests.fixing import tree_units
from lint_gpu_tests.ftypes import Applicability
from lint_gpu_tests.parsing import writer
from lint_gpu_tests.running.run import RunResult

TREES = Path(__file__).parent / "fixtures" / "xunit"

UNIT_FILES = ("tests/utils.py", "tests/lora/test_single.py", "tests/lora/test_multi.py")
NO_UNIT = ("the engine comes from `build_llm()`, defined in `tests/utils.py` (line 4): a "
           "helper of another module that builds and returns it, and its fix with every call "
           "of it in the tree has none: {why}")
IDENTITY = ("the call of `build_llm()` in `test_generate()` of `tests/test_identity.py` (line "
            "7): `id()` on the engine sees a `weakref.proxy`, not the engine")

Report = tuple[str, int, int, str, Applicability | None, str | None]


def _tree(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(TREES / name, root)
    return root


def _run(root: Path, paths: tuple[str, ...] = ("tests",), *,
         config: Config | ConfigResolver | None = None, **changes: object) -> list[Report]:
    """Every report of a check of ``paths`` from ``root`` (default settings, or ``config``:
    ``ConfigResolver()`` takes the tree's own config files)."""
    old = os.getcwd()
    os.chdir(root)
    try:
        result = check_paths(list(paths), config or Config(root=str(root)),
                             **{"jobs": 1, "cache": False, **changes})
    finally:
        os.chdir(old)
    assert not result.errors
    return [(v.path, v.location.row, v.location.column, v.code,
             v.fix.applicability if v.fix is not None else None,
             v.fix.reason if v.fix is not None else None) for v in result.violations]


def _write_tree(root: Path, files: dict[str, str]) -> Path:
    """A project at ``root`` (its ``pyproject.toml``) with ``files`` (path -> text)."""
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for path, text in files.items():
        (root / path).write_text(text)
    return root


def _sources(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))}


def test_check_reports_the_unit_on_every_violation_it_removes(tmp_path: Path) -> None:
    root = _tree(tmp_path, "unit")
    safe = Applicability.SAFE
    # Each call of the helper, out of the rules' scope in tests/utils.py, builds an engine
    # (GPU001), cleaned up by hand or not (test_multi.py line 15).
    assert _run(root) == [
        ("tests/lora/test_multi.py", 8, 11, "GPU001", safe, ""),
        ("tests/lora/test_multi.py", 10, 5, "GPU004", safe, ""),
        ("tests/lora/test_multi.py", 11, 5, "GPU004", safe, ""),
        ("tests/lora/test_multi.py", 15, 11, "GPU001", safe, ""),
        ("tests/lora/test_single.py", 7, 11, "GPU001", safe, ""),
        ("tests/lora/test_single.py", 8, 5, "GPU003", safe, ""),
    ]


def test_fix_rewrites_the_helper_and_every_caller(tmp_path: Path) -> None:
    root = _tree(tmp_path, "unit")
    old = os.getcwd()
    os.chdir(root)
    try:
        result = check_paths(["tests"], Config(root=str(root)), jobs=1, cache=False, fix=True)
    finally:
        os.chdir(old)
    assert not result.errors and result.violations == []
    assert [(v.path, v.location.row, v.code) for v in result.fixed] == [
        ("tests/lora/test_multi.py", 8, "GPU001"),
        ("tests/lora/test_multi.py", 10, "GPU004"),
        ("tests/lora/test_multi.py", 11, "GPU004"),
        ("tests/lora/test_multi.py", 15, "GPU001"),
        ("tests/lora/test_single.py", 7, "GPU001"),
        ("tests/lora/test_single.py", 8, "GPU003"),
    ]
    assert _sources(root / "tests") == _sources(TREES / "unit_fixed" / "tests")
    assert _run(root) == []


def test_diff_shows_every_file_of_the_unit_and_writes_none(tmp_path: Path) -> None:
    root = _tree(tmp_path, "unit")
    before = _sources(root)
    old = os.getcwd()
    os.chdir(root)
    try:
        result = check_paths(["tests"], Config(root=str(root)), jobs=1, cache=False, diff=True)
    finally:
        os.chdir(old)
    assert sorted(result.diffs) == sorted(UNIT_FILES)
    assert _sources(root) == before
    fixed = TREES / "unit_fixed"
    for path in UNIT_FILES:
        added = {line[1:] for line in result.diffs[path].splitlines()
                 if line.startswith("+") and not line.startswith("+++")}
        assert added <= set((fixed / path).read_text().splitlines())


def test_a_use_other_than_a_call_leaves_the_unit_without_a_fix(tmp_path: Path) -> None:
    root = _tree(tmp_path, "value_use")
    before = _sources(root)
    why = NO_UNIT.format(why="`build_llm` is used other than by a call in "
                             "`tests/test_value.py` (line 18): what receives it would get a "
                             "context manager instead of an engine")
    expected = [("tests/test_value.py", 7, 11, "GPU001", Applicability.NONE, why),
                ("tests/test_value.py", 9, 5, "GPU004", Applicability.NONE, why),
                ("tests/test_value.py", 10, 5, "GPU004", Applicability.NONE, why)]
    assert _run(root) == expected
    assert _run(root, fix=True, unsafe_fixes=True) == expected
    assert _sources(root) == before


def test_a_caller_outside_the_checked_paths_leaves_the_unit_without_a_fix(
        tmp_path: Path) -> None:
    root = _tree(tmp_path, "outside")
    before = _sources(root)
    why = NO_UNIT.format(why="`build_llm()` is also used in `tests/other/test_other.py` "
                             "(line 5), a module this run does not check: the helper and "
                             "every caller are fixed together or not at all")
    expected = [("tests/lora/test_lora.py", 7, 11, "GPU001", Applicability.NONE, why),
                ("tests/lora/test_lora.py", 9, 5, "GPU004", Applicability.NONE, why),
                ("tests/lora/test_lora.py", 10, 5, "GPU004", Applicability.NONE, why)]
    assert _run(root, ("tests/lora",)) == expected
    assert _run(root, ("tests/lora",), fix=True, unsafe_fixes=True) == expected
    assert _sources(root) == before
    # Checked whole, the tree's unit takes both test modules.
    assert _run(root, fix=True) == []


def test_one_unsafe_caller_makes_the_whole_unit_unsafe(tmp_path: Path) -> None:
    root = _tree(tmp_path, "unsafe")
    before = _sources(root)
    unsafe = Applicability.UNSAFE
    expected = [("tests/test_identity.py", 7, 11, "GPU001", unsafe, IDENTITY),
                ("tests/test_identity.py", 10, 5, "GPU004", unsafe, IDENTITY),
                ("tests/test_identity.py", 11, 5, "GPU004", unsafe, IDENTITY),
                ("tests/test_plain.py", 5, 11, "GPU001", unsafe, IDENTITY),
                ("tests/test_plain.py", 6, 5, "GPU003", unsafe, IDENTITY)]
    assert _run(root) == expected
    assert _run(root, fix=True) == expected
    assert _sources(root) == before
    assert _run(root, fix=True, unsafe_fixes=True) == []
    assert _sources(root / "tests") == _sources(TREES / "unsafe_fixed" / "tests")


def test_a_failed_write_leaves_no_file_of_the_unit_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path, "unit")
    before = _sources(root)
    real = os.replace
    calls: list[str] = []

    def second_fails(src: str, dst: object) -> None:
        calls.append(src)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.os, "replace", second_fails)
    old = os.getcwd()
    os.chdir(root)
    try:
        result = check_paths(["tests"], Config(root=str(root)), jobs=1, cache=False, fix=True)
    finally:
        os.chdir(old)
    assert len(calls) == 3  # two renames, then the first file's old bytes put back
    assert sorted(path for path, _ in result.errors) == sorted(UNIT_FILES)
    assert {message for _, message in result.errors} == {
        "cannot write the fixed files of `setup_engine()`: [Errno 28] No space left on device"}
    assert _sources(root) == before
    assert not [p for p in root.rglob("*.tmp")]


def test_atomic_write_all_writes_every_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_bytes(b"old\n")
    first.chmod(0o600)
    writer.atomic_write_all({str(first): b"one\n", str(second): b"two\n"})
    assert (first.read_bytes(), second.read_bytes()) == (b"one\n", b"two\n")
    assert first.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


def test_a_helper_module_beside_its_tests_is_fixed_with_them(tmp_path: Path) -> None:
    # engine_helpers.py sorts before the test module in their directory: the prefilter the
    # test module gets still names the helper (the helper module's own leaves it out).
    root = _tree(tmp_path, "beside")
    safe = Applicability.SAFE
    assert _run(root) == [("tests/test_beside.py", 7, 11, "GPU001", safe, ""),
                          ("tests/test_beside.py", 9, 5, "GPU004", safe, ""),
                          ("tests/test_beside.py", 10, 5, "GPU004", safe, "")]
    assert _run(root, fix=True) == []
    assert (root / "tests" / "test_beside.py").read_text() == (
        "from engine_helpers import setup_engine\n\n\n"
        "def test_generate():\n"
        "    with setup_engine(0) as llm:\n"
        "        assert llm.generate([\"hi\"])\n")
    assert (root / "tests" / "engine_helpers.py").read_text() == (
        "import contextlib\nimport weakref\n\n"
        "from lint_gpu_tests.runtime import VllmRunner\n\n\n"
        "@contextlib.contextmanager\n"
        "def setup_engine(seed):\n"
        "    with VllmRunner(\"facebook/opt-125m\", seed=seed) as runner:\n"
        "        yield weakref.proxy(runner.llm)\n")


def _run_vllm(root: Path, **changes: object) -> list[Report]:
    """:func:`_run` with the settings of the tree's own ``.gpu-test-lint.toml``."""
    return _run(root, config=ConfigResolver(), **changes)


VLLM_UTILS = (
    "import contextlib\n"
    "import weakref\n\n"
    "from vllm.config import CompilationConfig\n\n"
    "from tests.conftest import VllmRunner\n\n"
    "MODEL = \"facebook/opt-125m\"\n\n\n"
    "@contextlib.contextmanager\n"
    "def setup_engine(num_loras):\n"
    "    with VllmRunner(\n"
    "        MODEL,\n"
    "        enable_lora=True,\n"
    "        max_loras=num_loras,\n"
    "        tokenizer_name=MODEL,\n"
    "        trust_remote_code=False,\n"
    "        max_model_len=None,\n"
    "        block_size=None,\n"
    "        enable_chunked_prefill=None,\n"
    "        compilation_config=CompilationConfig(),\n"
    "    ) as runner:\n"
    "        yield weakref.proxy(runner.llm)\n")


def test_target_vllm_unit_enters_vllm_runner_from_tests_conftest(tmp_path: Path) -> None:
    # The helper imports vLLM's runner class as vLLM's tests do; its arguments are mapped
    # as for every fix of the target (the model first, `tokenizer_name=`, the runner's
    # differing defaults spelled out); the callers are rewritten as with the bundled runner.
    root = _tree(tmp_path, "vllm")
    safe = Applicability.SAFE
    assert _run_vllm(root) == [("tests/lora/test_multi.py", 8, 11, "GPU001", safe, ""),
                               ("tests/lora/test_multi.py", 10, 5, "GPU004", safe, ""),
                               ("tests/lora/test_multi.py", 11, 5, "GPU004", safe, ""),
                               ("tests/lora/test_multi.py", 15, 11, "GPU001", safe, ""),
                               ("tests/lora/test_single.py", 7, 11, "GPU001", safe, ""),
                               ("tests/lora/test_single.py", 8, 5, "GPU003", safe, "")]
    assert _run_vllm(root, fix=True) == []
    assert (root / "tests" / "utils.py").read_text() == VLLM_UTILS
    assert (root / "tests" / "lora" / "test_single.py").read_text() == (
        "from tests.utils import setup_engine\n\n\n"
        "def test_single_lora():\n"
        "    with setup_engine(1) as llm:\n"
        "        assert llm.generate([\"hi\"])\n")
    assert _sources(root) == _sources(TREES / "vllm_fixed")
    assert _run_vllm(root) == []


def test_target_vllm_helper_in_tests_conftest_enters_its_own_runner(tmp_path: Path) -> None:
    # A helper of tests/conftest.py itself: the class is the module's own, nothing imported.
    root = _tree(tmp_path, "vllm")
    tests = root / "tests"
    helper = (tests / "utils.py").read_text().replace("from vllm import LLM\n\n", "")
    (tests / "conftest.py").write_text((tests / "conftest.py").read_text() + "\n\n" + helper)
    (tests / "utils.py").unlink()
    for test in (tests / "lora").glob("test_*.py"):
        test.write_text(test.read_text().replace("utils", "conftest"))
    assert _run_vllm(root, fix=True) == []
    assert (tests / "conftest.py").read_text() == (
        "import contextlib\n"
        "import weakref\n\n"
        "import pytest\n"
        "from vllm import LLM\n"
        "from vllm.config import CompilationConfig\n\n\n"
        "class VllmRunner:\n"
        "    def __init__(self, model_name, **kwargs):\n"
        "        self.llm = LLM(model=model_name, **kwargs)\n\n"
        "    def __enter__(self):\n"
        "        return self\n\n"
        "    def __exit__(self, *exc):\n"
        "        del self.llm\n\n\n"
        "@pytest.fixture(scope=\"session\")\n"
        "def vllm_runner():\n"
        "    return VllmRunner\n\n\n"
        + VLLM_UTILS.split("\n\n", 3)[3])


@pytest.mark.parametrize(("conftest", "missing"), [
    (None, "the project has no tests/conftest.py"),
    ("import pytest\n", "the project's tests/conftest.py does not define `VllmRunner`"),
])
def test_target_vllm_unit_without_vllm_runner_has_no_fix(
        tmp_path: Path, conftest: str | None, missing: str) -> None:
    root = _tree(tmp_path, "vllm")
    if conftest is None:
        (root / "tests" / "conftest.py").unlink()
    else:
        (root / "tests" / "conftest.py").write_text(conftest)
    before = _sources(root)
    why = ("the engine comes from `setup_engine()`, defined in `tests/utils.py` (line 6): a "
           "helper of another module that builds and returns it, and its fix with every call "
           "of it in the tree has none: `target = \"vllm\"` imports `VllmRunner` from "
           f"`tests.conftest`, and {missing}")
    none = Applicability.NONE
    expected = [("tests/lora/test_multi.py", 8, 11, "GPU001", none, why),
                ("tests/lora/test_multi.py", 10, 5, "GPU004", none, why),
                ("tests/lora/test_multi.py", 11, 5, "GPU004", none, why),
                ("tests/lora/test_multi.py", 15, 11, "GPU001", none, why),
                ("tests/lora/test_single.py", 7, 11, "GPU001", none, why),
                ("tests/lora/test_single.py", 8, 5, "GPU003", none, why)]
    assert _run_vllm(root) == expected
    assert _run_vllm(root, fix=True, unsafe_fixes=True) == expected
    assert _sources(root) == before


def test_a_helper_module_the_run_does_not_check_gets_its_own_settings(tmp_path: Path) -> None:
    # Only the test modules are named: each unit's helper module is fixed with its own
    # settings (the `target` of its nearest config file), not with the first caller's.
    (tmp_path / "pyproject.toml").write_text("")
    shutil.copytree(TREES / "vllm", tmp_path / "a_vllm")
    shutil.copytree(TREES / "unit", tmp_path / "b_unit")
    (tmp_path / "b_unit" / "pyproject.toml").unlink()
    tests = [f"{tree}/tests/lora/{name}" for tree in ("a_vllm", "b_unit")
             for name in ("test_multi.py", "test_single.py")]
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = check_paths(tests, ConfigResolver(), jobs=1, cache=False, fix=True)
    finally:
        os.chdir(old)
    assert not result.errors and result.violations == []
    assert (tmp_path / "a_vllm" / "tests" / "utils.py").read_text() == VLLM_UTILS
    assert (tmp_path / "b_unit" / "tests" / "utils.py").read_text() == \
        (TREES / "unit_fixed" / "tests" / "utils.py").read_text()


def _age(root: Path) -> None:
    """Date every file a minute back, so the cache trusts the files' status."""
    past = time.time() - 60
    for path in root.rglob("*"):
        os.utime(path, (past, past))


def test_a_report_only_run_keeps_what_the_units_left_until_a_file_of_the_tree_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path, "unit")
    _age(root)
    cached = {"cache": True, "cache_dir": str(tmp_path / "cache")}
    first = _run(root, **cached)
    assert first == _run(root)

    def planned(*args: object, **kwargs: object) -> list[tree_units.TreeUnit]:
        raise AssertionError("the units were planned again")

    with monkeypatch.context() as patched:
        patched.setattr(tree_units, "plan_tree_units", planned)
        assert _run(root, **cached) == first
    # a use of the helper other than a call, in a caller: the unit has no fix any more
    caller = root / "tests" / "lora" / "test_multi.py"
    caller.write_text(caller.read_text() + "\n\nKEEP = make\n")
    _age(root)
    changed = _run(root, **cached)
    assert changed == _run(root) != first
    assert {r[4] for r in changed} == {Applicability.NONE}


def test_a_fixing_run_plans_the_units_the_cache_keeps(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path, "unit")
    _age(root)
    cached = {"cache": True, "cache_dir": str(tmp_path / "cache")}
    _run(root, **cached)
    calls: list[object] = []
    real = tree_units.plan_tree_units

    def planned(*args: object, **kwargs: object) -> list[tree_units.TreeUnit]:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tree_units, "plan_tree_units", planned)
    _run(root, diff=True, **cached)
    assert len(calls) == 1
    assert _sources(root / "tests") == _sources(TREES / "unit" / "tests")


@pytest.mark.parametrize(("name", "paths", "jobs"), [
    ("unit", ("tests",), 1), ("unit", ("tests",), 2), ("value_use", ("tests",), 1),
    ("outside", ("tests/lora",), 1), ("outside", ("tests",), 1), ("unsafe", ("tests",), 1),
    ("beside", ("tests",), 1),
])
def test_a_report_only_run_plans_its_units_on_what_the_checking_processes_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, paths: tuple[str, ...],
        jobs: int) -> None:
    """The process that checks a caller plans its calls (:func:`tree_units.caller_record`):
    the run's units check no caller again and report exactly what checking it again
    reports."""
    root = _tree(tmp_path, name)
    checked_again: list[str] = []
    real_check = tree_units.check_module

    def check(source: bytes, path: str, *args: object) -> object:
        checked_again.append(path)
        return real_check(source, path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(tree_units, "check_module", check)
    helpers = {"tests/utils.py", "tests/engine_helpers.py"}  # analysed for the unit's plan
    recorded = _run(root, paths, jobs=jobs)
    assert set(checked_again) <= helpers
    monkeypatch.setattr(tree_units, "caller_record", lambda module, source: None)
    assert _run(root, paths, jobs=jobs) == recorded
    assert set(checked_again) - helpers  # without the records each caller is checked again


def test_a_recorded_caller_that_is_also_a_helpers_module_is_analysed_for_that_unit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test module that calls a helper of another module (so the checking process records
    it) and defines a helper a third module imports: that helper's unit needs the module's
    analysis, which is made for it; the module is a member of both units, and each keeps
    what the other relabelled (the helper's GPU001 carries its unit's fix); the reports
    equal those of a run without records."""
    root = _write_tree(tmp_path / "tree", {
        "tests/utils.py": "from vllm import LLM\n\n\ndef make_other():\n    return LLM('o')\n",
        "tests/test_a.py":
            "import gc\n\nfrom vllm import LLM\n\nfrom tests.utils import make_other\n\n\n"
            "def setup_engine(size):\n    return LLM('m', max_model_len=size)\n\n\n"
            "def test_a():\n    llm = make_other()\n    assert llm.generate(['x'])\n"
            "    del llm\n    gc.collect()\n",
        "tests/test_b.py":
            "import gc\n\nfrom tests.test_a import setup_engine\n\n\n"
            "def test_b():\n    llm = setup_engine(8)\n    assert llm.generate(['x'])\n"
            "    del llm\n    gc.collect()\n"})
    recorded = _run(root)
    assert [(r[0], r[1], r[3], r[4]) for r in recorded] == [
        ("tests/test_a.py", 9, "GPU001", Applicability.SAFE),
        ("tests/test_a.py", 13, "GPU001", Applicability.SAFE),
        ("tests/test_a.py", 15, "GPU004", Applicability.SAFE),
        ("tests/test_a.py", 16, "GPU004", Applicability.SAFE),
        ("tests/test_b.py", 9, "GPU004", Applicability.SAFE),
        ("tests/test_b.py", 10, "GPU004", Applicability.SAFE),
    ]
    monkeypatch.setattr(tree_units, "caller_record", lambda module, source: None)
    assert _run(root) == recorded


def test_a_caller_in_a_module_out_of_the_rules_scope_is_planned_like_any_other(
        tmp_path: Path) -> None:
    """A caller in a module of the tree that is no test module (``tests/bench_engine.py``,
    checked by the run) is planned on an analysis of it all the same: its block's own
    reason, not "not in a function"."""
    root = _write_tree(tmp_path / "tree", {
        "tests/helpers.py":
            "from vllm import LLM\n\n\ndef setup_engine():\n    return LLM('m')\n",
        "tests/bench_engine.py":
            "from tests.helpers import setup_engine\n\n\ndef main():\n"
            "    llm = setup_engine()\n    return llm.generate(['bench'])\n",
        "tests/test_a.py":
            "import gc\n\nfrom tests.helpers import setup_engine\n\n\ndef test_a():\n"
            "    llm = setup_engine()\n    assert llm.generate(['x'])\n    del llm\n"
            "    gc.collect()\n"})
    why = ("the call of `setup_engine()` in `main()` of `tests/bench_engine.py` (line 5): a "
           "value read from the engine is returned to the caller (line 6) and may reference "
           "the engine, which the runner's block shuts down before the function returns")
    unsafe = Applicability.UNSAFE
    assert _run(root) == [("tests/test_a.py", 7, 11, "GPU001", unsafe, why),
                          ("tests/test_a.py", 9, 5, "GPU004", unsafe, why),
                          ("tests/test_a.py", 10, 5, "GPU004", unsafe, why)]


def test_a_unit_entering_the_bundled_class_ignores_the_projects_runner_fixture(
        tmp_path: Path) -> None:
    """The project's own ``vllm_runner`` fixture (a conftest's) plays no part in a unit
    across modules, whose helper enters the bundled runner class and whose callers enter
    the helper: its defaults are no reason to call the fix unsafe."""
    root = _write_tree(tmp_path / "tree", {
        "tests/conftest.py": "import pytest\n\n\nclass Runner:\n    pass\n\n\n"
                             "@pytest.fixture\ndef vllm_runner():\n    return Runner\n",
        "tests/utils.py": "from vllm import LLM\n\n\ndef make_llm(model='m', **kwargs):\n"
                          "    return LLM(model=model, **kwargs)\n",
        "tests/test_plugin.py": "import gc\n\nfrom tests.utils import make_llm\n\n\n"
                                "def test_helper():\n    llm = make_llm(enforce_eager=True)\n"
                                "    assert llm.generate(['b'])\n    del llm\n"
                                "    gc.collect()\n"})
    safe = Applicability.SAFE
    assert _run(root) == [("tests/test_plugin.py", 7, 11, "GPU001", safe, ""),
                          ("tests/test_plugin.py", 9, 5, "GPU004", safe, ""),
                          ("tests/test_plugin.py", 10, 5, "GPU004", safe, "")]


UNIMPORTABLE = ("`from tests.conftest import VllmRunner` imports only with the project root on "
                "`sys.path`: tests/ has no `__init__.py`, the root no `conftest.py` and "
                "pytest's `pythonpath` does not name it, so a plain `pytest` run fails to "
                "import the module (`python -m pytest` imports it)")


@pytest.mark.parametrize(("extra", "applicability"), [
    ({}, Applicability.UNSAFE),
    ({"tests/__init__.py": ""}, Applicability.SAFE),
    ({"conftest.py": ""}, Applicability.SAFE),
    ({"pytest.ini": "[pytest]\npythonpath = src .\n"}, Applicability.SAFE),
    ({".pytest.ini": "[pytest]\npythonpath = .\n"}, Applicability.SAFE),
    # pytest takes pytest.ini before pyproject.toml: the latter's pythonpath is not read.
    ({"pytest.ini": "[pytest]\naddopts = -q\n",
      "pyproject.toml": "[tool.gpu-test-lint]\ntarget = 'vllm'\n\n"
                        "[tool.pytest.ini_options]\npythonpath = ['.']\n"}, Applicability.UNSAFE),
    ({"tox.ini": "[tox]\n", "setup.cfg": "[tool:pytest]\npythonpath = .\n"},
     Applicability.SAFE),
    ({"pyproject.toml": "[tool.gpu-test-lint]\ntarget = 'vllm'\n\n"
                        "[tool.pytest.ini_options]\npythonpath = ['.']\n"}, Applicability.SAFE),
    ({"pyproject.toml": "[tool.gpu-test-lint]\ntarget = 'vllm'\n\n"
                        "[tool.pytest.ini_options]\npythonpath = ['src']\n"},
     Applicability.UNSAFE),
    ({"tests/test_plugin.py": "import gc\n\nfrom engine_utils import setup_engine\n"
                              "from tests.prompts import PROMPTS\n\n\n"
                              "def test_helper():\n    llm = setup_engine()\n"
                              "    assert llm.generate(PROMPTS)\n    del llm\n"},
     Applicability.SAFE),
])
def test_target_vllm_unit_whose_import_of_tests_may_fail_is_unsafe(
        tmp_path: Path, extra: dict[str, str], applicability: Applicability) -> None:
    """With ``target = "vllm"`` the helper imports vLLM's runner class from
    ``tests.conftest``, which a plain ``pytest`` run imports only with the project root on
    ``sys.path``: tests/ a package, a conftest.py at the root, pytest's ``pythonpath``
    naming it, or a caller already importing from ``tests``; else the fix is unsafe, and
    says why. A cached run sees the change of the project's layout."""
    root = _write_tree(tmp_path / "tree", {
        "tests/conftest.py": "class VllmRunner:\n    def __init__(self, model_name, **kw):\n"
                             "        pass\n",
        "tests/engine_utils.py": "from vllm import LLM\n\n\ndef setup_engine():\n"
                                 "    return LLM('m', enforce_eager=True)\n",
        "tests/test_plugin.py": "import gc\n\nfrom engine_utils import setup_engine\n\n\n"
                                "def test_helper():\n    llm = setup_engine()\n"
                                "    assert llm.generate(['b'])\n    del llm\n"})
    (root / "pyproject.toml").write_text("[tool.gpu-test-lint]\ntarget = 'vllm'\n")
    assert {(r[3], r[4], r[5]) for r in _run_vllm(root, cache=True)} == {
        ("GPU001", Applicability.UNSAFE, UNIMPORTABLE),
        ("GPU004", Applicability.UNSAFE, UNIMPORTABLE)}
    for path, text in extra.items():
        (root / path).write_text(text)
    reports = _run_vllm(root, cache=True)
    assert {r[4] for r in reports} == {applicability}
    assert {r[5] for r in reports} == {UNIMPORTABLE if applicability is Applicability.UNSAFE
                                       else ""}
    if applicability is Applicability.SAFE:
        assert _run_vllm(root, fix=True) == []
        assert (root / "tests" / "engine_utils.py").read_text() == (
            "import contextlib\nimport weakref\n\n"
            "from vllm.config import CompilationConfig\n\n"
            "from tests.conftest import VllmRunner\n\n\n"
            "@contextlib.contextmanager\ndef setup_engine():\n    with VllmRunner(\n"
            "        'm',\n        enforce_eager=True,\n        trust_remote_code=False,\n"
            "        max_model_len=None,\n        block_size=None,\n"
            "        enable_chunked_prefill=None,\n"
            "        compilation_config=CompilationConfig(),\n"
            "    ) as runner:\n        yield weakref.proxy(runner.llm)\n")


def test_target_vllm_unit_whose_caller_passes_a_spelled_out_default_has_no_fix(
        tmp_path: Path) -> None:
    """With ``target = "vllm"`` the fix spells out the runner's defaults in which it differs
    from ``LLM``; a helper that passes its ``**kwargs`` into the engine would then hand a
    caller's ``max_model_len=`` to the runner twice: no fix, the reason names the call. A
    keyword the fix does not spell out keeps the unit's (unsafe) fix."""
    root = _write_tree(tmp_path / "tree", {
        "tests/conftest.py": "class VllmRunner:\n    def __init__(self, model_name, **kw):\n"
                             "        pass\n",
        "tests/utils.py": "from vllm import LLM\n\n\ndef setup_engine(model='m', **kwargs):\n"
                          "    return LLM(model, **kwargs)\n",
        "tests/test_plugin.py": "import gc\n\nfrom tests.utils import setup_engine\n\n\n"
                                "def test_helper():\n    llm = setup_engine(max_model_len=64)\n"
                                "    assert llm.generate(['b'])\n    del llm\n"
                                "    gc.collect()\n"})
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n\n[tool.gpu-test-lint]\n"
                                         "target = 'vllm'\n")
    why = NO_UNIT.format(why=(
        "the call of `setup_engine()` in `tests/test_plugin.py` (line 7) passes "
        "`max_model_len=` through `**kwargs`, and the fix spells out vLLM's runner default "
        "for `max_model_len` too: the runner would get it twice (`TypeError`)"))
    why = why.replace("`build_llm()`", "`setup_engine()`")
    assert {(r[1], r[3], r[4], r[5]) for r in _run_vllm(root)} == {
        (7, "GPU001", Applicability.NONE, why), (9, "GPU004", Applicability.NONE, why),
        (10, "GPU004", Applicability.NONE, why)}
    test = root / "tests" / "test_plugin.py"
    test.write_text(test.read_text().replace("max_model_len=64", "enforce_eager=True"))
    assert {r[4] for r in _run_vllm(root)} == {Applicability.UNSAFE}


def test_target_vllm_factory_method_enters_vllm_runner_from_tests_conftest(
        tmp_path: Path) -> None:
    """Under ``target = "vllm"`` a factory method, whose callers are not given the
    ``vllm_runner`` fixture, enters vLLM's ``VllmRunner`` imported from the project's
    tests/conftest.py, as a helper of another module does; without that class there, no fix,
    and the reason says so."""
    source = ("import gc\n\nfrom vllm import LLM\n\n\nclass TestOwn:\n"
              "    def _make_llm(self, n):\n        return LLM('m', max_num_seqs=n)\n\n"
              "    def test_a(self):\n        llm = self._make_llm(4)\n"
              "        assert llm.generate(['x'])\n        del llm\n        gc.collect()\n")
    root = _write_tree(tmp_path / "tree", {
        "tests/__init__.py": "",
        "tests/conftest.py": "class VllmRunner:\n    def __init__(self, model_name, **kw):\n"
                             "        pass\n",
        "tests/test_fm.py": source})
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n\n[tool.gpu-test-lint]\n"
                                         "target = 'vllm'\n")
    assert {(r[1], r[3], r[4]) for r in _run_vllm(root)} == {
        (8, "GPU001", Applicability.SAFE), (13, "GPU004", Applicability.SAFE),
        (14, "GPU004", Applicability.SAFE)}
    assert _run_vllm(root, fix=True) == []
    assert (root / "tests" / "test_fm.py").read_text() == (
        "import contextlib\nimport weakref\n\nfrom vllm.config import CompilationConfig\n\n"
        "from tests.conftest import VllmRunner\n\n\nclass TestOwn:\n"
        "    @contextlib.contextmanager\n    def _make_llm(self, n):\n"
        "        with VllmRunner(\n            'm',\n            max_num_seqs=n,\n"
        "            trust_remote_code=False,\n            max_model_len=None,\n"
        "            block_size=None,\n            enable_chunked_prefill=None,\n"
        "            compilation_config=CompilationConfig(),\n        ) as runner:\n"
        "            yield weakref.proxy(runner.llm)\n\n"
        "    def test_a(self):\n        with self._make_llm(4) as llm:\n"
        "            assert llm.generate(['x'])\n")
    (root / "tests" / "test_fm.py").write_text(source)
    (root / "tests" / "conftest.py").write_text("")
    assert {r[4] for r in _run_vllm(root)} == {Applicability.NONE}


# --------------------------------------------------------------------------- --select

MULTI_DEL = ("tests/lora/test_multi.py", 10, 5, "GPU004",
             "Manual cleanup `del llm` in a function that owns an engine")
MULTI_GC = ("tests/lora/test_multi.py", 11, 5, "GPU004",
            "Manual cleanup `gc.collect()` in a function that owns an engine")
#: The calls of the helper (out of the rules' scope in tests/utils.py) the unit enters.
CALLS = [("tests/lora/test_multi.py", 8, 11, "GPU001",
          "Engine `make(...)` built outside `with vllm_runner(...)`"),
         ("tests/lora/test_multi.py", 15, 11, "GPU001",
          "Engine `utils.setup_engine(...)` built outside `with vllm_runner(...)`"),
         ("tests/lora/test_single.py", 7, 11, "GPU001",
          "Engine `setup_engine(...)` built outside `with vllm_runner(...)`")]


def _also(result: RunResult) -> list[tuple[str, int, int, str, str]]:
    return [(v.path, v.location.row, v.location.column, v.code, v.message)
            for f in result.files for v in f.also_fixed]


@pytest.mark.parametrize("mode", ["fix", "diff"])
def test_a_selected_violation_applies_the_unit_which_names_the_unselected_it_removes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """``--select GPU003``: the unit is the fix of the selected GPU003; the callers' cleanup
    it deletes with its with-blocks (GPU004, not selected) goes too, as a GPU001 rewrite
    deletes cleanup whether GPU004 is selected or not, and the run names what it removed."""
    root = _tree(tmp_path, "unit")
    monkeypatch.chdir(root)
    result = check_paths(["tests"], Config(root=str(root), select=("GPU003",)), jobs=1,
                         cache=False, **{mode: True})
    assert not result.errors and result.violations == []
    assert [(v.path, v.location.row, v.code) for v in result.fixed] == [
        ("tests/lora/test_single.py", 8, "GPU003")]
    assert _also(result) == [CALLS[0], MULTI_DEL, MULTI_GC, CALLS[1], CALLS[2]]
    if mode == "fix":
        assert _sources(root / "tests") == _sources(TREES / "unit_fixed" / "tests")
    else:
        assert sorted(result.diffs) == sorted(UNIT_FILES)
        assert _sources(root) == _sources(TREES / "unit")


def test_the_cli_notes_the_unselected_violations_a_unit_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from lint_gpu_tests.interfaces.cli import cli

    root = _tree(tmp_path, "unit")
    monkeypatch.chdir(root)
    note = ["note: the fixes also removed 5 violations not selected:",
            *(f"  {path}:{row}:{col}: {code} {message}" for path, row, col, code, message in
              [CALLS[0], MULTI_DEL, MULTI_GC, CALLS[1], CALLS[2]])]
    diff = CliRunner().invoke(cli, ["check", "--no-cache", "--select", "GPU003", "--diff",
                                    "tests"])
    assert diff.exit_code == 1
    assert diff.stderr.splitlines() == [
        "Would fix 1 violation.", note[0].replace("also removed", "would also remove"),
        *note[1:]]
    fixed = CliRunner().invoke(cli, ["check", "--no-cache", "--select", "GPU003", "--fix",
                                     "tests"])
    assert (fixed.exit_code, fixed.stdout.splitlines()) == (0, [
        "Found 1 violation (1 fixed, 0 remaining).", *note])
    assert _sources(root / "tests") == _sources(TREES / "unit_fixed" / "tests")


def test_a_unit_no_selected_violation_carries_is_not_applied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module whose selected GPU003 is about one helper's engine seeds the units of every
    helper it calls: the unit of another helper, whose violations are all unselected
    (GPU004), is not applied."""
    root = _tree(tmp_path, "unit")
    (root / "tests" / "other.py").write_text(
        'from vllm import LLM\n\n\ndef other_engine():\n    return LLM("m")\n')
    single = root / "tests" / "lora" / "test_single.py"
    single.write_text(single.read_text() + (
        '\n\ndef test_other():\n    from tests.other import other_engine\n\n'
        '    llm = other_engine()\n    assert llm.generate(["hi"])\n    del llm\n'))
    before = _sources(root)
    monkeypatch.chdir(root)
    result = check_paths(["tests"], Config(root=str(root), select=("GPU003",)), jobs=1,
                         cache=False, fix=True)
    assert not result.errors and result.violations == []
    assert [(v.path, v.location.row, v.code) for v in result.fixed] == [
        ("tests/lora/test_single.py", 8, "GPU003")]
    after = _sources(root)
    assert after["tests/other.py"] == before["tests/other.py"]
    assert after["tests/lora/test_single.py"].endswith(
        '\n\ndef test_other():\n    from tests.other import other_engine\n\n'
        '    llm = other_engine()\n    assert llm.generate(["hi"])\n    del llm\n')
    assert _also(result) == [CALLS[0], MULTI_DEL, MULTI_GC, CALLS[1], CALLS[2]]


def test_a_unit_applied_for_a_caller_names_the_helpers_unselected_gpu001(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper of a conftest reports its own GPU001; ``--select GPU004`` applies the unit
    for the caller's cleanup, and the note names that GPU001 with the unselected GPU003."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "conftest.py").write_text(
        'from vllm import LLM\n\n\ndef new_llm(model):\n    return LLM(model)\n')
    (tmp_path / "tests" / "test_own.py").write_text(
        'import gc\n\nfrom tests.conftest import new_llm\n\n\ndef test_one():\n'
        '    llm = new_llm("m")\n    try:\n        assert llm.generate(["x"])\n'
        '    finally:\n        llm.shutdown()\n\n\ndef test_two():\n    llm = new_llm("m")\n'
        '    assert llm.generate(["x"])\n    del llm\n    gc.collect()\n')
    monkeypatch.chdir(tmp_path)
    result = check_paths(["tests"], Config(root=str(tmp_path), select=("GPU004",)), jobs=1,
                         cache=False, fix=True)
    assert not result.errors and result.violations == []
    assert [(v.path, v.location.row, v.code) for v in result.fixed] == [
        ("tests/test_own.py", 17, "GPU004"), ("tests/test_own.py", 18, "GPU004")]
    assert [(path, row, code) for path, row, _, code, _ in _also(result)] == [
        ("tests/conftest.py", 5, "GPU001"), ("tests/test_own.py", 8, "GPU003")]
    assert _sources(tmp_path / "tests") == {
        "__init__.py": "",
        "conftest.py": 'import contextlib\nimport weakref\n\n'
                       'from lint_gpu_tests.runtime import VllmRunner\n\n\n'
                       '@contextlib.contextmanager\ndef new_llm(model):\n'
                       '    with VllmRunner(model) as runner:\n'
                       '        yield weakref.proxy(runner.llm)\n',
        "test_own.py": 'from tests.conftest import new_llm\n\n\ndef test_one():\n'
                       '    with new_llm("m") as llm:\n        assert llm.generate(["x"])\n\n\n'
                       'def test_two():\n    with new_llm("m") as llm:\n'
                       '        assert llm.generate(["x"])\n'}


def test_one_file_alone_says_its_unit_is_planned_over_the_tree(tmp_path: Path) -> None:
    """On stdin (or in the flake8 plugin, or an editor's document) the other files of the
    unit are not at hand: the reason says where the fix is made."""
    from lint_gpu_tests.api import check_buffer

    root = _tree(tmp_path, "unit")
    path = "tests/lora/test_single.py"
    old = os.getcwd()
    os.chdir(root)
    try:
        result = check_buffer((root / path).read_bytes(), path, Config(root=str(root)))
    finally:
        os.chdir(old)
    why = ("the engine comes from `setup_engine()`, defined in `tests/utils.py` (line 6): a "
           "helper of another module that builds and returns it, and its fix, made with the "
           "helper and every call of it, is planned over the tree's files: not for one file "
           "alone (stdin, the flake8 plugin, an editor's document)")
    assert [(v.location.row, v.code, v.fix.reason if v.fix else None)
            for v in result.violations] == [(7, "GPU001", why), (8, "GPU003", why)]


# ------------------------------------------- a helper of a module out of the rules' scope

SPLIT_HELPER = ('from vllm import LLM\n\n\ndef make_llm(**kw):\n'
                '    return LLM("m", enforce_eager=True, **kw)\n')
LEAKING_TEST = ('from tests.utils import make_llm\n'
                'def test_b():\n'
                '    llm = make_llm(seed=1)\n'
                '    assert llm.generate(["x"])\n')
CALL_MESSAGE = "Engine `make_llm(...)` built outside `with vllm_runner(...)`"


def _helper_tree(tmp_path: Path, helper: str, test: str = LEAKING_TEST) -> Path:
    """A tree whose tests/utils.py (no test module, no tests or fixtures: out of the rules'
    scope) holds ``helper`` and whose tests/test_b.py is ``test``."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "utils.py").write_text(helper)
    (tmp_path / "tests" / "test_b.py").write_text(test)
    return tmp_path


def _messages(root: Path, **changes: object) -> list[tuple[str, int, int, str, str, str]]:
    old = os.getcwd()
    os.chdir(root)
    try:
        result = check_paths(["tests"], Config(root=str(root), **changes), jobs=1,
                             cache=False)
    finally:
        os.chdir(old)
    assert not result.errors
    return [(v.path, v.location.row, v.location.column, v.code, v.message,
             v.fix.reason if v.fix is not None else "-") for v in result.violations]


def test_a_call_of_a_helper_out_of_scope_is_the_engines_construction(tmp_path: Path) -> None:
    """The helper's module gets no rule (no GPU001 at its `LLM(...)`), the test no cleanup
    (no GPU003/GPU004): the call is where the engine is built by hand. A helper whose body
    is on its `def` line has no fix, saying why."""
    root = _helper_tree(tmp_path, 'from vllm import LLM\n'
                                  'def make_llm(**kw): return LLM("m", enforce_eager=True, '
                                  '**kw)\n')
    before = _sources(root)
    why = ("the engine comes from `make_llm()`, defined in `tests/utils.py` (line 2): a helper "
           "of another module that builds and returns it, and its fix with every call of it "
           "in the tree has none: `make_llm()` builds its engine on the line of its `def` "
           "(`def f(): return LLM(...)`): the with-block the fix writes needs a body of its "
           "own lines")
    assert _messages(root) == [("tests/test_b.py", 3, 11, "GPU001", CALL_MESSAGE, why)]
    assert _run(root, fix=True, unsafe_fixes=True) == [
        ("tests/test_b.py", 3, 11, "GPU001", Applicability.NONE, why)]
    assert _sources(root) == before


FIXED_HELPER = ('import contextlib\nimport weakref\n\n'
                'from lint_gpu_tests.runtime import VllmRunner\n\n\n'
                '@contextlib.contextmanager\n'
                'def make_llm(**kw):\n'
                '    with VllmRunner("m", enforce_eager=True, **kw) as runner:\n'
                '        yield weakref.proxy(runner.llm)\n')
FIXED_TEST = ('from tests.utils import make_llm\n'
              'def test_b():\n'
              '    with make_llm(seed=1) as llm:\n'
              '        assert llm.generate(["x"])\n')


@pytest.mark.parametrize("select", [(), ("GPU001",)])
def test_the_unit_fixes_the_call_of_a_helper_out_of_scope(
        tmp_path: Path, select: tuple[str, ...]) -> None:
    root = _helper_tree(tmp_path, SPLIT_HELPER)
    changes = {"select": select} if select else {}
    assert _messages(root, **changes) == [
        ("tests/test_b.py", 3, 11, "GPU001", CALL_MESSAGE, "")]
    config = Config(root=str(root), **changes)  # type: ignore[arg-type]
    assert _run(root, config=config) == [
        ("tests/test_b.py", 3, 11, "GPU001", Applicability.SAFE, "")]
    before = _sources(root)
    old = os.getcwd()
    os.chdir(root)
    try:
        shown = check_paths(["tests"], config, jobs=1, cache=False, diff=True)
        assert _sources(root) == before
        fixed = check_paths(["tests"], config, jobs=1, cache=False, fix=True)
    finally:
        os.chdir(old)
    assert shown.diffs == {
        "tests/test_b.py": (
            "--- tests/test_b.py\n+++ tests/test_b.py\n@@ -1,4 +1,4 @@\n"
            " from tests.utils import make_llm\n def test_b():\n"
            "-    llm = make_llm(seed=1)\n-    assert llm.generate([\"x\"])\n"
            "+    with make_llm(seed=1) as llm:\n+        assert llm.generate([\"x\"])\n"),
        "tests/utils.py": (
            "--- tests/utils.py\n+++ tests/utils.py\n@@ -1,5 +1,10 @@\n"
            "-from vllm import LLM\n+import contextlib\n+import weakref\n+\n"
            "+from lint_gpu_tests.runtime import VllmRunner\n \n \n"
            "+@contextlib.contextmanager\n def make_llm(**kw):\n"
            "-    return LLM(\"m\", enforce_eager=True, **kw)\n"
            "+    with VllmRunner(\"m\", enforce_eager=True, **kw) as runner:\n"
            "+        yield weakref.proxy(runner.llm)\n")}
    assert not fixed.errors and fixed.violations == []
    assert [(v.path, v.location.row, v.code) for v in fixed.fixed] == [
        ("tests/test_b.py", 3, "GPU001")]
    assert _sources(root) == {"tests/__init__.py": "", "tests/test_b.py": FIXED_TEST,
                              "tests/utils.py": FIXED_HELPER}
    # The call now entered as a context manager: nothing to report.
    assert _messages(root) == []


def test_a_call_in_a_with_an_isolated_test_or_an_unchecked_module_is_not_reported(
        tmp_path: Path) -> None:
    root = _helper_tree(tmp_path, SPLIT_HELPER, (
        'import pytest\n\n'
        'from lint_gpu_tests.runtime import create_new_process_for_each_test\n'
        'from tests.utils import make_llm\n\n\n'
        '@create_new_process_for_each_test("spawn")\n'
        'def test_isolated():\n'
        '    llm = make_llm(seed=1)\n'
        '    assert llm.generate(["x"])\n\n\n'
        'def test_entered():\n'
        '    with make_llm() as llm:\n'
        '        assert llm\n\n\n'
        'def test_raises():\n'
        '    with pytest.raises(ValueError):\n'
        '        make_llm(seed=-1)\n'))
    # A module out of the rules' scope calling the helper is no test's: no rule looks at it.
    (root / "tests" / "helpers2.py").write_text(
        'from tests.utils import make_llm\n\n\ndef run():\n    return make_llm().generate(["x"])\n')
    assert _messages(root) == []


def test_a_helper_of_a_conftest_is_reported_there_once(tmp_path: Path) -> None:
    """A conftest is in the rules' scope: its helper's engine gets its GPU001 there, and the
    call of it in a test none of its own."""
    root = _helper_tree(tmp_path, "", LEAKING_TEST.replace("tests.utils", "tests.conftest"))
    (root / "tests" / "utils.py").unlink()
    (root / "tests" / "conftest.py").write_text(SPLIT_HELPER)
    assert [r[:5] for r in _messages(root)] == [
        ("tests/conftest.py", 5, 12, "GPU001",
         "Engine `LLM(...)` built outside `with vllm_runner(...)`")]


HELPER_IN_TEST_MODULE = ('from vllm import LLM\n\n\ndef setup_engine(size):\n'
                         '    return LLM(model="m", max_model_len=size)\n\n\ndef test_a():\n'
                         '    llm = setup_engine(32)\n    llm.generate(["x"])\n    del llm\n')
IMPORTS_IT = ('from tests.test_a import setup_engine\n\n\ndef test_b():\n'
              '    llm = setup_engine(64)\n    llm.generate(["y"])\n    del llm\n')


def test_a_helper_of_a_test_module_another_imports_is_one_unit(tmp_path: Path) -> None:
    """``test_b.py`` cleans up by hand an engine from a helper of ``test_a.py``: its GPU004
    is reported (test_a.py is checked first: its prefilter is its own), and the helper, its
    own caller and test_b.py are fixed together, each violation carrying the unit's fix."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_a.py").write_text(HELPER_IN_TEST_MODULE)
    (tmp_path / "tests" / "test_b.py").write_text(IMPORTS_IT)
    safe = Applicability.SAFE
    assert _run(tmp_path) == [
        ("tests/test_a.py", 5, 12, "GPU001", safe, ""),
        ("tests/test_a.py", 11, 5, "GPU004", safe, ""),
        ("tests/test_b.py", 7, 5, "GPU004", safe, ""),
    ]
    assert _run(tmp_path, fix=True) == []
    assert _sources(tmp_path / "tests") == {
        "__init__.py": "",
        "test_a.py": 'import contextlib\nimport weakref\n\n'
                     'from lint_gpu_tests.runtime import VllmRunner\n\n\n'
                     '@contextlib.contextmanager\ndef setup_engine(size):\n'
                     '    with VllmRunner(model="m", max_model_len=size) as runner:\n'
                     '        yield weakref.proxy(runner.llm)\n\n\n'
                     'def test_a():\n    with setup_engine(32) as llm:\n'
                     '        llm.generate(["x"])\n',
        "test_b.py": 'from tests.test_a import setup_engine\n\n\ndef test_b():\n'
                     '    with setup_engine(64) as llm:\n        llm.generate(["y"])\n',
    }


def test_unsafe_fixes_leave_the_helper_of_an_imported_test_module_to_its_unit(
        tmp_path: Path) -> None:
    """With ``--unsafe-fixes`` the helper's module is not rewritten alone first (which left
    ``test_b.py`` calling a context manager as a function): checked alone, its public helper
    has no fix, and the unit over the tree rewrites both modules as ``--fix`` does."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_a.py").write_text(HELPER_IN_TEST_MODULE)
    (tmp_path / "tests" / "test_b.py").write_text(IMPORTS_IT)
    public = ("`setup_engine()` is public in a module others import: their calls would get a "
              "context manager instead of an engine, and `--fix` rewrites one module at a "
              "time (the helper and its callers in other modules are not fixed together)")
    assert _run(tmp_path, ("tests/test_a.py",)) == [
        ("tests/test_a.py", 5, 12, "GPU001", Applicability.NONE, public),
        ("tests/test_a.py", 11, 5, "GPU004", Applicability.NONE, public),
    ]
    reference = tmp_path / "reference"
    shutil.copytree(tmp_path / "tests", reference / "tests")
    (reference / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    assert _run(reference, fix=True) == []
    assert _run(tmp_path, fix=True, unsafe_fixes=True) == []
    assert _sources(tmp_path / "tests") == _sources(reference / "tests")
    assert "with setup_engine(64) as llm:" in (tmp_path / "tests" / "test_b.py").read_text()


@pytest.mark.parametrize(("line", "marked"), [
    ("from tests.test_a import setup_engine", True),
    ("from tests.test_a import PROMPTS, setup_engine as make", True),
    ("import tests.test_a as a", True),
    ("from tests import test_a", True),
    ("from tests.test_a import (PROMPTS,", True),  # names on the next lines: any of them
    ("from tests.test_a import PROMPTS", False),
    ("from tests.test_a import PROMPTS  # setup_engine", False),
])
def test_a_test_module_is_one_unit_with_its_importers_only_for_a_helper_they_import(
        tmp_path: Path, line: str, marked: bool) -> None:
    """The per-file fix of ``test_a.py``'s public helper is withheld for the unit only when
    another module may import the helper: importing a constant of the module leaves its
    unsafe fix (``test_b.py`` cannot call the helper)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_a.py").write_text(HELPER_IN_TEST_MODULE + 'PROMPTS = ["x"]\n')
    rest = "\n    setup_engine)\n" if line.endswith(",") else "\n"
    (tmp_path / "tests" / "test_b.py").write_text(
        line + rest + "\n\ndef test_b():\n    assert True\n")
    expected = Applicability.NONE if marked else Applicability.UNSAFE
    assert [(r[3], r[4]) for r in _run(tmp_path, ("tests/test_a.py",))] == [
        ("GPU001", expected), ("GPU004", expected)]


def test_a_test_module_no_module_imports_keeps_its_helpers_to_itself(tmp_path: Path) -> None:
    """No file of the tree imports test_a.py: its public helper serves its own tests only,
    so its fix is safe in a run over the tree, and unsafe for the module checked alone (a
    module outside what the run sees could import it)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(HELPER_IN_TEST_MODULE)
    (tmp_path / "tests" / "test_b.py").write_text(IMPORTS_IT.replace("tests.test_a", "lib"))
    safe = Applicability.SAFE
    assert [(p, r, c, a, why) for p, r, _, c, a, why in _run(tmp_path)] == [
        ("tests/test_a.py", 5, "GPU001", safe, ""), ("tests/test_a.py", 11, "GPU004", safe, "")]
    alone = check_source(HELPER_IN_TEST_MODULE.encode(), "tests/test_a.py", Config())
    assert {v.fix.applicability for v in alone if v.fix} == {Applicability.UNSAFE}


@pytest.mark.parametrize("naming", [
    "from tests import (\n    test_a,\n)\n",
    "pytest_plugins = [\n    \"tests.test_a\",\n]\n",
    "import importlib\n\nmod = importlib.import_module(\"tests.test_a\")\n",
], ids=["parenthesised import", "pytest_plugins", "import_module"])
def test_a_test_module_another_file_may_import_keeps_its_public_helper_unsafe(
        tmp_path: Path, naming: str) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(HELPER_IN_TEST_MODULE)
    (tmp_path / "tests" / "conftest.py").write_text(naming)
    assert {(r, c, a) for _, r, _, c, a, _ in _run(tmp_path)} == {
        (5, "GPU001", Applicability.UNSAFE), (11, "GPU004", Applicability.UNSAFE)}


def test_a_fixture_yielding_an_engine_from_a_helper_is_gpu002_fixed_with_the_unit(
        tmp_path: Path) -> None:
    """A conftest fixture that yields the engine a helper of another module builds hands out
    the engine itself (GPU002); the unit makes the helper a context manager handing out a
    weak proxy, and the fixture's block yields that proxy: the unit's fix covers GPU002."""
    root = tmp_path / "tree"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "helpers.py").write_text(
        "from vllm import LLM\n\n\ndef build(**kwargs):\n    return LLM(**kwargs)\n")
    (root / "tests" / "conftest.py").write_text(
        "import pytest\n\nfrom tests.helpers import build\n\n\n@pytest.fixture\n"
        "def llm():\n    engine = build(model=\"m\")\n    yield engine\n    del engine\n")
    (root / "tests" / "test_use.py").write_text(
        "def test_generate(llm):\n    assert llm.generate([\"a\"])\n")
    safe = Applicability.SAFE
    assert _run(root) == [
        ("tests/conftest.py", 8, 14, "GPU001", safe, ""),
        ("tests/conftest.py", 9, 11, "GPU002", safe, ""),
        ("tests/conftest.py", 10, 5, "GPU004", safe, ""),
    ]
    old = os.getcwd()
    os.chdir(root)
    try:
        result = check_paths(["tests"], Config(root=str(root)), jobs=1, cache=False, fix=True)
    finally:
        os.chdir(old)
    assert not result.errors
    assert (root / "tests" / "conftest.py").read_text() == (
        "import pytest\n\nfrom tests.helpers import build\n\n\n@pytest.fixture\n"
        "def llm():\n    with build(model=\"m\") as engine:\n        yield engine\n")
    assert (root / "tests" / "helpers.py").read_text() == (
        "import contextlib\nimport weakref\n\nfrom lint_gpu_tests.runtime import VllmRunner\n"
        "\n\n@contextlib.contextmanager\ndef build(**kwargs):\n"
        "    with VllmRunner(**kwargs) as runner:\n        yield weakref.proxy(runner.llm)\n")
    assert _run(root) == []


CONFTEST_FACTORY = ('import pytest\nfrom vllm import LLM\n\n\ndef make_engine(model):\n'
                    '    return LLM(model=model)\n\n\n@pytest.fixture\ndef llm():\n'
                    '    engine = make_engine("m")\n    yield engine\n    del engine\n')


@pytest.mark.parametrize(("importer", "applicability"), [
    (None, Applicability.SAFE),
    ("from tests.conftest import make_engine\n", Applicability.NONE),
], ids=["no file imports the conftest", "a module imports from it"])
def test_a_public_helper_of_a_conftest_no_file_imports_serves_its_fixtures_only(
        tmp_path: Path, importer: str | None, applicability: Applicability) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST_FACTORY)
    (tmp_path / "tests" / "test_use.py").write_text("def test_a(llm):\n    assert llm\n")
    if importer is not None:
        (tmp_path / "tests" / "helpers.py").write_text(importer)
    assert {(r, c, a) for _, r, _, c, a, _ in _run(tmp_path)} == {
        (6, "GPU001", applicability), (12, "GPU002", applicability),
        (13, "GPU004", applicability)}


def test_an_engine_a_helper_of_another_module_returns_in_a_tuple(tmp_path: Path) -> None:
    """``llm, params = setup_llm(...)`` from ``tests/helpers.py``: the test owns the engine,
    its call is the engine's construction (the helper's module is out of the rules' scope)
    and its cleanup is GPU004. The helper and every call of it are one unit across the
    modules, as for a helper returning the engine alone: fixed where every call unpacks the
    tuple into names; a call binding the whole tuple leaves it without a fix, the reason
    naming that call."""
    helper = ("from vllm import LLM, SamplingParams\n\n\ndef setup_llm(model):\n"
              "    return LLM(model=model), SamplingParams(temperature=0.0)\n")
    unpacked = ("import gc\n\nfrom tests.helpers import setup_llm\n\n\ndef test_unpacked():\n"
                "    llm, params = setup_llm(\"m\")\n    assert llm.generate([\"a\"], params)\n"
                "    del llm\n    gc.collect()\n")
    root = _write_tree(tmp_path / "fixed", {"tests/__init__.py": "", "tests/helpers.py": helper,
                                            "tests/test_use.py": unpacked})
    safe = Applicability.SAFE
    assert [r[:5] for r in _run(root)] == [
        ("tests/test_use.py", 7, 19, "GPU001", safe),
        ("tests/test_use.py", 9, 5, "GPU004", safe),
        ("tests/test_use.py", 10, 5, "GPU004", safe),
    ]
    _run(root, fix=True)
    assert _sources(root) == {
        "tests/__init__.py": "",
        "tests/helpers.py": (
            "import contextlib\nimport weakref\n\nfrom lint_gpu_tests.runtime import "
            "VllmRunner\nfrom vllm import SamplingParams\n\n\n@contextlib.contextmanager\n"
            "def setup_llm(model):\n    with VllmRunner(model=model) as runner:\n"
            "        yield weakref.proxy(runner.llm), SamplingParams(temperature=0.0)\n"),
        "tests/test_use.py": (
            "from tests.helpers import setup_llm\n\n\ndef test_unpacked():\n"
            "    with setup_llm(\"m\") as (llm, params):\n"
            "        assert llm.generate([\"a\"], params)\n"),
    }
    whole = _write_tree(tmp_path / "whole", {
        "tests/__init__.py": "", "tests/helpers.py": helper,
        "tests/test_use.py": unpacked + "\n\ndef test_whole():\n    pair = setup_llm(\"m\")\n"
                                        "    del pair\n"})
    why = ("the engine comes from `setup_llm()`, defined in `tests/helpers.py` (line 4): a "
           "helper of another module that builds and returns it, and its fix with every call "
           "of it in the tree has none: in `tests/test_use.py`, the call of `setup_llm()` in "
           "`test_whole()` (line 14) does not unpack the tuple it returns into names (`llm, "
           "params = ...`), so the with-statement the fix writes would bind the tuple where "
           "the engine's proxy goes")
    none = Applicability.NONE
    assert _run(whole) == [
        ("tests/test_use.py", 7, 19, "GPU001", none, why),
        ("tests/test_use.py", 9, 5, "GPU004", none, why),
        ("tests/test_use.py", 10, 5, "GPU004", none, why),
        ("tests/test_use.py", 14, 12, "GPU001", none, why),
    ]


def test_an_xunit_set_up_of_another_module_enters_the_helpers_call_on_a_stack(
        tmp_path: Path) -> None:
    """``cls.engine = make_engine(...)`` in a ``setUpClass`` of one module, the helper in
    ``tests/utils.py``: the set-up is one caller of the helper's unit, entering the call on
    an ``ExitStack`` its ``tearDownClass`` closes where its cleanup began; a caller that is a
    test gets a with-block, as before. The teardown's cleanup is covered by the unit."""
    helper = ("from vllm import LLM\n\n\ndef make_engine(max_model_len=128):\n"
              "    llm = LLM(model=\"m\", max_model_len=max_model_len)\n    return llm\n")
    stored = ("import gc\nimport unittest\n\nfrom tests.utils import make_engine\n\n\n"
              "class TestOne(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
              "        cls.engine = make_engine(max_model_len=64)\n\n    @classmethod\n"
              "    def tearDownClass(cls):\n        del cls.engine\n        gc.collect()\n\n"
              "    def test_generate(self):\n"
              "        self.assertTrue(self.engine.generate(\"x\"))\n")
    plain = ("from tests import utils\n\n\ndef test_plain():\n    llm = utils.make_engine()\n"
             "    assert llm.generate(\"y\")\n    del llm\n")
    root = _write_tree(tmp_path, {"tests/__init__.py": "", "tests/utils.py": helper,
                                  "tests/test_one.py": stored, "tests/test_two.py": plain})
    safe = Applicability.SAFE
    assert [r[:5] for r in _run(root)] == [
        ("tests/test_one.py", 10, 22, "GPU001", safe),
        ("tests/test_one.py", 14, 9, "GPU004", safe),
        ("tests/test_one.py", 15, 9, "GPU004", safe),
        ("tests/test_two.py", 5, 11, "GPU001", safe),
        ("tests/test_two.py", 7, 5, "GPU004", safe),
    ]
    assert _run(root, fix=True) == []  # nothing left: the entered call is no engine
    sources = _sources(root)
    assert sources["tests/test_one.py"] == (
        "import contextlib\nimport unittest\n\nfrom tests.utils import make_engine\n\n\n"
        "class TestOne(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
        "        cls._engine_stack = contextlib.ExitStack()\n"
        "        cls.engine = cls._engine_stack.enter_context(make_engine(max_model_len=64))\n\n"
        "    @classmethod\n    def tearDownClass(cls):\n        cls._engine_stack.close()\n\n"
        "    def test_generate(self):\n        self.assertTrue(self.engine.generate(\"x\"))\n")
    assert sources["tests/test_two.py"] == (
        "from tests import utils\n\n\ndef test_plain():\n"
        "    with utils.make_engine() as llm:\n        assert llm.generate(\"y\")\n")
    assert sources["tests/utils.py"].startswith("import contextlib\n")
    # Beside a module set-up whose own fix removes a `gc.collect()` of the same message
    # first: each violation keeps the fix that removes it.
    paired = stored.replace("\n\nclass TestOne", (
        "\n\ndef setup_module():\n    global llm\n    llm = LLM(\"m\")\n\n\n"
        "def teardown_module():\n    global llm\n    del llm\n    gc.collect()\n\n\n"
        "class TestOne")).replace("import unittest\n", "import unittest\n\nfrom vllm import LLM\n")
    root = _write_tree(tmp_path / "paired", {
        "tests/__init__.py": "", "tests/utils.py": helper, "tests/test_one.py": paired})
    assert [r[1:5] for r in _run(root)] == [
        (11, 11, "GPU001", safe), (16, 5, "GPU004", safe), (17, 5, "GPU004", safe),
        (23, 22, "GPU001", safe), (27, 9, "GPU004", safe), (28, 9, "GPU004", safe)]


def test_a_fixture_storing_a_helpers_engine_on_its_class(tmp_path: Path) -> None:
    """``request.cls.llm = create_llm(...)`` in a class-scoped fixture, the helper in
    ``tests/utils.py``: the fixture is one caller of the helper's unit, its with-block over
    the helper's call from the store through the ``yield``, the attribute getting what the
    context manager yields (the proxy); the cleanup after the ``yield`` goes (GPU004, the
    ``del`` of the attribute among it)."""
    helper = ("from vllm import LLM\n\n\ndef create_llm(model, **kwargs):\n"
              "    return LLM(model=model, **kwargs)\n")
    stored = ("import gc\n\nimport pytest\n\nfrom tests.utils import create_llm\n\n\n"
              "class TestShared:\n    @pytest.fixture(scope=\"class\", autouse=True)\n"
              "    def shared(self, request):\n        request.cls.llm = create_llm(\"m\")\n"
              "        yield\n        del request.cls.llm\n        gc.collect()\n\n"
              "    def test_generate(self):\n        assert self.llm.generate([\"a\"])\n")
    root = _write_tree(tmp_path, {"tests/__init__.py": "", "tests/utils.py": helper,
                                  "tests/test_one.py": stored})
    safe = Applicability.SAFE
    assert [r[:5] for r in _run(root)] == [
        ("tests/test_one.py", 11, 27, "GPU001", safe),
        ("tests/test_one.py", 13, 9, "GPU004", safe),
        ("tests/test_one.py", 14, 9, "GPU004", safe),
    ]
    _run(root, fix=True)
    assert _sources(root)["tests/test_one.py"] == (
        "import pytest\n\nfrom tests.utils import create_llm\n\n\n"
        "class TestShared:\n    @pytest.fixture(scope=\"class\", autouse=True)\n"
        "    def shared(self, request):\n        with create_llm(\"m\") as engine:\n"
        "            request.cls.llm = engine\n            yield\n\n"
        "    def test_generate(self):\n        assert self.llm.generate([\"a\"])\n")


def test_two_xunit_stacks_of_a_module_import_vllms_runner_once(tmp_path: Path) -> None:
    """Under ``target = "vllm"`` a module whose ``setup_module`` and ``setup_function``
    each store an engine: two fixes, one ``from tests.conftest import VllmRunner`` (each
    pass adds the runner's import only where the module does not import the name)."""
    root = _tree(tmp_path, "vllm")
    (root / "tests" / "test_stacks.py").write_text(
        "import gc\n\nfrom vllm import LLM\n\nbig = None\nsmall = None\n\n\n"
        "def setup_module():\n    global big\n    big = LLM(\"m\")\n\n\n"
        "def teardown_module():\n    global big\n    del big\n    gc.collect()\n\n\n"
        "def setup_function():\n    global small\n    small = LLM(\"m\")\n\n\n"
        "def teardown_function():\n    global small\n    del small\n    gc.collect()\n\n\n"
        "def test_both():\n    assert big.generate([\"a\"]) and small.generate([\"b\"])\n")
    _run_vllm(root, fix=True)
    fixed = (root / "tests" / "test_stacks.py").read_text()
    assert fixed.count("from tests.conftest import VllmRunner\n") == 1
    assert fixed.count("_engine_stack = contextlib.ExitStack()") == 1
    assert fixed.count("_engine_stack2 = contextlib.ExitStack()") == 1


def test_a_local_factory_an_xunit_set_up_calls_enters_vllms_runner_class(tmp_path: Path) -> None:
    """Under ``target = "vllm"`` a factory helper of a test module whose caller is an xunit
    set-up (which gets no fixtures) enters vLLM's runner class imported from the project's
    tests/conftest.py, as for callers in other modules (before: no fix, its reason saying a
    helper cannot import that class)."""
    root = _tree(tmp_path, "vllm")
    (root / "tests" / "test_local_factory.py").write_text(
        "import gc\nimport unittest\n\nfrom vllm import LLM\n\n\ndef make_llm():\n"
        "    return LLM(\"m\", max_num_seqs=4)\n\n\nclass TestUnit(unittest.TestCase):\n"
        "    def setUp(self):\n        self.llm = make_llm()\n\n    def tearDown(self):\n"
        "        del self.llm\n        gc.collect()\n\n    def test_one(self):\n"
        "        self.assertTrue(self.llm.generate([\"x\"]))\n")
    safe = Applicability.SAFE
    assert [r for r in _run_vllm(root) if r[0] == "tests/test_local_factory.py"] == [
        ("tests/test_local_factory.py", 8, 12, "GPU001", safe, ""),
        ("tests/test_local_factory.py", 16, 9, "GPU004", safe, ""),
        ("tests/test_local_factory.py", 17, 9, "GPU004", safe, "")]
    _run_vllm(root, fix=True)
    fixed = (root / "tests" / "test_local_factory.py").read_text()
    assert "from tests.conftest import VllmRunner\n" in fixed
    assert "        self.llm = self._engine_stack.enter_context(make_llm())\n" in fixed


def test_a_cached_result_follows_the_runner_class_of_the_projects_conftest(
        tmp_path: Path) -> None:
    """Under ``target = "vllm"`` a file's fixes import the runner class from the project's
    tests/conftest.py: renaming that class (or defining it again) changes which fixes exist,
    and a warm run sees it as a cold one does."""
    root = _tree(tmp_path, "vllm")
    (root / "tests" / "test_stack.py").write_text(
        "import gc\n\nfrom vllm import LLM\n\n\nclass TestStack:\n    @classmethod\n"
        "    def setup_class(cls):\n        cls.llm = LLM(\"m\")\n\n    @classmethod\n"
        "    def teardown_class(cls):\n        del cls.llm\n        gc.collect()\n\n"
        "    def test_one(self):\n        assert self.llm.generate([\"x\"])\n")
    cache = str(tmp_path / "cache")

    def fixable(**changes: object) -> int:
        return sum(r[4] is Applicability.SAFE for r in _run_vllm(root, **changes)
                   if r[0] == "tests/test_stack.py")

    conftest = root / "tests" / "conftest.py"
    assert fixable(cache=True, cache_dir=cache) == 3
    conftest.write_text(conftest.read_text().replace("class VllmRunner:",
                                                     "class OtherRunner:"))
    assert fixable(cache=True, cache_dir=cache) == fixable() == 0
    conftest.write_text(conftest.read_text().replace("class OtherRunner:",
                                                     "class VllmRunner:"))
    assert fixable(cache=True, cache_dir=cache) == 3


def test_a_project_runner_class_without_kwargs_gets_no_fix(tmp_path: Path) -> None:
    """Under ``target = "vllm"`` a tests/conftest.py ``VllmRunner`` of the project's own
    whose ``__init__`` takes no ``**kwargs`` (vLLM's takes them): the keywords a fix passes
    may not be among its parameters, so no fix imports it, and the reason says so."""
    root = _tree(tmp_path, "vllm")
    conftest = root / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text().replace("def __init__(self, model_name, **kwargs)",
                                                     "def __init__(self, model_name)"))
    (root / "tests" / "test_stack.py").write_text(
        "import gc\n\nfrom vllm import LLM\n\n\nclass TestStack:\n    @classmethod\n"
        "    def setup_class(cls):\n        cls.llm = LLM(\"m\", enforce_eager=True)\n\n"
        "    @classmethod\n    def teardown_class(cls):\n        del cls.llm\n"
        "        gc.collect()\n\n    def test_one(self):\n"
        "        assert self.llm.generate([\"x\"])\n")
    why = ("the project's `VllmRunner` (tests/conftest.py) takes no `**kwargs`, unlike vLLM's: "
           "the engine's keywords and the runner defaults the fix spells out may not be among "
           "its parameters")
    assert [r[3:] for r in _run_vllm(root) if r[0] == "tests/test_stack.py"] == [
        ("GPU001", Applicability.NONE, why), ("GPU004", Applicability.NONE, why),
        ("GPU004", Applicability.NONE, why)]

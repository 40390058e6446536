"""Factory fixtures of a test module and their callers as one fix unit
(:mod:`lint_gpu_tests.fixplan.factory_fixtures`): safe in a run over a tree in which no file
imports the module, the fixture's own ``ExitStack`` fix where a caller cannot be rewritten
(the callers' cleanup then says why); a conftest's factory fixture and its callers in the
modules pytest hands it to, as one unit over the tree (:mod:`lint_gpu_tests.fixing.tree_units`).

The rewrite itself is the ``factory_fixture_unit`` fix fixture (byte for byte); the
differential run of ``tests/e2e/suites/test_factory_fixture_unit.py`` is its proof on vLLM.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import FixKind

MODULE = '''\
import gc

import pytest
from vllm import LLM


@pytest.fixture
def make_llm():
    def _make(**kw):
        return LLM("m", **kw)
    return _make


@pytest.fixture
def make_twice():
    def _make():
        return LLM("m")
    return _make


@pytest.fixture
def make_named():
    def _make():
        return LLM("m")
    return _make


def test_unit(make_llm):
    llm = make_llm(seed=0)
    assert llm.generate(["a"])
    del llm
    gc.collect()


def test_twice(make_twice):
    first = make_twice()
    second = make_twice()
    assert first.generate(["a"]) == second.generate(["a"])
    del first, second


@pytest.mark.usefixtures("make_named")
def test_named(make_named):
    llm = make_named()
    assert llm
    del llm
'''

KEPT = ("the engine comes from `{name}(...)`, the factory that the fixture `{name}` "
        "({where}) hands out and keeps no engine of: no fix removes this statement (the "
        "fixture's own fix, GPU001, makes the fixture keep every engine its factory builds, "
        "and leaves this statement acting on a proxy)")
STACK = ("the factory hands each engine to the test as a `weakref.proxy` (identity checks "
         "and references kept past the fixture see the proxy), and the engines are torn "
         "down when the fixture's `contextlib.ExitStack()` closes at its teardown")


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    for name, text in files.items():
        (tests / name).write_text(textwrap.dedent(text))
    return tests


def reports(tests: Path) -> list[tuple[str, int, str, str, str, str]]:
    """``(file, row, code, applicability, fix kind, reason)`` of every violation."""
    result = check_paths([str(tests)], Config(), cache=False)
    return [(Path(v.path).name, v.location.row, v.code,
             v.fix.applicability.value if v.fix else "none",
             v.fix.kind.value if v.fix and v.fix.kind else "", v.fix.reason if v.fix else "")
            for v in result.violations if v.code != "GPU007"]


def test_a_test_modules_factory_fixture_and_its_callers_are_one_safe_unit(
        tmp_path: Path) -> None:
    """In a run over the tree, no file importing the module: the unit is safe and covers the
    caller's cleanup; two engines of one test alive together, or the fixture named in a
    string, leave the fixture its ``ExitStack`` fix, the callers' cleanup saying why the
    unit is not written."""
    tests = project(tmp_path, {"test_units.py": MODULE})
    unit = FixKind.FACTORY_CONTEXT_MANAGER.value
    twice = ("the calls of `make_twice()` in `test_twice()` (lines 36 and 37) give engines "
             "alive together: the fix writes one with-block per call, and the first block "
             "would have to hold the second call (no fix nests a factory's blocks yet)")
    named = ("the fixture `make_named` is named in a string (line 42): a test requesting it "
             "by name (`usefixtures`, `getfixturevalue`) is not followed")
    not_made = "; the factory and its calls are not made a context manager and with-blocks: "
    assert reports(tests) == [
        ("test_units.py", 10, "GPU001", "safe", unit, ""),
        ("test_units.py", 17, "GPU001", "unsafe", "wrap-engine-in-runner", STACK),
        ("test_units.py", 24, "GPU001", "unsafe", "wrap-engine-in-runner", STACK),
        ("test_units.py", 31, "GPU004", "safe", "remove-manual-cleanup", ""),
        ("test_units.py", 32, "GPU004", "safe", "remove-manual-cleanup", ""),
        ("test_units.py", 39, "GPU004", "none", "",
         KEPT.format(name="make_twice", where="line 15") + not_made + twice),
        ("test_units.py", 46, "GPU004", "none", "",
         KEPT.format(name="make_named", where="line 22") + not_made + named),
    ]


CONFTEST = '''\
import pytest
from vllm import LLM


@pytest.fixture
def make_llm():
    def _make(**kw):
        return LLM("m", **kw)
    return _make


@pytest.fixture
def small_llm(make_llm):
    return make_llm(max_num_seqs=2)
'''

CALLER = '''\
import gc


def test_unit(make_llm):
    llm = make_llm(seed=0)
    assert llm
    del llm
    gc.collect()


def test_small(small_llm):
    assert small_llm
'''

SUB_CALLER = '''\
class TestSub:
    def test_finally(self, make_llm):
        llm = make_llm(seed=1)
        try:
            assert llm
        finally:
            llm.llm_engine.engine_core.shutdown()
'''

SHADOWING = '''\
import pytest


@pytest.fixture
def make_llm():
    return lambda **kw: None
'''


def conftest_project(tmp_path: Path, **more: str) -> Path:
    """A tree whose ``tests/conftest.py`` hands out a factory fixture, called in
    ``tests/test_caller.py`` and ``tests/sub/test_sub.py``; ``tests/other`` has a conftest
    of its own defining a fixture of the name; ``more`` adds files (path under ``tests``)."""
    tests = project(tmp_path, {"conftest.py": CONFTEST, "test_caller.py": CALLER})
    for relative, text in {"sub/test_sub.py": SUB_CALLER, "other/conftest.py": SHADOWING,
                           "other/test_other.py": CALLER, **more}.items():
        (tests / relative).parent.mkdir(parents=True, exist_ok=True)
        (tests / relative).write_text(textwrap.dedent(text))
    return tests


def test_a_conftests_factory_fixture_and_its_callers_are_one_unit_over_the_tree(
        tmp_path: Path) -> None:
    """The factory a conftest's fixture hands out and every call of it in the modules pytest
    hands that fixture to (the conftest's own fixture too) are one safe unit, written
    together; a module under a conftest of its own defining a fixture of the name is not
    one of them."""
    tests = conftest_project(tmp_path)
    unit = FixKind.FACTORY_CONTEXT_MANAGER.value
    assert [r for r in reports(tests) if r[0] != "test_other.py"] == [
        ("conftest.py", 8, "GPU001", "safe", unit, ""),
        ("conftest.py", 14, "GPU002", "safe", "with-another-fix", ""),
        ("test_sub.py", 4, "GPU003", "safe", "with-another-fix", ""),
        ("test_caller.py", 7, "GPU004", "safe", "with-another-fix", ""),
        ("test_caller.py", 8, "GPU004", "safe", "with-another-fix", ""),
    ]
    assert [r[:4] for r in reports(tests) if r[0] == "test_other.py"] == []
    result = check_paths([str(tests)], Config(), cache=False, fix=True)
    assert [(Path(v.path).name, v.code) for v in result.violations] == []
    assert (tests / "conftest.py").read_text() == textwrap.dedent('''\
        import contextlib
        import weakref

        import pytest
        from lint_gpu_tests.runtime import VllmRunner


        @pytest.fixture
        def make_llm():
            @contextlib.contextmanager
            def _make(**kw):
                with VllmRunner("m", **kw) as runner:
                    yield weakref.proxy(runner.llm)
            return _make


        @pytest.fixture
        def small_llm(make_llm):
            with make_llm(max_num_seqs=2) as runner:
                yield runner
        ''')
    assert (tests / "test_caller.py").read_text() == textwrap.dedent('''\
        def test_unit(make_llm):
            with make_llm(seed=0) as llm:
                assert llm


        def test_small(small_llm):
            assert small_llm
        ''')
    assert (tests / "sub" / "test_sub.py").read_text() == textwrap.dedent('''\
        class TestSub:
            def test_finally(self, make_llm):
                with make_llm(seed=1) as llm:
                    assert llm
        ''')
    assert (tests / "other" / "test_other.py").read_text() == CALLER


def test_no_conftest_unit_where_a_module_may_get_the_fixture_otherwise(
        tmp_path: Path) -> None:
    """No unit where a module pytest hands the fixture to names it in a string, where a
    module calling it is not checked by the run, or where a module outside the conftest's
    directory that another module imports requests a fixture of the name (one that no
    module imports is handed its own directory's): the callers' cleanup says why, and the
    conftest keeps its own ``ExitStack`` fix, which ``--unsafe-fixes`` writes alone."""
    named = "import pytest\n\n\n@pytest.mark.usefixtures(\"make_llm\")\ndef test_named():\n" \
            "    pass\n"
    why = ("in `tests/test_named.py`, the fixture `make_llm` is named in a string (line 4): a "
           "test requesting it by name (`usefixtures`, `getfixturevalue`) is not followed")
    none = ("the engine comes from `make_llm(...)`, the factory that the fixture `make_llm` "
            "(`tests/conftest.py`) hands out and keeps no engine of, and its fix with every "
            "call of it in the tree has none: ")
    fallback = STACK + "; `_make()` is not made a context manager with every call of it in " \
        "the tree: "
    tests = conftest_project(tmp_path / "named", **{"test_named.py": named})
    assert [r for r in reports(tests) if r[0] in ("conftest.py", "test_caller.py")] == [
        ("conftest.py", 8, "GPU001", "unsafe", "wrap-engine-in-runner", fallback + why),
        ("conftest.py", 14, "GPU002", "none", "", none + why),
        ("test_caller.py", 7, "GPU004", "none", "", none + why),
        ("test_caller.py", 8, "GPU004", "none", "", none + why),
    ]
    result = check_paths([str(tests)], Config(), cache=False, fix=True, unsafe_fixes=True)
    assert "contextlib.ExitStack() as stack" in (tests / "conftest.py").read_text()
    assert (tests / "test_caller.py").read_text() == CALLER
    assert ("conftest.py", "GPU001") not in [(Path(v.path).name, v.code)
                                             for v in result.violations]
    alone = conftest_project(tmp_path / "alone")
    result = check_paths([str(alone / "conftest.py")], Config(), cache=False)
    assert [(v.code, v.fix.applicability.value, v.fix.reason) for v in result.violations
            if v.fix is not None] == [
        ("GPU001", "unsafe", fallback + "`make_llm` is also called in `tests/test_caller.py`, "
         "a module this run does not check: the fixture and every call of it are fixed "
         "together or not at all"),
        ("GPU002", "none", none + "`make_llm` is also called in `tests/test_caller.py`, a "
         "module this run does not check: the fixture and every call of it are fixed "
         "together or not at all")]
    outside = project(tmp_path / "outside", {
        "test_outside.py": "class TestAsks:\n    def test_asks(self, make_llm):\n"
                           "        assert make_llm\n"})
    (outside / "inner").mkdir()
    (outside / "inner" / "conftest.py").write_text(CONFTEST)
    (outside / "inner" / "test_caller.py").write_text(CALLER)
    assert [r[3] for r in reports(outside) if r[0] == "test_caller.py"] == ["safe", "safe"]
    (outside / "inner" / "test_inherits.py").write_text(
        "from tests.test_outside import TestAsks\n\n\nclass TestHere(TestAsks):\n    pass\n")
    assert [r[2:] for r in reports(outside) if r[0] == "test_caller.py"][0] == (
        "GPU004", "none", "", none.replace("tests/conftest.py", "tests/inner/conftest.py") +
        "`test_asks()` in `tests/test_outside.py` (line 2), outside the conftest's directory, "
        "takes a parameter `make_llm`: a module under it that inherits or imports that test "
        "would be handed the fixture, and its calls there would get a context manager "
        "instead of an engine")


def test_a_module_a_file_of_the_tree_imports_gets_an_unsafe_unit_or_none(
        tmp_path: Path) -> None:
    """Another module imports something else of this one: it may import the fixture too,
    whose calls there would get a context manager, so the unit is unsafe and says why.
    Imported whole, the module gets no unit (the fixture keeps its own fix)."""
    module = MODULE.split("@pytest.fixture\ndef make_twice", 1)[0] + (
        "def test_unit(make_llm):\n    llm = make_llm(seed=0)\n    assert llm\n    del llm\n"
        "\n\nMARK = 1\n")
    tests = project(tmp_path / "other", {
        "__init__.py": "", "test_units.py": module,
        "test_other.py": "from tests.test_units import MARK\n\n\ndef test_x():\n"
                         "    assert MARK\n"})
    private = ("the module is not known to be private to its tree (a file of the tree imports "
               "it, or it was checked without its tree): a module importing the fixture "
               "`make_llm` would get a context manager from each call instead of an engine")
    assert reports(tests) == [
        ("test_units.py", 10, "GPU001", "unsafe", FixKind.FACTORY_CONTEXT_MANAGER.value,
         private),
        ("test_units.py", 17, "GPU004", "unsafe", "remove-manual-cleanup", private),
    ]
    tests = project(tmp_path / "whole", {
        "__init__.py": "", "test_units.py": module,
        "test_other.py": "from tests import test_units\n\n\ndef test_x():\n"
                         "    assert test_units\n"})
    assert [r[:5] for r in reports(tests)] == [
        ("test_units.py", 10, "GPU001", "unsafe", "wrap-engine-in-runner"),
        ("test_units.py", 17, "GPU004", "none", ""),
    ]


FACTORY = '''\
import gc

import pytest
from vllm import LLM


@pytest.fixture
def make_llm():
    def _make(**kw):
        return LLM("m", **kw)
{extra}    return _make


def test_unit(make_llm):
    llm = make_llm(seed=0)
    assert llm
    del llm
    gc.collect()
'''


def test_no_unit_where_the_factory_may_be_called_by_what_the_fix_does_not_rewrite(
        tmp_path: Path) -> None:
    """The fixture calls its factory itself, a class's fixture of the name serves that
    class's tests, a class of the module derives from another module's (its tests may
    request the fixture), or the module imports tests: the fixture keeps its ``ExitStack``
    fix, the callers' cleanup saying why the unit is not written."""
    cases = {
        "    probe = _make(max_model_len=8)\n    del probe\n": (
            "the fixture `make_llm` uses `_make()` itself (line 11), which would get a "
            "context manager instead of an engine"),
        "": None,
    }
    for extra, why in cases.items():
        tests = project(tmp_path / str(len(extra)), {"test_units.py": FACTORY.format(
            extra=extra)})
        found = reports(tests)
        if why is None:
            assert [r[2:4] for r in found] == [("GPU001", "safe"), ("GPU004", "safe"),
                                             ("GPU004", "safe")]
        else:
            assert found[0][2:5] == ("GPU001", "unsafe", "wrap-engine-in-runner")
            assert found[-1][5].endswith("; the factory and its calls are not made a context "
                                         "manager and with-blocks: " + why)
    shadowed = FACTORY.format(extra="") + (
        "\n\nclass TestOther:\n    @pytest.fixture\n    def make_llm(self):\n"
        "        return lambda **kw: object()\n\n    def test_other(self, make_llm):\n"
        "        made = make_llm()\n        del made\n        gc.collect()\n")
    tests = project(tmp_path / "shadowed", {"test_units.py": shadowed})
    found = reports(tests)
    assert [r[1:4] for r in found] == [(10, "GPU001", "unsafe"), (17, "GPU004", "none"),
                                       (18, "GPU004", "none")]
    assert found[-1][5].endswith(
        "`make_llm()` (line 23) is a fixture of the same name, which its tests request "
        "instead of the module's `make_llm`")
    derived = "from tests.checks import EngineChecks\n" + FACTORY.format(extra="") + (
        "\n\nclass TestConcrete(EngineChecks):\n    pass\n")
    tests = project(tmp_path / "derived", {"test_units.py": derived, "checks.py": ""})
    assert reports(tests)[-1][5].endswith(
        "`TestConcrete` (line 22) derives from a class of another module, whose tests may "
        "request the fixture `make_llm` and would get a context manager from each call")


def test_a_factory_fixture_imported_by_another_test_module(tmp_path: Path) -> None:
    """``from tests.test_base import make_llm``: pytest makes the fixture the importing
    module's, whose tests own what its factory builds (GPU004, without a fix: the reason
    names the module). The fixture's own module is imported, so it gets no unit: its calls
    in the importing module would get a context manager."""
    base = FACTORY.format(extra="")
    tests = project(tmp_path, {
        "__init__.py": "", "test_base.py": base,
        "test_user.py": "import gc\n\nfrom tests.test_base import make_llm  # noqa: F401\n\n\n"
                        "def test_user(make_llm):\n    llm = make_llm(seed=1)\n    assert llm\n"
                        "    del llm\n    gc.collect()\n"})
    imported = ("another module of the tree imports this one (or one of its engine helpers) "
                "and may import the fixture `make_llm` too: its calls there would get a "
                "context manager instead of an engine, and the fix rewrites the fixture's "
                "callers in this module only")
    found = reports(tests)
    assert [r[:5] for r in found] == [
        ("test_base.py", 10, "GPU001", "unsafe", "wrap-engine-in-runner"),
        ("test_base.py", 17, "GPU004", "none", ""),
        ("test_base.py", 18, "GPU004", "none", ""),
        ("test_user.py", 9, "GPU004", "none", ""),
        ("test_user.py", 10, "GPU004", "none", ""),
    ]
    assert found[1][5] == KEPT.format(name="make_llm", where="line 8") + (
        "; the factory and its calls are not made a context manager and with-blocks: "
        + imported)
    assert found[3][5] == KEPT.format(name="make_llm", where="`tests/test_base.py`")

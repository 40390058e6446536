"""Factory helpers and their callers as one fix unit (:mod:`lint_gpu_tests.fixplan.factories`):
the reasons each no-fix branch gives, naming the caller; one plan carried by every violation it
removes; all or nothing; the unit planned from a list of call sites.

The rewrites themselves are the ``factory_helper_*`` fix fixtures (byte for byte); the
differential run of ``tests/e2e/suites/test_factory_helper.py`` is their proof on vLLM.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.checking.checker import check_module, check_source
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source
from lint_gpu_tests.fixplan.factories import (
    FactoryCall,
    FactoryPlan,
    caller_groups,
    factory_units,
    plan_factory_unit,
)
from lint_gpu_tests.ftypes import Applicability, FixKind

FIX_DIR = Path(__file__).parent / "fixtures" / "fix"
PATH = "tests/test_case.py"
PUBLIC = ("`setup_engine()` is public: a module that imports it would get a context manager "
          "instead of an engine (`--fix` rewrites one module at a time and does not change "
          "callers in other modules)")

FACTORY = '''\
import gc

from vllm import LLM


def _setup_engine(num_loras):
    return LLM("m", enable_lora=True, max_loras=num_loras)


def test_one():
    llm = _setup_engine(1)
    try:
        assert llm.generate(["a"])
    finally:
        llm.llm_engine.engine_core.shutdown()


def test_two():
    llm = _setup_engine(2)
    assert llm.generate(["a"])
    del llm
    gc.collect()
'''


def reports(source: str, path: str = PATH) -> list[tuple[int, str, str, str]]:
    """``(row, code, applicability, reason)`` of each violation, in order."""
    found = check_source(textwrap.dedent(source).encode(), path, Config())
    return [(v.location.row, v.code, v.fix.applicability.value if v.fix else "",
             v.fix.reason if v.fix else "") for v in found]


def test_reasons_of_the_no_fix_fixture_name_the_caller() -> None:
    before = (FIX_DIR / "factory_helper_no_fix" / "before.py").read_text()
    returned = ("the call of `_returned_further()` in `_wrapper()` (line 14) returns the engine "
                "further, so it must outlive that function")
    assert reports(before) == [
        (10, "GPU001", "none", returned),
        (20, "GPU004", "none", returned),
        (21, "GPU004", "none", returned),
        (26, "GPU001", "none", "the call of `_kept_in_a_global()` in `test_kept_in_a_global()` "
         "(line 31): `CURRENT` holds the engine and is global or nonlocal"),
        (36, "GPU001", "none", "the call of `_in_a_comprehension()` in "
         "`test_in_a_comprehension()` (line 40): built inside a lambda or comprehension"),
        (45, "GPU001", "none", "the call of `_handed_on()` in `test_handed_on()` (line 49): the "
         "engine is stored in `ENGINES`, which outlives the block"),
        (54, "GPU001", "none", "`_passed_around` is used other than by a call in "
         "`test_passed_around()` (line 58): what receives it would get a context manager "
         "instead of an engine"),
    ]


def test_one_plan_is_carried_by_every_violation_of_the_unit() -> None:
    checked = check_module(FACTORY.encode(), PATH, Config())
    assert [(v.location.row, v.code) for v in checked.violations] == [
        (7, "GPU001"), (12, "GPU003"), (21, "GPU004"), (22, "GPU004")]
    gpu001, gpu003, *gpu004 = checked.violations
    assert gpu001.fix is not None and gpu003.fix is not None
    plan = gpu001.fix.plan
    assert isinstance(plan, FactoryPlan)
    assert (plan.factory, plan.def_line, plan.call_line, plan.return_line) == (
        "_setup_engine", 6, 7, None)
    assert [(c.function, c.line, c.plan.site_line, c.plan.end_line,
             sorted(c.plan.remove_lines), sorted(c.plan.unwrap_try_lines))
            for c in plan.callers] == [("test_one", 11, 11, 15, [15], [12]),
                                       ("test_two", 19, 19, 20, [21, 22], [])]
    assert gpu001.fix.applicability is Applicability.SAFE
    assert gpu001.fix.kind is FixKind.FACTORY_CONTEXT_MANAGER
    assert gpu001.fix.title == ("Make `_setup_engine()` a `contextlib.contextmanager` over "
                                "`VllmRunner` and call it in `with` statements")
    assert (gpu003.fix.applicability, gpu003.fix.kind) == (Applicability.SAFE,
                                                           FixKind.WITH_ANOTHER)
    assert [(v.fix.applicability, v.fix.kind) for v in gpu004 if v.fix] == [
        (Applicability.SAFE, FixKind.REMOVE_MANUAL_CLEANUP)] * 2


def test_the_unit_is_applied_in_one_pass_and_converges() -> None:
    outcome = fix_source(FACTORY.encode(), PATH, Config())
    assert [(v.code, v.location.row) for v in outcome.fixed] == [
        ("GPU001", 7), ("GPU003", 12), ("GPU004", 21), ("GPU004", 22)]
    assert outcome.remaining == [] and outcome.new_source is not None
    assert [kind for kind, _, _ in outcome.passes] == [FixKind.FACTORY_CONTEXT_MANAGER]
    assert outcome.new_source.decode() == '''\
import contextlib
import weakref

from lint_gpu_tests.runtime import VllmRunner


@contextlib.contextmanager
def _setup_engine(num_loras):
    with VllmRunner("m", enable_lora=True, max_loras=num_loras) as runner:
        yield weakref.proxy(runner.llm)


def test_one():
    with _setup_engine(1) as llm:
        assert llm.generate(["a"])


def test_two():
    with _setup_engine(2) as llm:
        assert llm.generate(["a"])
'''
    again = fix_source(outcome.new_source, PATH, Config())
    assert again.new_source is None and again.remaining == []


@pytest.mark.parametrize(("comment", "header", "body"), [
    ("# tiny", "  # tiny", ""),
    ("# noqa: E501", "  # noqa: E501", ""),
    ("# fmt: skip", "  # fmt: skip", ""),
])
def test_the_comment_after_the_engine_stays_on_the_with_line(comment: str, header: str,
                                                             body: str) -> None:
    """The statement that built the engine becomes two lines (the with-statement and the
    hand-out of the proxy): a comment ending it is said once, on the with-statement, a
    pragma too (on the short hand-out line a `# noqa: E501` would be unused, as ruff's
    RUF100 says), as for an engine bound to a name."""
    source = FACTORY.replace("max_loras=num_loras)\n", f"max_loras=num_loras)  {comment}\n")
    outcome = fix_source(source.encode(), PATH, Config())
    assert outcome.new_source is not None
    assert outcome.new_source.decode().splitlines()[6:10] == [
        "@contextlib.contextmanager",
        "def _setup_engine(num_loras):",
        f'    with VllmRunner("m", enable_lora=True, max_loras=num_loras) as runner:{header}',
        f"        yield weakref.proxy(runner.llm){body}",
    ]


def test_suppressing_the_helpers_report_leaves_every_caller_unfixed() -> None:
    source = FACTORY.replace('max_loras=num_loras)\n', 'max_loras=num_loras)  # noqa: GPU001\n')
    checked = check_module(source.encode(), PATH, Config())
    assert [(v.location.row, v.code, v.fixable) for v in checked.violations] == [
        (12, "GPU003", False), (21, "GPU004", False), (22, "GPU004", False)]
    assert fix_source(source.encode(), PATH, Config(), unsafe=True).new_source is None


def test_one_caller_that_cannot_be_rewritten_leaves_the_unit_without_a_fix() -> None:
    source = FACTORY + '''

def test_used_after():
    llm = _setup_engine(3)
    assert llm.generate(["a"])
    del llm
    llm = None
    if llm is None:
        llm = _setup_engine(4)
    assert llm.generate(["b"])
'''
    reason = ("the call of `_setup_engine()` in `test_used_after()` (line 31): `llm` is "
              "rebound elsewhere in the function")
    assert reports(source) == [(7, "GPU001", "none", reason), (12, "GPU003", "none", reason),
                               (21, "GPU004", "none", reason), (22, "GPU004", "none", reason),
                               (28, "GPU004", "none", reason)]


def test_two_engines_of_one_function_alive_together_have_no_fix() -> None:
    reason = ("the calls of `_setup_engine()` in `test_both()` (lines 9 and 10) give engines "
              "alive together: the fix writes one with-block per call, and the first "
              "block would have to hold the second call (no fix nests a factory's blocks "
              "yet)")
    assert reports('''\
        from vllm import LLM


        def _setup_engine(n):
            return LLM("m", max_loras=n)


        def test_both():
            a = _setup_engine(1)
            b = _setup_engine(2)
            assert a.generate(["x"]) and b.generate(["x"])
    ''') == [(5, "GPU001", "none", reason)]


def test_a_public_helper_is_unsafe_in_a_test_module_and_unfixed_elsewhere() -> None:
    source = '''\
        from vllm import LLM


        def setup_engine(n):
            return LLM("m", max_loras=n)


        def test_one():
            llm = setup_engine(1)
            assert llm.generate(["x"])
    '''
    assert reports(source) == [(5, "GPU001", "unsafe", PUBLIC)]
    assert reports(source, "tests/conftest.py") == [
        (5, "GPU001", "none", "`setup_engine()` is public in a module others import: their "
         "calls would get a context manager instead of an engine, and `--fix` rewrites one "
         "module at a time (the helper and its callers in other modules are not fixed "
         "together)")]


@pytest.mark.parametrize(("helper", "reason"), [
    ("@functools.cache\ndef _make():\n    return LLM('m')\n",
     "`_make()` caches the engine it returns (`@functools.cache`): the engine lives as long "
     "as that cache, shared by every caller, and no fix rewrites a cached engine"),
    ("@_passthrough\ndef _make():\n    return LLM('m')\n",
     "`_make()` is decorated: what the decorator does with a context manager is not followed"),
    ("def _make():\n    llm = LLM('m')\n    engines.append(llm)\n    return llm\n",
     "`_make()` uses `llm` itself (line 10), not through its attributes, before returning it"),
    ("def _make(flag):\n    if flag:\n        return None\n    return LLM('m')\n",
     "`_make()` returns on other paths"),
    ("def _make():\n    llm = LLM('m')\n    if llm:\n        return llm\n    raise ValueError\n",
     "`_make()` does not end with `return` of the engine it builds"),
])
def test_helpers_the_fix_cannot_make_a_context_manager(helper: str, reason: str) -> None:
    source = ("import functools\n\nfrom vllm import LLM\n\nengines = []\n\n\n" + helper +
              "\n\ndef test_it():\n    llm = _make()\n    assert llm\n")
    found = check_source(source.encode(), PATH, Config())
    assert [(v.code, v.fix.reason if v.fix else "") for v in found] == [("GPU001", reason)]


def test_the_unit_is_planned_from_the_call_sites_it_is_given() -> None:
    """``plan_factory_unit`` takes the call sites planned module by module (here one module's,
    as :func:`caller_groups` plans them): each site given gets its block, none other."""
    tree = ast.parse(FACTORY)
    module = ModuleAnalysis.build(tree, FACTORY, PATH, Config())
    func = next(f for f in module.functions if f.name == "_setup_engine")
    (site,) = [s for s in module.engines if s.function is func]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "_setup_engine"]
    second = [c for c in calls if c.lineno == 19]
    plan = plan_factory_unit(module, func, site, caller_groups(
        "_setup_engine", [FactoryCall(module, c) for c in second]))
    assert isinstance(plan, FactoryPlan)
    assert [(c.path, c.function, c.line) for c in plan.callers] == [(PATH, "test_two", 19)]
    assert not plan.covers(PATH, 10, 15) and plan.covers(PATH, 18, 21)
    whole = factory_units(module)["_setup_engine"]
    assert isinstance(whole, FactoryPlan)
    assert [c.function for c in whole.callers] == ["test_one", "test_two"]


def test_a_helper_not_called_in_its_module_has_no_fix() -> None:
    assert reports('''\
        from vllm import LLM


        def _setup_engine(n):
            return LLM("m", max_loras=n)
    ''') == [(5, "GPU001", "none", "`_setup_engine()` returns the engine it builds and is not "
              "called in this module: the fix makes it a context manager together with its "
              "callers in other modules, planned when a caller's hand cleanup of that engine "
              "(GPU003, GPU004) is checked in the same run, and none is")]


def test_a_callers_unsafe_block_makes_the_unit_unsafe_naming_it() -> None:
    assert reports('''\
        from vllm import LLM


        def _setup_engine(n):
            return LLM("m", max_loras=n)


        def test_identity():
            llm = _setup_engine(1)
            assert type(llm) is not None
    ''') == [(5, "GPU001", "unsafe", "the call of `_setup_engine()` in `test_identity()` (line 9): "
              "`type()` on the engine sees a `weakref.proxy`, not the engine")]

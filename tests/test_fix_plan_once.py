"""A fix is planned once: each pass of the fix loop applies the plans its violations carry,
and the file is analysed once per pass (the check that finds the next pass's violations)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lint_gpu_tests import api
from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.config import Config, ConfigResolver
from lint_gpu_tests.fixing.fixloop import fix_source
from lint_gpu_tests.fixplan import planner as planner_module
from lint_gpu_tests.ftypes import FixKind

#: Ten violations of six rules: two engines with cleanup (GPU001, GPU004), a finalizer
#: (GPU003), a bare runner with a strong alias (GPU005, GPU006), a fixture yielding the
#: runner's engine (GPU002) and an environment variable (GPU008).
SOURCE = b'''import gc
import os

import pytest
from vllm import LLM


@pytest.fixture
def engine(vllm_runner):
    with vllm_runner("m") as runner:
        yield runner.llm


def test_first():
    llm = LLM("m")
    assert llm.generate(["x"])
    del llm
    gc.collect()


def test_second(request):
    llm = LLM("m")
    request.addfinalizer(llm.shutdown)
    assert llm.generate(["x"])


def test_bare(vllm_runner):
    runner = vllm_runner("m")
    llm = runner.llm
    assert llm.generate(["x"])


def test_env():
    os.environ["VLLM_X"] = "1"
'''


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts analyses, planners and codemod passes while a test runs."""
    seen: Counter[str] = Counter()
    build = ModuleAnalysis.build.__func__  # type: ignore[attr-defined]

    def counted_build(cls: type[ModuleAnalysis], *args: Any, **kwargs: Any) -> ModuleAnalysis:
        seen["analyses"] += 1
        return build(cls, *args, **kwargs)  # type: ignore[no-any-return]

    init = planner_module.Planner.__init__

    def counted_init(self: planner_module.Planner, *args: Any, **kwargs: Any) -> None:
        seen["planners"] += 1
        init(self, *args, **kwargs)

    from lint_gpu_tests.codemods import driver

    apply = driver.apply_fixes

    def counted_apply(*args: Any, **kwargs: Any) -> driver.AppliedFix | None:
        seen["passes"] += 1
        return apply(*args, **kwargs)

    monkeypatch.setattr(ModuleAnalysis, "build", classmethod(counted_build))
    monkeypatch.setattr(planner_module.Planner, "__init__", counted_init)
    monkeypatch.setattr(driver, "apply_fixes", counted_apply)
    yield seen


def test_every_fixable_violation_carries_its_plan() -> None:
    from lint_gpu_tests.checking.checker import check_module

    checked = check_module(SOURCE, "tests/test_plans.py", Config())
    kinds = [(v.code, v.location.row, v.fix.kind) for v in checked.violations
             if v.fix is not None]
    assert kinds == [
        ("GPU002", 11, FixKind.PROXY_ENGINE_REFERENCE),
        ("GPU001", 15, FixKind.WRAP_ENGINE_IN_RUNNER),
        ("GPU004", 17, FixKind.REMOVE_MANUAL_CLEANUP),
        ("GPU004", 18, FixKind.REMOVE_MANUAL_CLEANUP),
        ("GPU001", 22, FixKind.WRAP_ENGINE_IN_RUNNER),
        ("GPU003", 23, FixKind.WITH_ANOTHER),
        ("GPU005", 28, FixKind.WRAP_RUNNER_IN_WITH),
        ("GPU006", 29, FixKind.PROXY_ENGINE_REFERENCE),
        ("GPU008", 34, FixKind.USE_MONKEYPATCH_ENV),
    ]
    for violation in checked.violations:
        assert violation.fix is not None
        assert (violation.fix.plan is None) == (violation.fix.kind is FixKind.WITH_ANOTHER)


def test_one_analysis_and_one_planner_a_pass(counts: Counter[str]) -> None:
    outcome = fix_source(SOURCE, "tests/test_plans.py", Config(), unsafe=True)
    assert outcome.error is None and outcome.remaining == []
    assert len(outcome.fixed) == 9
    # The first check, then one check after each pass that changed the file; the last
    # pass finds nothing left to fix. Nothing else analyses or plans.
    assert counts["passes"] == 4
    assert counts["analyses"] == counts["passes"] + 1
    assert counts["planners"] == counts["analyses"]


def test_the_run_hands_its_analysis_to_the_fix(counts: Counter[str], tmp_path: Path) -> None:
    path = tmp_path / "tests" / "test_plans.py"
    path.parent.mkdir()
    path.write_bytes(SOURCE)
    result = api.check_paths([str(path)], ConfigResolver(), fix=True, unsafe_fixes=True,
                             cache=False)
    assert result.violations == []
    assert counts["passes"] == 4
    assert counts["analyses"] == counts["passes"] + 1
    assert counts["planners"] == counts["analyses"]


def test_violations_without_plans_are_checked_again(counts: Counter[str]) -> None:
    """Violations read back from the cache carry no plans: the fix checks the file once
    more to get them, and fixes the same."""
    from dataclasses import replace

    from lint_gpu_tests.checking.checker import check_module

    checked = check_module(SOURCE, "tests/test_plans.py", Config())
    bare = [replace(v, fix=None if v.fix is None else replace(v.fix, kind=None, plan=None))
            for v in checked.violations]
    counts.clear()
    planned = fix_source(SOURCE, "tests/test_plans.py", Config(), unsafe=True,
                         violations=checked.violations, analysis=checked.module)
    with_plans = dict(counts)
    counts.clear()
    unplanned = fix_source(SOURCE, "tests/test_plans.py", Config(), unsafe=True,
                           violations=bare)
    assert unplanned.new_source == planned.new_source is not None
    assert counts["analyses"] == with_plans["analyses"] + 1


def _example_violations() -> Iterator[tuple[str, Any]]:
    from lint_gpu_tests.checking.checker import check_module
    from lint_gpu_tests.config import config_from_table
    from lint_gpu_tests.rules import ALL_RULES

    for rule in ALL_RULES:
        for number, example in enumerate(rule.INVALID):
            config = config_from_table(dict(example.config), "example") if example.config \
                else Config()
            for violation in check_module(example.source.encode(), example.path,
                                          config).violations:
                yield f"{rule.code}-{number}", violation


def test_every_available_fix_of_the_rule_examples_says_how_it_is_applied() -> None:
    """A fix that exists names the transformation that applies it, and carries its plan
    unless another violation's rewrite makes it."""
    seen = 0
    for where, violation in _example_violations():
        fix = violation.fix
        if fix is None or not fix.available:
            continue
        seen += 1
        assert fix.kind is not None, (where, violation)
        assert (fix.plan is None) == (fix.kind is FixKind.WITH_ANOTHER), (where, violation)
    assert seen >= 20


SHADOWED = b'''import vllm


def test_a():
    llm = vllm.LLM("m")
    assert llm.generate(["x"])


def test_b(vllm):
    assert vllm
'''


def test_an_import_read_only_under_a_shadowing_name_is_removed() -> None:
    """The import the rewrite leaves unread goes, though a parameter of the same name is
    still read elsewhere (the names the new code reads are resolved by scope)."""
    outcome = fix_source(SHADOWED, "tests/test_shadow.py", Config())
    assert outcome.new_source == b'''import weakref


def test_a(vllm_runner):
    with vllm_runner("m") as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.generate(["x"])


def test_b(vllm):
    assert vllm
'''


def test_an_import_still_read_is_not_handed_to_the_import_remover(
        counts: Counter[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """LibCST's import remover (a scope analysis of the whole module) runs only where an
    import the rewrite touched is no longer read."""
    from libcst.codemod.visitors import RemoveImportsVisitor

    runs: list[int] = []
    real = RemoveImportsVisitor.visit_Module

    def counted(self: RemoveImportsVisitor, node: Any) -> None:
        runs.append(1)
        real(self, node)

    monkeypatch.setattr(RemoveImportsVisitor, "visit_Module", counted)
    still_read = b'from vllm import LLM\n\nENGINE = LLM\n\n\ndef test_a():\n' \
                 b'    llm = LLM("m")\n    assert llm.generate(["x"])\n'
    assert fix_source(still_read, "tests/test_read.py", Config()).new_source is not None
    assert runs == []
    fix_source(SHADOWED, "tests/test_shadow.py", Config())
    assert runs == [1]

"""Codemod for GPU005 and GPU001 (with GPU003 and GPU004 of the same engine): enter a
runner built outside ``with`` in one, and wrap an engine built by hand in
``with vllm_runner(...) as runner:``."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.fixplan.plan import PlanKind, WrapPlan
from lint_gpu_tests.ftypes import FixKind


class WrapInRunner(GpuCodemod[WrapPlan]):
    """``runner = vllm_runner(...)`` + uses -> ``with vllm_runner(...) as runner:`` (GPU005);
    each hand-built engine's live range -> a runner with-block (GPU001; README, "Fix
    safety").

    A pass applies the runner plans when one of them changes the file, else the engine
    plans: runners are entered before engines are wrapped, whose rewrite removes the cleanup
    the runners' would. One plan per function per pass; the driver runs passes until
    nothing changes.
    """

    DESCRIPTION = ("Enter runners built outside a with-statement in one (GPU005) and wrap "
                   "hand-built vLLM engines in `with vllm_runner(...) as runner:` (GPU001).")
    PLAN = WrapPlan
    KINDS = (FixKind.WRAP_RUNNER_IN_WITH, FixKind.WRAP_ENGINE_IN_RUNNER)
    CODES = frozenset({"GPU001", "GPU005"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[WrapPlan]) -> cst.Module:
        for kind in (PlanKind.RUNNER, PlanKind.ENGINE):
            todo = [plan for plan in plans if plan.kind is kind]
            if not todo:
                continue
            self.applied = todo[0].fix_kind
            new = self.apply_plans(tree, module, todo)
            if new is not tree and self.code_of(new) != self.code_of(tree):
                return new
            self.forget_imports()  # as if this pass had been a command of its own
        return tree

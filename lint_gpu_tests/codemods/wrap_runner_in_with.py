"""Codemod for GPU005: a runner built outside ``with`` becomes a with-statement."""

from __future__ import annotations

import libcst as cst

from lint_gpu_tests.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import Violation


class WrapRunnerInWith(GpuCodemod):
    """``runner = vllm_runner(...)`` + uses -> ``with vllm_runner(...) as runner:``."""

    DESCRIPTION = "Enter runners built outside a with-statement in one (GPU005)."
    CODES = frozenset({"GPU005"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                todo: list[Violation]) -> cst.Module:
        planner = planner_for(module)
        rows = {v.location.row for v in todo}
        return self.apply_plans(tree, module, (
            planner.runner_plan(call) for call in module.runner_calls
            if call.context == "bare" and call.call.lineno in rows))

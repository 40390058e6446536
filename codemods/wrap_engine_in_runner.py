"""Codemod for GPU001 (with GPU003 and GPU004 of the same engine): wrap an engine built
by hand in ``with vllm_runner(...) as runner:``."""

from __future__ import annotations

import libcst as cst

from codemods._base import GpuCodemod
from lint_gpu_tests.analysis import ModuleAnalysis
from lint_gpu_tests.fixplan import WrapPlan, planner_for
from lint_gpu_tests.ftypes import Violation


class WrapEngineInRunner(GpuCodemod):
    """Rewrite each hand-built engine's live range into a runner with-block (SPEC §4).

    One engine per function per pass; the driver runs passes until nothing changes.
    """

    DESCRIPTION = "Wrap hand-built vLLM engines in `with vllm_runner(...) as runner:` (GPU001)."
    CODES = frozenset({"GPU001"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                todo: list[Violation]) -> cst.Module:
        planner = planner_for(module)
        rows = {v.location.row for v in todo}
        plans: list[WrapPlan] = []
        seen_functions: set[int] = set()
        for site in module.engines:
            if site.call.lineno not in rows:
                continue
            plan = planner.engine_plan(site)
            if not isinstance(plan, WrapPlan) or plan.function_line in seen_functions:
                continue
            seen_functions.add(plan.function_line)
            plans.append(plan)
        return self.apply_plans(tree, module, plans)

"""Codemod for GPU001 (with GPU003 and GPU004 of the same engine): wrap an engine built
by hand in ``with vllm_runner(...) as runner:``."""

from __future__ import annotations

import libcst as cst

from lint_gpu_tests.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.fixplan.isolate import IsolatePlan, strategy_plan
from lint_gpu_tests.ftypes import Violation


class WrapEngineInRunner(GpuCodemod):
    """Rewrite each hand-built engine's live range into a runner with-block (README, "Fix safety").

    One engine per function per pass; the driver runs passes until nothing changes.
    """

    DESCRIPTION = "Wrap hand-built vLLM engines in `with vllm_runner(...) as runner:` (GPU001)."
    CODES = frozenset({"GPU001"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                todo: list[Violation]) -> cst.Module:
        rows = {v.location.row for v in todo}
        plans = (strategy_plan(module, site) for site in module.engines
                 if site.call.lineno in rows)
        return self.apply_plans(tree, module, (p for p in plans
                                               if not isinstance(p, IsolatePlan)))

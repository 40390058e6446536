"""Codemod for GPU001 (with GPU003 and GPU004 of the same engine): wrap an engine built
by hand in ``with vllm_runner(...) as runner:``."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.ftypes import FixKind


class WrapEngineInRunner(GpuCodemod):
    """Rewrite each hand-built engine's live range into a runner with-block (README, "Fix safety").

    One engine per function per pass; the driver runs passes until nothing changes.
    """

    DESCRIPTION = "Wrap hand-built vLLM engines in `with vllm_runner(...) as runner:` (GPU001)."
    KIND = FixKind.WRAP_ENGINE_IN_RUNNER
    CODES = frozenset({"GPU001"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[WrapPlan]) -> cst.Module:
        return self.apply_plans(tree, module, plans)

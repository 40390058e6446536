"""Codemod for GPU005: a runner built outside ``with`` becomes a with-statement."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.ftypes import FixKind


class WrapRunnerInWith(GpuCodemod):
    """``runner = vllm_runner(...)`` + uses -> ``with vllm_runner(...) as runner:``."""

    DESCRIPTION = "Enter runners built outside a with-statement in one (GPU005)."
    KIND = FixKind.WRAP_RUNNER_IN_WITH
    CODES = frozenset({"GPU005"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[WrapPlan]) -> cst.Module:
        return self.apply_plans(tree, module, plans)

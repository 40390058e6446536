"""Codemod for GPU004 outside an engine rewrite: delete leftover manual cleanup."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.codemods._positions import ReachedStatements, StatementPositions
from lint_gpu_tests.fixplan.plan import CleanupPlan
from lint_gpu_tests.ftypes import FixKind


class RemoveManualCleanup(GpuCodemod[CleanupPlan]):
    """Delete ``gc.collect()``, ``empty_cache()``, ``del runner`` ... in functions that
    already use the runner (an unsafe fix: it changes when memory is freed)."""

    DESCRIPTION = "Remove manual engine cleanup the runner already does (GPU004)."
    PLAN = CleanupPlan
    KINDS = (FixKind.REMOVE_MANUAL_CLEANUP,)
    CODES = frozenset({"GPU004"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[CleanupPlan]) -> cst.Module:
        lines = {plan.line for plan in plans}
        positions = StatementPositions(tree, module.tree, self.printer)
        transformer = _Remove(lines, positions)
        new_tree = tree.visit(transformer)
        if not transformer.changed:
            return tree
        self.remove_unused(module, new_tree)
        return new_tree


class _Remove(ReachedStatements):
    def __init__(self, lines: set[int], positions: StatementPositions) -> None:
        super().__init__(positions, lines)
        self.lines = lines
        self.changed = False

    def _filter(self, original: list[cst.BaseStatement],
                updated: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        out = []
        for orig, new in zip(original, updated, strict=True):
            if isinstance(orig, cst.SimpleStatementLine) and \
                    self.positions.start_line(orig) in self.lines:
                self.changed = True
                continue
            out.append(new)
        return out

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        body = self._filter(list(original_node.body), list(updated_node.body))
        return updated_node.with_changes(
            body=body or [cst.SimpleStatementLine(body=[cst.Pass()])])

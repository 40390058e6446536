"""Codemod for GPU008: undo a fixture's ``pytest.MonkeyPatch()`` when the fixture ends.

The rule module decides everything (:func:`lint_gpu_tests.fixplan.env.undo_fix`); this
command appends ``<mp>.undo()`` to the end of each planned fixture's body (before a bare
``return`` ending it), after a bare ``yield`` where the fixture has none, so the instance is
undone at the fixture's teardown.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.codemods._positions import ReachedStatements, StatementPositions
from lint_gpu_tests.fixplan.env import UndoPlan
from lint_gpu_tests.ftypes import FixKind


class UndoMonkeypatch(GpuCodemod[UndoPlan]):
    """``mp = pytest.MonkeyPatch(); mp.setenv(...)`` -> the same, then ``yield`` and
    ``mp.undo()`` at the fixture's end."""

    DESCRIPTION = "Undo a fixture's pytest.MonkeyPatch() when the fixture ends (GPU008)."
    PLAN = UndoPlan
    KINDS = (FixKind.UNDO_MONKEYPATCH,)
    CODES = frozenset({"GPU008"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[UndoPlan]) -> cst.Module:
        # the fixture's ``def`` line -> its plan (every change through one instance has it)
        wanted = {plan.function_line: plan for plan in plans}
        positions = StatementPositions(tree, module.tree, self.printer)
        transformer = _Undo(wanted, positions)
        new_tree = tree.visit(transformer)
        return new_tree if transformer.changed else tree


class _Undo(ReachedStatements):
    def __init__(self, wanted: dict[int, UndoPlan], positions: StatementPositions) -> None:
        super().__init__(positions, set(wanted))
        self.wanted = wanted
        self.changed = False

    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        plan = self.wanted.get(self.positions.start_line(original_node))
        if plan is None or not isinstance(updated_node.body, cst.IndentedBlock):
            return updated_node
        added: list[cst.BaseStatement] = []
        if plan.add_yield:
            added.append(cst.SimpleStatementLine(body=[cst.Expr(cst.Yield())]))
        added.append(cst.SimpleStatementLine(body=[cst.Expr(cst.Call(
            func=cst.Attribute(value=cst.Name(plan.receiver), attr=cst.Name("undo"))))]))
        self.changed = True
        body = updated_node.body
        statements = list(body.body)
        at = len(statements) - 1 if plan.before_return else len(statements)
        statements[at:at] = added
        return updated_node.with_changes(body=body.with_changes(body=statements))

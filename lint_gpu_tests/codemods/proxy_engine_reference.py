"""Codemod for GPU006 and GPU002: hand out ``weakref.proxy(runner.llm)``, not the engine."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.codemods._cst import fit_last_call, proxy_of, statement_code, weak_referent
from lint_gpu_tests.codemods._positions import ReachedStatements, StatementPositions
from lint_gpu_tests.fixplan.proxy import ProxyPlan, weak_referents
from lint_gpu_tests.ftypes import FixKind


class ProxyEngineReference(GpuCodemod[ProxyPlan]):
    """``llm = runner.llm`` -> ``llm = weakref.proxy(runner.llm)``; a fixture's
    ``yield runner.llm`` -> ``yield weakref.proxy(runner.llm)`` (``return`` becomes
    ``yield``)."""

    DESCRIPTION = "Bind and yield weak proxies of the runner's engine (GPU002, GPU006)."
    PLAN = ProxyPlan
    KINDS = (FixKind.PROXY_ENGINE_REFERENCE,)
    CODES = frozenset({"GPU002", "GPU006"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[ProxyPlan]) -> cst.Module:
        lines = {line for plan in plans for line in plan.lines}
        positions = StatementPositions(tree, module.tree, self.printer)
        transformer = _Proxy(lines, positions, module.runner_attributes(),
                             weak_referents(module, lines),
                             {expr for plan in plans for expr in plan.exprs})
        new_tree = tree.visit(transformer)
        if not transformer.changed:
            return tree
        self.add_imports({"weakref"})
        return new_tree


class _Proxy(ReachedStatements):
    def __init__(self, lines: set[int], positions: StatementPositions,
                 attrs: frozenset[str],
                 referents: dict[tuple[int, str], tuple[str, str]],
                 exprs: set[tuple[int, int]]) -> None:
        super().__init__(positions, lines | {line for line, _ in referents},
                         expressions=True)
        self.lines = lines
        self.attrs = attrs
        self.referents = referents
        self.exprs = exprs
        self.changed = False

    def leave_Attribute(self, original_node: cst.Attribute,
                        updated_node: cst.Attribute) -> cst.BaseExpression:
        if not self.exprs:
            return updated_node
        start = self.positions[original_node].start
        if (start.line, start.column) in self.exprs and self._is_engine_attr(updated_node):
            self.changed = True
            return proxy_of(updated_node)
        return updated_node

    def leave_Call(self, original_node: cst.Call,
                   updated_node: cst.Call) -> cst.BaseExpression:
        line = self.positions[original_node].start.line
        found = self.referents.get((line, statement_code(updated_node.func)))
        if found is None or not updated_node.args:
            return updated_node
        alias, engine = found
        first = updated_node.args[0]
        if isinstance(first.value, cst.Name) and first.value.value == alias:
            self.changed = True
            return weak_referent(updated_node, cst.parse_expression(engine))
        return updated_node

    def _is_engine_attr(self, node: cst.BaseExpression | None) -> bool:
        return (isinstance(node, cst.Attribute) and node.attr.value in self.attrs
                and isinstance(node.value, cst.Name))

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if self.positions.start_line(original_node) not in self.lines:
            return updated_node
        body: list[cst.BaseSmallStatement] = []
        for small in updated_node.body:
            proxy: cst.Call | None = None
            if isinstance(small, (cst.Assign, cst.AnnAssign)) and self._is_engine_attr(
                    small.value):
                proxy = proxy_of(small.value)  # type: ignore[arg-type]
                small = small.with_changes(value=proxy)
            elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield) and \
                    self._is_engine_attr(small.value.value):  # type: ignore[arg-type]
                proxy = proxy_of(small.value.value)  # type: ignore[arg-type]
                small = small.with_changes(value=small.value.with_changes(value=proxy))
            elif isinstance(small, cst.Return) and self._is_engine_attr(small.value):
                proxy = proxy_of(small.value)  # type: ignore[arg-type]
                small = cst.Expr(cst.Yield(value=proxy))
            if proxy is not None:
                self.changed = True
                if len(updated_node.body) == 1:
                    small = fit_last_call(small, proxy,
                                          self.positions.start_column(original_node))
            body.append(small)
        return updated_node.with_changes(body=body)

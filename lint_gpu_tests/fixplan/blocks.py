"""Where a statement sits: the block that holds it, the statements nested in it, its line.

The fix rewrites whole statements of one block, located by their line numbers, so every
planning step asks these questions first: which statement list holds this statement
(:func:`~lint_gpu_tests.analysis.analysis.statement_block`, which the analysis asks too),
what is nested in it (:func:`walk_statements`), which names it reads or binds at its own
level, and whether it shares its line with another statement (:class:`StatementLayout`, a
base of :class:`~lint_gpu_tests.fixplan.planner.Planner`).
"""

from __future__ import annotations

import ast

from lint_gpu_tests.analysis.analysis import ModuleAnalysis, statement_block
from lint_gpu_tests.parsing.source import walk_breadth


def loads_of(node: ast.AST, name: str) -> list[ast.Name]:
    return [n for n in walk_breadth(node) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load)]


def stores_at_top(stmt: ast.stmt) -> list[ast.Name]:
    """Names a simple statement binds at its own level (not inside nested blocks)."""
    if isinstance(stmt, ast.Assign):
        return [t for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
        return [stmt.target]
    return []


def walk_statements(stmt: ast.stmt) -> list[ast.stmt]:
    """``stmt`` and the statements nested in it, nested functions and classes excluded."""
    out: list[ast.stmt] = []
    stack: list[ast.stmt] = [stmt]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for attr in ("body", "orelse", "finalbody"):
            stack.extend(getattr(node, attr, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            stack.extend(handler.body)
        for case in getattr(node, "cases", None) or []:
            stack.extend(case.body)
    return out


def reads_or_deletes(node: ast.AST, names: set[str]) -> bool:
    """True when ``node`` reads or deletes one of ``names`` anywhere inside."""
    return any(isinstance(n, ast.Name) and n.id in names
               and isinstance(n.ctx, (ast.Load, ast.Del)) for n in walk_breadth(node))


def node_contains(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in walk_breadth(outer))


class StatementLayout:
    """Questions about where a statement of one analysed module sits (its line, its loop,
    a lambda around it); a base of the planner, whose ``module`` it reads."""

    module: ModuleAnalysis

    def _in_loop(self, node: ast.AST, top: ast.stmt) -> bool:
        """True when ``node`` sits in a loop inside ``top`` (it runs between uses)."""
        current = self.module.parent(node)
        while current is not None and current is not top:
            if isinstance(current, (ast.For, ast.AsyncFor, ast.While)):
                return True
            current = self.module.parent(current)
        return isinstance(top, (ast.For, ast.AsyncFor, ast.While))

    def on_header_line(self, stmt: ast.stmt) -> bool:
        """True for a statement that does not start its line: written after a compound
        header (``with pytest.raises(E): llm = LLM(...)``, ``finally: x``) or a ``;``."""
        lines = self.module.lines
        if not 1 <= stmt.lineno <= len(lines):
            return False
        return bool(lines[stmt.lineno - 1].encode("utf-8")[:stmt.col_offset].strip())

    @staticmethod
    def _unwrappable(node: ast.Try) -> bool:
        """A ``try`` whose body sits on lines of its own can be replaced by its body."""
        return bool(node.body) and node.body[0].lineno != node.lineno

    def shares_line(self, stmt: ast.stmt) -> bool:
        """True when ``stmt`` shares its line with another statement of its block."""
        block = statement_block(self.module, stmt)
        if block is None:
            return False
        return sum(1 for s in block if s.lineno == stmt.lineno or (
            getattr(s, "end_lineno", None) == stmt.lineno and s is not stmt
            and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.If, ast.For, ast.While, ast.With, ast.Try,
                                   ast.AsyncFor, ast.AsyncWith)))) > 1

    def _inside_deferred(self, call: ast.Call, stmt: ast.stmt) -> bool:
        current: ast.AST | None = self.module.parent(call)
        while current is not None and current is not stmt:
            if isinstance(current, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                    ast.GeneratorExp)):
                return True
            current = self.module.parent(current)
        return False

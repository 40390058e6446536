"""LibCST's positions of a module, computed one top-level statement at a time.

LibCST's ``PositionProvider`` generates the code of the whole module to learn where each
node starts and ends: as costly as printing the module, for a rewrite that usually touches
one function. :class:`StatementPositions` gives the same :class:`~libcst.CodeRange` for
every node, but generates the code of a top-level statement only when a node inside it is
asked for (or :meth:`StatementPositions.prepare` is called). Where that statement's code
starts comes from the ``ast`` tree of the same text, which the check built already; the
position of the statement's first token is checked against the ``ast`` line, and the
positions are shifted where they disagree, so a wrong guess costs time, never a wrong
position. A node that no top-level statement holds (the module, its header and footer)
falls back to LibCST's own provider over the whole module.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import cast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from lint_gpu_tests.codemods._printer import Printer
from lint_gpu_tests.parsing.source import first_line

__all__ = ["ReachedStatements", "StatementPositions"]


class StatementPositions:
    """``node -> CodeRange`` as ``MetadataWrapper(tree).resolve(PositionProvider)`` gives
    it, computed lazily per top-level statement.

    Args:
        tree: the LibCST module, unmodified since it was parsed from a text.
        parsed: the ``ast`` module of that same text (its top-level statements pair with
            ``tree``'s: a simple statement line holds as many ``ast`` statements as it has
            small statements). When they do not pair, every lookup falls back to LibCST's
            provider.
        printer: given the code of each statement whose positions are computed (which
            generates it), so that printing ``tree`` does not generate it again.
    """

    def __init__(self, tree: cst.Module, parsed: ast.Module,
                 printer: Printer | None = None) -> None:
        self._tree = tree
        self._printer = printer
        self._computed: dict[cst.CSTNode, CodeRange] = {}
        self._prepared: set[int] = set()
        self._resolved_all = False
        # id(top-level statement) -> (statement, its ast statements)
        self._top: dict[int, tuple[cst.BaseStatement, list[ast.stmt]]] = {}
        body, index = parsed.body, 0
        for stmt in tree.body:
            count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
            self._top[id(stmt)] = (stmt, body[index:index + count])
            index += count
        if index != len(body) or any(not nodes for _, nodes in self._top.values()):
            self._top.clear()  # the trees do not pair: LibCST's provider answers
        # id(statement) -> (statement, its ast statements), at every depth: the lines and
        # columns of a statement, read without generating code.
        self._statements: dict[int, tuple[cst.BaseStatement, list[ast.stmt]]] = {}
        if self._top and not _pair_block(tree.body, parsed.body, self._statements):
            self._statements.clear()

    # ------------------------------------------------------------------ queries
    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._computed.get(node)
        if found is not None:
            return found
        top = self._entry(node)
        if top is not None:
            self.prepare(top[0])
        else:
            self._resolve_all()
        return self._computed[node]

    def start_line(self, node: cst.CSTNode) -> int:
        """The line where ``node`` starts; read from the ``ast`` tree, without generating
        code, for a statement."""
        found = self.ast_of(node)
        if found is not None:
            return found[0].lineno
        line: int = self[node].start.line
        return line

    def start_column(self, node: cst.CSTNode) -> int:
        """The column where ``node`` starts; read from the ``ast`` tree, without generating
        code, for a statement (its indentation: ASCII, so ``ast``'s byte offset is
        LibCST's column)."""
        found = self.ast_of(node)
        if found is not None:
            return found[0].col_offset
        column: int = self[node].start.column
        return column

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """``(first, last)`` lines of ``node`` as LibCST's range gives them (a function's
        decorators and a block's trailing comment lines excluded); read from the ``ast``
        tree, without generating code, for a statement."""
        found = self.ast_of(node)
        if found is not None:
            return found[0].lineno, _last_line(found)
        where = self[node]
        return where.start.line, where.end.line

    def reach(self, node: cst.BaseStatement) -> tuple[int, int]:
        """``(first, last)`` lines of the statement ``node``, decorators included: read
        from the ``ast`` tree for a statement of the parsed tree, else LibCST's range (with
        its decorators' for a function or class)."""
        found = self.source_lines(node)
        if found is not None:
            return found
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return self.with_decorators(node)
        return self.span(node)

    def with_decorators(self, node: cst.FunctionDef | cst.ClassDef) -> tuple[int, int]:
        """``(first, last)`` lines of the function or class ``node``, its decorators
        included."""
        found = self.ast_of(node)
        if found is not None:
            return first_line(found[0]), found[0].end_lineno or found[0].lineno
        where = self[node]
        first = min([where.start.line, *(self[d].start.line for d in node.decorators)])
        return first, where.end.line

    def lines_of(self, stmt: cst.BaseStatement) -> tuple[int, int]:
        """``(first, last)`` lines of the top-level statement ``stmt``, decorators
        included, from the ``ast`` tree.

        Raises:
            KeyError: when ``stmt`` is not one of the module's top-level statements (or the
                trees did not pair).
        """
        top = self._entry(stmt)
        if top is None:
            raise KeyError(stmt)
        nodes = top[1]
        return first_line(nodes[0]), _last_line(nodes)

    def source_lines(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """``(first, last)`` lines of the statement ``node``'s tokens, decorators included,
        when ``node`` is a statement of the parsed tree (at any depth; not one a
        transformer built), else ``None``."""
        found = self.ast_of(node)
        if found is None:
            return None
        return first_line(found[0]), _last_line(found)

    def ast_of(self, node: cst.CSTNode) -> list[ast.stmt] | None:
        """The ``ast`` statements of the statement ``node`` (several for a line of
        ``;``-separated statements), when it is a statement of the parsed tree (at any
        depth; not one a transformer built), else ``None``."""
        found = self._statements.get(id(node))
        return found[1] if found is not None and found[0] is node else None

    def _entry(self, node: cst.CSTNode) -> tuple[cst.BaseStatement, list[ast.stmt]] | None:
        """``(node, its ast statements)`` when ``node`` is one of the module's top-level
        statements (the trees paired), else ``None``."""
        top = self._top.get(id(node))
        return top if top is not None and top[0] is node else None

    # ------------------------------------------------------------------ computing
    def prepare(self, stmt: cst.BaseStatement) -> None:
        """Compute the positions of every node of the top-level statement ``stmt`` (a
        no-op when done before, or when ``stmt`` is not top-level: lookups then fall back to
        the whole module)."""
        top = self._entry(stmt)
        if top is None or id(stmt) in self._prepared:
            return
        self._prepared.add(id(stmt))
        nodes = top[1]
        anchor: cst.CSTNode = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) \
            else stmt
        provider = PositionProvider()
        state = PositionProvidingCodegenState(
            default_indent=self._tree.default_indent,
            default_newline=self._tree.default_newline,
            provider=provider,
        )
        state.line = _guess_start(stmt, nodes[0])
        stmt._codegen(state)
        if self._printer is not None:  # the statement's code, printed on the way
            self._printer.remember(stmt, "".join(state.tokens), self._tree)
        computed = cast("dict[cst.CSTNode, CodeRange]", provider._computed)
        shift = nodes[0].lineno - computed[anchor].start.line
        if shift:  # the guess was wrong (a backslash after ``@``): move every range
            computed = {node: CodeRange(CodePosition(r.start.line + shift, r.start.column),
                                        CodePosition(r.end.line + shift, r.end.column))
                        for node, r in computed.items()}
        self._computed.update(computed)

    def prepare_all(self) -> None:
        """Compute the positions of every top-level statement (for a transformer that may
        ask anywhere): what ``PositionProvider`` costs, but each statement's code goes to
        the printer."""
        for stmt, _ in list(self._top.values()):
            self.prepare(stmt)

    def _resolve_all(self) -> None:
        if self._resolved_all:
            return
        self._resolved_all = True
        self.prepare_all()
        wrapper = MetadataWrapper(self._tree, unsafe_skip_copy=True)
        for node, found in wrapper.resolve(PositionProvider).items():
            self._computed.setdefault(node, found)


def _last_line(nodes: Sequence[ast.stmt]) -> int:
    """The last line of the statements ``nodes`` (a line of ``;``-separated ones)."""
    return max(n.end_lineno or n.lineno for n in nodes)


def _guess_start(stmt: cst.BaseStatement, first: ast.stmt) -> int:
    """The line where the code of the top-level ``stmt`` starts (its leading blank and
    comment lines, then its decorators): the ``ast`` line of its first token less the lines
    LibCST writes before it."""
    before = len(getattr(stmt, "leading_lines", ()))
    decorators: list[cst.Decorator] = list(getattr(stmt, "decorators", ()))
    if decorators:
        return first_line(first) - before - len(decorators[0].leading_lines)
    return first.lineno - before


class ReachedStatements(cst.CSTTransformer):
    """A transformer that visits only the statements spanning one of ``lines`` (their
    decorators included): every edit it makes is found by the line of a node, which lies
    inside each statement around it, so a statement that spans none of them is left as it
    is, unvisited (its ``leave_`` methods still run, with the node itself). With
    ``expressions``, the positions of every node of a reached top-level statement are
    computed before it is visited (a transformer that finds expressions by line);
    statements' lines and columns come from :class:`StatementPositions` without that.

    Args:
        positions: the positions of the tree the transformer visits.
        lines: the lines the edits are found at.
        expressions: whether the transformer asks for the positions of expressions.
    """

    def __init__(self, positions: StatementPositions, lines: set[int],
                 expressions: bool = False) -> None:
        super().__init__()
        self.positions = positions
        self.reach_lines = lines
        self.expressions = expressions

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            first, last = self.positions.reach(node)
            if not any(first <= line <= last for line in self.reach_lines):
                super().on_visit(node)  # its visit_ runs, as its leave_ will
                return False
            if self.expressions:
                self.positions.prepare(node)  # a no-op but for a top-level statement
        return super().on_visit(node)


_Pairs = dict[int, tuple[cst.BaseStatement, list[ast.stmt]]]


def _pair_block(stmts: Sequence[cst.BaseStatement], nodes: Sequence[ast.stmt],
                out: _Pairs) -> bool:
    """Pair the statements ``stmts`` of a block with ``nodes``, the ``ast`` statements of
    the same block (a simple statement line with as many as it has small statements), into
    ``out``, and their blocks' statements in turn; ``False`` where they do not pair."""
    index = 0
    for stmt in stmts:
        if isinstance(stmt, cst.SimpleStatementLine):
            count = len(stmt.body)
            found = list(nodes[index:index + count])
            if len(found) != count or not count:
                return False
            index += count
        else:
            if index >= len(nodes) or not _pair_compound(stmt, nodes[index], out):
                return False
            found = [nodes[index]]
            index += 1
        out[id(stmt)] = (stmt, found)
    return index == len(nodes)


def _pair_suite(suite: cst.BaseSuite, nodes: Sequence[ast.stmt], out: _Pairs) -> bool:
    if isinstance(suite, cst.IndentedBlock):
        return _pair_block(suite.body, nodes, out)
    return isinstance(suite, cst.SimpleStatementSuite) and len(suite.body) == len(nodes)


def _pair_else(orelse: cst.Else | None, nodes: Sequence[ast.stmt], out: _Pairs) -> bool:
    if orelse is None:
        return not nodes
    return _pair_suite(orelse.body, nodes, out)


_TRY_STAR: tuple[type[ast.stmt], ...] = (ast.TryStar,) if hasattr(ast, "TryStar") else ()


def _pair_compound(stmt: cst.BaseStatement, node: ast.stmt, out: _Pairs) -> bool:
    """Pair the compound ``stmt`` with ``node`` (its ``ast`` statement) and their blocks'
    statements; ``False`` where the kinds or the blocks do not match."""
    if isinstance(stmt, cst.FunctionDef):
        return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
            _pair_suite(stmt.body, node.body, out)
    if isinstance(stmt, cst.ClassDef):
        return isinstance(node, ast.ClassDef) and _pair_suite(stmt.body, node.body, out)
    if isinstance(stmt, cst.If):
        if not isinstance(node, ast.If) or not _pair_suite(stmt.body, node.body, out):
            return False
        if isinstance(stmt.orelse, cst.If):  # elif: the one statement of ``orelse``
            if len(node.orelse) != 1 or not _pair_compound(stmt.orelse, node.orelse[0], out):
                return False
            out[id(stmt.orelse)] = (stmt.orelse, [node.orelse[0]])
            return True
        return _pair_else(stmt.orelse, node.orelse, out)
    if isinstance(stmt, cst.For):
        return isinstance(node, (ast.For, ast.AsyncFor)) and \
            _pair_suite(stmt.body, node.body, out) and _pair_else(stmt.orelse, node.orelse, out)
    if isinstance(stmt, cst.While):
        return isinstance(node, ast.While) and _pair_suite(stmt.body, node.body, out) and \
            _pair_else(stmt.orelse, node.orelse, out)
    if isinstance(stmt, cst.With):
        return isinstance(node, (ast.With, ast.AsyncWith)) and \
            _pair_suite(stmt.body, node.body, out)
    if isinstance(stmt, (cst.Try, cst.TryStar)):
        star = isinstance(stmt, cst.TryStar)
        if not (isinstance(node, _TRY_STAR) if star else isinstance(node, ast.Try)):
            return False
        handlers: list[ast.ExceptHandler] = getattr(node, "handlers", [])
        body: list[ast.stmt] = getattr(node, "body", [])
        if len(stmt.handlers) != len(handlers) or not _pair_suite(stmt.body, body, out):
            return False
        if not all(_pair_suite(cast("cst.ExceptHandler", h).body, a.body, out)
                   for h, a in zip(stmt.handlers, handlers, strict=True)):
            return False
        finalbody: list[ast.stmt] = getattr(node, "finalbody", [])
        return _pair_else(stmt.orelse, getattr(node, "orelse", []), out) and (
            not finalbody if stmt.finalbody is None
            else _pair_suite(stmt.finalbody.body, finalbody, out))
    if isinstance(stmt, cst.Match):
        return isinstance(node, ast.Match) and len(stmt.cases) == len(node.cases) and all(
            _pair_suite(c.body, a.body, out) for c, a in zip(stmt.cases, node.cases,
                                                             strict=True))
    return False

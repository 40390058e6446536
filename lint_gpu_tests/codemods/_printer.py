"""The code of LibCST modules that share statements, each statement generated once.

A fix pass prints a module three times: the file as parsed (to check that LibCST gives its
bytes back), the tree the rewrite made, and that tree once the imports are edited. The three
share most top-level statements (the same objects: LibCST's trees are immutable, and a
rewrite rebuilds only the statements it changes), and the code of a top-level statement
depends on nothing but the statement and the module's default indent and newline (a module
adds no indentation). :class:`Printer` keeps the code of each top-level statement it
generated and reuses it wherever the same statement object comes again, so each pass
generates the code of the unchanged statements once. It drives LibCST's own code generation
(``CodegenState`` and each node's ``_codegen``, as ``Module.code`` does); ``tests/test_printer.py``
holds its output to ``Module.code`` on every fixture and corpus module.
"""

from __future__ import annotations

import libcst as cst
from libcst._nodes.internal import CodegenState

__all__ = ["Printer"]


class Printer:
    """``tree.code`` for modules that share top-level statements (see the module).

    The code of a statement is kept by the statement's identity (and the statement, so that
    the identity is not reused while kept) together with the module's default indent and
    newline, which it depends on.
    """

    def __init__(self) -> None:
        self._parts: dict[int, tuple[cst.BaseStatement, str, str, str]] = {}

    def remember(self, stmt: cst.BaseStatement, text: str, module: cst.Module) -> None:
        """Take ``text`` as the code of ``stmt``, a top-level statement of ``module``
        (generated elsewhere: :class:`~lint_gpu_tests.codemods._positions.StatementPositions`
        generates it to learn positions)."""
        self._parts[id(stmt)] = (stmt, text, module.default_indent, module.default_newline)

    def statement(self, stmt: cst.BaseStatement, tree: cst.Module) -> str:
        """The code of ``stmt``, a top-level statement of ``tree`` (kept, as :meth:`code`
        keeps it)."""
        indent, newline = tree.default_indent, tree.default_newline
        known = self._parts.get(id(stmt))
        if known is not None and known[0] is stmt and known[2:] == (indent, newline):
            return known[1]
        state = CodegenState(default_indent=indent, default_newline=newline)
        stmt._codegen(state)
        text = "".join(state.tokens)
        self._parts[id(stmt)] = (stmt, text, indent, newline)
        return text

    def code(self, tree: cst.Module) -> str:
        """The code of ``tree``, equal to ``tree.code``."""
        if not tree.has_trailing_newline:
            return tree.code  # the last newline token is taken off: not worth the care
        indent, newline = tree.default_indent, tree.default_newline
        state = CodegenState(default_indent=indent, default_newline=newline)
        tokens = state.tokens
        for line in tree.header:
            line._codegen(state)
        tokens.extend(self.statement(stmt, tree) for stmt in tree.body)
        for line in tree.footer:
            line._codegen(state)
        if not tokens:
            state.add_token(newline)
        return "".join(tokens)

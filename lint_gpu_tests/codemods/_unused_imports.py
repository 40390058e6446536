"""Removing the imports a rewrite left unused, without a whole-module scope analysis.

A rewrite schedules imports it may have left unused (``gc``, ``torch``, the engine class, the
cleanup helpers) as ``(module, object, asname)`` entries, the shape LibCST's
``RemoveImportsVisitor.remove_unused_import`` takes. That visitor decides whether each is
still used with LibCST's scope and qualified-name analyses of the whole module, which cost
about 60 % of a fix pass on a small test module (``benchmarks/fix_cost.py``; profile in
``docs/performance.md``). Most of the time the answer is plain from the text: the local name
occurs nowhere outside import statements (no read, no string, no ``__all__``, no comment), so
it is unused however scopes are drawn. :func:`remove_unused_imports` removes those itself,
editing the import statements as LibCST's visitor does (the same aliases kept, the same
trailing comma dropped, the comment after a removed alias moved onto the one before), and
hands every other case to LibCST's visitor unchanged, so the bytes written are the same.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import libcst as cst
from libcst.helpers import get_full_name_for_node

#: An import to remove where unused: ``(module, object, asname)``; ``object`` is ``None``
#: for ``import module [as asname]``.
Removal = tuple[str, str | None, str | None]


def remove_unused_imports(tree: cst.Module, removals: Sequence[Removal],
                          filename: str | None, code: str | None = None) -> cst.Module:
    """Remove the imports in ``removals`` that ``tree`` no longer uses.

    Args:
        tree: the rewritten module.
        removals: the imports the rewrite may have left unused, as ``(module, object,
            asname)``.
        filename: the module's path, for LibCST's visitor when it decides.
        code: ``tree.code`` where the caller has it.

    Returns:
        ``tree`` without those imports (``tree`` itself when there is nothing to remove).
    """
    if not removals:
        return tree
    if _unused_by_text(tree.code if code is None else code, removals):
        return tree.visit(_RemoveAliases(removals))
    from libcst.codemod import CodemodContext  # the codemod framework, only when needed
    from libcst.codemod.visitors import RemoveImportsVisitor

    context = CodemodContext(filename=filename)
    for module, obj, asname in removals:
        RemoveImportsVisitor.remove_unused_import(context, module, obj, asname)
    return RemoveImportsVisitor(context).transform_module(tree)


def _local(removal: Removal) -> str | None:
    """The name ``removal``'s import binds, or ``None`` for a dotted ``import a.b``
    (which binds ``a``, shared with any other ``import a.x``)."""
    module, obj, asname = removal
    if asname is not None:
        return asname
    if obj is not None:
        return obj
    return None if "." in module else module


def _unused_by_text(text: str, removals: Sequence[Removal]) -> bool:
    """True when every local name ``removals`` bind occurs in ``text`` only inside import
    statements: then no code, string or comment refers to it, and each is unused."""
    locals_ = {_local(r) for r in removals}
    if None in locals_:
        return False
    try:
        parsed = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans: list[tuple[int, int]] = []
    for node in ast.walk(parsed):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.end_lineno is not None \
                and node.end_col_offset is not None:
            spans.append((_offset(text, starts, node.lineno, node.col_offset),
                          _offset(text, starts, node.end_lineno, node.end_col_offset)))
    spans.sort()
    outside: list[str] = []
    at = 0
    for start, end in spans:
        outside.append(text[at:start])
        at = max(at, end)
    outside.append(text[at:])
    rest = "".join(outside)
    return not any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", rest)
                   for name in locals_ if name is not None)


def _offset(text: str, starts: list[int], line: int, col: int) -> int:
    """The character offset of ``ast``'s ``(line, col)``; ``col`` counts UTF-8 bytes."""
    begin = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    return begin + len(text[begin:end].encode("utf-8")[:col].decode("utf-8", "replace"))


class _RemoveAliases(cst.CSTTransformer):
    """Drops the scheduled aliases (known unused), statement edits as LibCST's
    ``RemoveImportsVisitor`` makes them."""

    def __init__(self, removals: Sequence[Removal]) -> None:
        super().__init__()
        self.modules = {module: asname for module, obj, asname in removals if obj is None}
        self.objects: dict[str, set[tuple[str, str | None]]] = {}
        for module, obj, asname in removals:
            if obj is not None:
                self.objects.setdefault(module, set()).add((obj, asname))

    def on_visit(self, node: cst.CSTNode) -> bool:
        """Descend through statements only: an import is a small statement, left (its
        ``leave_`` runs) without visiting its children; expressions hold no import."""
        return not isinstance(node, (cst.BaseSmallStatement, cst.BaseExpression))

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import
                     ) -> cst.Import | cst.RemovalSentinel:
        keep = [alias for alias in original_node.names
                if alias.evaluated_name not in self.modules
                or alias.evaluated_alias != self.modules[alias.evaluated_name]]
        if keep == list(original_node.names):
            return updated_node
        if not keep:
            return cst.RemoveFromParent()
        if keep[-1] is not original_node.names[-1]:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=keep)

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
                         ) -> cst.ImportFrom | cst.RemovalSentinel:
        names = original_node.names
        if isinstance(names, cst.ImportStar) or original_node.relative \
                or original_node.module is None:
            return updated_node
        module = get_full_name_for_node(original_node.module)
        if module is None or module not in self.objects:
            return updated_node
        remove = self.objects[module]
        keep: list[cst.ImportAlias] = []
        lpar = updated_node.lpar
        for alias in names:
            if (alias.evaluated_name, alias.evaluated_alias) not in remove:
                keep.append(alias)
                continue
            comma = alias.comma
            if not isinstance(comma, cst.Comma):
                continue
            # The comment after a removed alias's comma moves onto the alias before it,
            # or after the opening parenthesis.
            if keep:
                prev = keep[-1]
                if isinstance(prev.comma, cst.Comma):
                    keep[-1] = prev.with_deep_changes(
                        prev.comma, whitespace_after=_merged(prev.comma.whitespace_after,
                                                             comma.whitespace_after))
                else:
                    keep[-1] = prev.with_changes(comma=comma)
            elif isinstance(lpar, cst.LeftParen):
                lpar = lpar.with_changes(whitespace_after=_merged(lpar.whitespace_after,
                                                                  comma.whitespace_after))
        if keep == list(names):
            return updated_node
        if not keep:
            return cst.RemoveFromParent()
        if keep[-1] is not names[-1]:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=keep, lpar=lpar)


def _merged(left: cst.BaseParenthesizableWhitespace,
            right: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """``left``, keeping the comment lines of ``right`` where both span lines."""
    if not isinstance(right, cst.ParenthesizedWhitespace):
        return left
    if not isinstance(left, cst.ParenthesizedWhitespace):
        return right
    return left.with_changes(empty_lines=tuple(line for line in right.empty_lines
                                               if line.comment is not None))

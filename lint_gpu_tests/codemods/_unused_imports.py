"""Removing the imports a rewrite left unused, without a whole-module scope analysis.

A rewrite schedules imports it may have left unused (``gc``, ``torch``, the engine class, the
cleanup helpers) as ``(module, object, asname)`` entries, the shape LibCST's
``RemoveImportsVisitor.remove_unused_import`` takes. That visitor decides whether each is still
used with LibCST's scope and qualified-name analyses of the whole module, which cost most of a
fix pass on a small test module (profile in ``docs/performance.md``). Most of the time the
answer is plain from the tokens: the local name is not a name token outside import statements,
nor in an f-string or a string that is an expression (a string annotation, an ``__all__``
entry), so it is unused however scopes are drawn (comments and prose strings do not count, as
they do not for LibCST). :func:`remove_unused_imports` removes those itself, editing the import
statements as LibCST's visitor does (the same aliases kept, the same trailing comma dropped,
the comment after a removed alias moved onto the one before), and hands every other case to
LibCST's visitor unchanged, so the bytes written are the same.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence

import libcst as cst
from libcst.helpers import get_full_name_for_node

from lint_gpu_tests.codemods._printer import Printer
from lint_gpu_tests.parsing.syntax import iter_statements

#: An import to remove where unused: ``(module, object, asname)``; ``object`` is ``None``
#: for ``import module [as asname]``.
Removal = tuple[str, str | None, str | None]


def remove_unused_imports(tree: cst.Module, removals: Sequence[Removal],
                          filename: str | None, code: str | None = None, *,
                          nested: bool = True, printer: Printer | None = None) -> cst.Module:
    """Remove the imports in ``removals`` that ``tree`` no longer uses.

    Args:
        tree: the rewritten module.
        removals: the imports the rewrite may have left unused, as ``(module, object,
            asname)``.
        filename: the module's path, for LibCST's visitor when it decides.
        code: ``tree.code`` where the caller has it.
        nested: ``False`` when every import of ``tree`` is a statement of the module's own
            body (none under a compound statement): then only those are looked at.
        printer: the printer of ``tree``'s statements, where the caller has one: a name
            that no statement but a line of imports holds as a word is known unused
            without tokenizing the module.

    Returns:
        ``tree`` without those imports (``tree`` itself when there is nothing to remove).
    """
    if not removals:
        return tree
    locals_ = {_local(r) for r in removals}
    if printer is not None and None not in locals_ and \
            not names_outside_imports(tree, {n for n in locals_ if n}, printer):
        return tree.visit(_RemoveAliases(removals, nested))
    if _unused_by_text(tree.code if code is None else code, removals):
        return tree.visit(_RemoveAliases(removals, nested))
    from libcst.codemod import CodemodContext  # the codemod framework, only when needed
    from libcst.codemod.visitors import RemoveImportsVisitor

    context = CodemodContext(filename=filename)
    for module, obj, asname in removals:
        RemoveImportsVisitor.remove_unused_import(context, module, obj, asname)
    return RemoveImportsVisitor(context).transform_module(tree)


def names_outside_imports(tree: cst.Module, names: set[str], printer: Printer) -> set[str]:
    """Those of ``names`` that occur as a word (not after a dot) in the code of ``tree``'s
    top-level statements other than lines of imports alone. A superset of the names read
    outside imports (a word in a comment, a string or an import nested in a function
    counts too): a name not returned is read nowhere, as ``ast``'s names, the tokenizer
    and LibCST's scopes would all find."""
    pattern = re.compile("|".join(rf"(?<![\w.]){re.escape(n)}(?!\w)" for n in sorted(names)))
    found: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, cst.SimpleStatementLine) and \
                all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            continue
        found.update(m.group(0) for m in pattern.finditer(printer.statement(stmt, tree)))
        if found == names:
            break
    return found


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
    """True when no local name ``removals`` bind is read in ``text`` outside import
    statements, as far as its tokens tell: no name token (an attribute ``x.name`` is not the
    name), no f-string naming it, and no string that is itself an expression naming it (a
    string annotation ``"torch.Tensor"``, an ``__all__`` entry: LibCST's visitor counts those
    as uses). Comments and prose strings do not count. Then each is unused."""
    names = {_local(r) for r in removals}
    if None in names:
        return False
    word = re.compile("|".join(rf"(?<![\w.]){re.escape(n)}(?!\w)" for n in names if n))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    in_import = False
    at_start = True
    previous = ""
    for token in tokens:
        kind, string = token.type, token.string
        if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) or \
                (kind == tokenize.OP and string == ";"):
            in_import, at_start = False, True
            continue
        if kind in (tokenize.COMMENT, tokenize.NL):
            continue
        if at_start:
            in_import = kind == tokenize.NAME and string in ("import", "from")
            at_start = False
        if in_import:
            continue
        if kind == tokenize.NAME and string in names and previous != ".":
            return False
        if kind == tokenize.STRING and word.search(string) and \
                _names_in_string(string, names):
            return False
        if kind not in (tokenize.STRING, tokenize.NAME, tokenize.OP, tokenize.NUMBER):
            # an f-string's parts (Python 3.12+) and anything unforeseen: a name in it counts
            if word.search(string):
                return False
        previous = string if kind == tokenize.OP else ""
    return True


def _names_in_string(literal: str, names: set[str | None]) -> bool:
    """True when the string token ``literal`` may name a binding as LibCST reads strings: an
    f-string whose replacement fields read one of ``names`` (or hold a string naming one),
    or a string whose content is a Python expression. The literal text of an f-string is
    no use of a name: LibCST's scopes see only the expressions of its replacement fields."""
    prefix = literal[:literal.index(literal[-1])].lower()
    if "f" in prefix:
        try:
            joined = ast.parse(literal, mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return True
        if not isinstance(joined, ast.JoinedStr):
            return True
        for field in ast.walk(joined):
            if not isinstance(field, ast.FormattedValue):
                continue
            for node in ast.walk(field):
                if isinstance(node, ast.Name) and node.id in names:
                    return True
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        any(n and n in node.value for n in names):
                    return True
        return False
    try:
        content = ast.literal_eval(literal)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return True
    if not isinstance(content, str):
        return False
    try:
        ast.parse(content.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


class _RemoveAliases(cst.CSTTransformer):
    """Drops the scheduled aliases (known unused), statement edits as LibCST's
    ``RemoveImportsVisitor`` makes them."""

    def __init__(self, removals: Sequence[Removal], nested: bool = True) -> None:
        super().__init__()
        self.holders = _HOLDS_STATEMENTS if nested else (cst.Module, cst.SimpleStatementLine)
        self.modules = {module: asname for module, obj, asname in removals if obj is None}
        self.objects: dict[str, set[tuple[str, str | None]]] = {}
        for module, obj, asname in removals:
            if obj is not None:
                self.objects.setdefault(module, set()).add((obj, asname))

    def on_visit(self, node: cst.CSTNode) -> bool:
        """Descend through statements and the blocks that hold them only: an import is a
        small statement, left (its ``leave_`` runs) without visiting its children;
        expressions, parameters, decorators and whitespace hold no import (nor, where no
        import is nested, a compound statement)."""
        return isinstance(node, self.holders)

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


_HOLDS_STATEMENTS = (cst.Module, cst.BaseStatement, cst.BaseSuite, cst.Else, cst.ExceptHandler,
                     cst.ExceptStarHandler, cst.Finally, cst.MatchCase)
"""The nodes below which an import statement may be."""


def _merged(left: cst.BaseParenthesizableWhitespace,
            right: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """``left``, keeping the comment lines of ``right`` where both span lines."""
    if not isinstance(right, cst.ParenthesizedWhitespace):
        return left
    if not isinstance(left, cst.ParenthesizedWhitespace):
        return right
    return left.with_changes(empty_lines=tuple(line for line in right.empty_lines
                                               if line.comment is not None))


def has_nested_imports(tree: ast.Module) -> bool:
    """True when an import statement of ``tree`` (the ``ast`` module) is not one of its
    top-level statements: it sits under a compound statement (a function, an ``if``, a
    ``try``)."""
    return any(isinstance(node, (ast.Import, ast.ImportFrom))
               for stmt in tree.body if not isinstance(stmt, (ast.Import, ast.ImportFrom))
               for node in iter_statements([stmt]))

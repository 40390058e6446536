"""Small questions about stdlib ``ast`` nodes that every layer above asks: dotted names,
statement lists, fixture decorators, ``__main__`` guards. Pure functions of the tree; no
module state, no configuration.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator

from lint_gpu_tests.parsing.source import first_line, walk_breadth

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
"""A function definition, plain or ``async``."""

FIXTURE_DECORATORS = frozenset({"fixture", "yield_fixture"})
"""Last names of pytest's fixture decorators (``pytest.fixture``, the old ``yield_fixture``)."""


def head_name(expr: ast.AST) -> str | None:
    """The first name of a dotted expression (``vllm`` for ``vllm.LLM``), else ``None``."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def dotted_name(node: ast.AST) -> str | None:
    """Return ``a.b.c`` for a Name/Attribute chain, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def last_name(node: ast.AST) -> str | None:
    """Return the last identifier of a Name/Attribute/Call chain (``pytest.fixture`` ->
    ``fixture``)."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def names_in(node: ast.AST) -> set[str]:
    """Every identifier loaded anywhere inside ``node``."""
    return {n.id for n in walk_breadth(node) if isinstance(n, ast.Name)}




_STATEMENT_LISTS = ("body", "orelse", "finalbody")


def iter_statements(body: list[ast.stmt], *, definitions: bool = True) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and in the statement lists nested in it (functions and
    classes included, unless ``definitions`` is false: then only the statements of
    ``body``'s own scope), without visiting expressions: much cheaper than ``ast.walk`` for
    finding imports and definitions."""
    stack: list[ast.stmt] = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        if not definitions and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.ClassDef)):
            continue
        nested: list[ast.stmt] = []
        for attr in _STATEMENT_LISTS:
            block = getattr(stmt, attr, None)
            if isinstance(block, list):
                nested.extend(block)
        for handler in getattr(stmt, "handlers", ()) or ():
            nested.extend(handler.body)
        for case in getattr(stmt, "cases", ()) or ():
            nested.extend(case.body)
        stack.extend(reversed(nested))


def parameter_names(args: ast.arguments, *, variadic: bool = True) -> set[str]:
    """The names ``args`` binds: positional-only, positional and keyword-only parameters,
    and with ``variadic`` the ``*args`` and ``**kwargs`` ones."""
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    if variadic:
        names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    return names


CACHING_DECORATORS = frozenset({"cache", "lru_cache", "cached", "memoize", "cached_property"})
"""The last names of the decorators that keep what a function returns for its later calls
(``functools.cache``, ``functools.lru_cache(maxsize=None)``, cachetools' ``cached(...)``):
an engine such a function returns belongs to the cache, not to the caller."""


def none_test(test: ast.expr, name: str) -> str | None:
    """``"some"`` for a test true exactly when ``name`` holds a value (``name``, ``name is
    not None``, ``name != None``), ``"none"`` for one true when it may be ``None`` (``not
    name``, ``name is None``, ``name == None``), else ``None``. ``==`` counts as ``is`` for
    the values these tests guard (strings, engines: no ``__eq__`` that matches ``None``)."""
    if isinstance(test, ast.Name) and test.id == name:
        return "some"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and \
            isinstance(test.operand, ast.Name) and test.operand.id == name:
        return "none"
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
            isinstance(test.left, ast.Name) and test.left.id == name and \
            isinstance(test.comparators[0], ast.Constant) and \
            test.comparators[0].value is None:
        if isinstance(test.ops[0], (ast.IsNot, ast.NotEq)):
            return "some"
        if isinstance(test.ops[0], (ast.Is, ast.Eq)):
            return "none"
    return None


def caching_decorator(func: FunctionNode) -> str | None:
    """The decorator of ``func`` that caches what it returns (:data:`CACHING_DECORATORS`),
    as written without its arguments (``functools.lru_cache``), else ``None``."""
    for decorator in func.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if last_name(target) in CACHING_DECORATORS:
            return dotted_name(target) or last_name(target)
    return None


def fixture_decorator(func: FunctionNode) -> ast.expr | None:
    """Return the ``@pytest.fixture``/``@pytest.fixture(...)`` decorator, else ``None``."""
    for deco in func.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if last_name(target) in FIXTURE_DECORATORS:
            return deco
    return None


def fixture_request_name(func: FunctionNode, deco: ast.expr) -> str:
    """The name tests and fixtures request the fixture ``func`` by: the literal ``name=`` of
    its decorator ``deco`` (``@pytest.fixture(name="llm")``; pytest's ``FixtureFunctionMarker``
    registers the fixture under it), else the function's own name."""
    if isinstance(deco, ast.Call):
        for kw in deco.keywords:
            if kw.arg == "name" and isinstance(kw.value, ast.Constant) and \
                    isinstance(kw.value.value, str) and kw.value.value.isidentifier():
                return kw.value.value
    return func.name


def fixture_scope(deco: ast.expr) -> str:
    """The literal ``scope=`` of a fixture decorator (``"function"`` when absent)."""
    if isinstance(deco, ast.Call):
        for kw in deco.keywords:
            if kw.arg == "scope":
                if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
                return "dynamic"
    return "function"




def is_main_guard(node: ast.If) -> bool:
    """True for ``if __name__ == "__main__":`` (either operand order)."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    has_name = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    has_main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    return has_name and has_main


def is_raises_with(node: ast.With | ast.AsyncWith) -> bool:
    """True for ``with pytest.raises(...)`` (any item)."""
    return any(
        isinstance(item.context_expr, ast.Call) and last_name(item.context_expr.func) == "raises"
        for item in node.items
    )


def lines_naming(text: str, words: tuple[str, ...]) -> list[int]:
    r"""The numbers (1-based, ascending) of the lines of ``text`` where one of ``words``
    occurs as a whole word: not preceded or followed by a word character (``\w``), the
    lines :func:`lines_matching` gives for ``(?<!\w)(?:word|...)(?!\w)``. Words that are
    identifiers are found with :meth:`str.find` (a match of one cannot overlap another's),
    faster than that expression (``docs/performance.md``)."""
    if not words:
        return []
    if not all(word.isidentifier() for word in words):
        return lines_matching(text, re.compile(
            r"(?<![\w])(?:" + "|".join(map(re.escape, words)) + r")(?![\w])"))
    text = _normalized(text)
    ascii_text = text.isascii()
    end = len(text)
    starts: list[int] = []
    for word in words:
        size = len(word)
        at = text.find(word)
        while at != -1:
            after = at + size
            if (at == 0 or not _is_word(text[at - 1], ascii_text)) and (
                    after == end or not _is_word(text[after], ascii_text)):
                starts.append(at)
            at = text.find(word, at + 1)
    starts.sort()
    return _line_numbers(text, starts)


_ASCII_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _is_word(char: str, ascii_text: bool) -> bool:
    r"""Whether ``char`` is what ``\w`` matches in a ``str`` pattern (a letter or number of
    any script, or ``_``); ``ascii_text``: ``char`` is ASCII."""
    return char in _ASCII_WORD if ascii_text else (char.isalnum() or char == "_")


def _normalized(text: str) -> str:
    """``text`` with identifiers NFKC-normalised as Python reads them (``ＬＬＭ`` is ``LLM``;
    the normalisation makes and removes no line break)."""
    if text.isascii():
        return text
    import unicodedata

    return unicodedata.normalize("NFKC", text)


def lines_matching(text: str, pattern: re.Pattern[str]) -> list[int]:
    """The numbers (1-based, ascending, as ``ast`` counts lines: ``\n``, ``\r\n``, ``\r``)
    of the lines of ``text`` where ``pattern`` starts a match (a match may run on over
    line breaks), identifiers NFKC-normalised as Python reads them (``ＬＬＭ`` is ``LLM``;
    the normalisation makes and removes no line break)."""
    text = _normalized(text)
    return _line_numbers(text, [match.start() for match in pattern.finditer(text)])


def _line_numbers(text: str, starts: list[int]) -> list[int]:
    """The distinct lines (1-based, ascending) of the offsets ``starts`` (ascending, none
    between a ``\r`` and a ``\n``) of ``text``."""
    crs = "\r" in text
    lines: list[int] = []
    line, position = 1, 0
    for start in starts:
        line += text.count("\n", position, start)
        if crs:
            line += text.count("\r", position, start) - text.count("\r\n", position, start)
        position = start
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def spans_a_line(stmt: ast.stmt, lines: list[int]) -> bool:
    """Whether ``stmt``'s lines (its decorators included) hold one of ``lines`` (ascending)."""
    first = first_line(stmt)
    at = bisect.bisect_left(lines, first)
    return at < len(lines) and lines[at] <= (stmt.end_lineno or first)


"""Source text in, ``ast`` tree out: decoding, parsing, and a deep stack for deep modules.

The bottom of the checker's layers (beside :mod:`lint_gpu_tests.config` and
:mod:`lint_gpu_tests.ftypes`): the engine, the conftest index and the fix loop all parse
through here, and nothing here imports them.
"""

from __future__ import annotations

import ast
import bisect
import re
import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from lint_gpu_tests.codes import PARSE_ERROR_CODE, PARSE_ERROR_NAME
from lint_gpu_tests.ftypes import Location, Violation

__all__ = [
    "DEEP_RECURSION_LIMIT",
    "DEEP_STACK_BYTES",
    "MAX_FIX_DEPTH",
    "MAX_FIX_STRING_PARTS",
    "PARSE_ERROR_CODE",
    "PARSE_ERROR_NAME",
    "TOO_DEEP_TO_ANALYSE",
    "InternalError",
    "SourceTooDeep",
    "call_with_deep_limit",
    "call_with_deep_stack",
    "TopLevel",
    "decode_source",
    "first_line",
    "parent_index",
    "parse_error",
    "parse_source",
    "physical_lines",
    "reversed_child_fields",
    "walk_breadth",
    "walk_nodes",
]


class InternalError(Exception):
    """A rule or codemod raised unexpectedly on one file; the message names which."""


class SourceTooDeep(InternalError):
    """The module parses but nests deeper than the analysis can recurse."""


TOO_DEEP_TO_ANALYSE = "source nests too deeply to analyse"

T = TypeVar("T")

DEEP_STACK_BYTES = 512 * 1024 * 1024
"""Stack of the worker thread that deep modules are analysed and fixed in (virtual memory,
committed only as far as it is used)."""
DEEP_RECURSION_LIMIT = 50_000
"""Python recursion limit while that thread runs. Measured on CPython 3.11: LibCST's
code generation and visitors fail with ``RecursionError`` at this limit, well inside
:data:`DEEP_STACK_BYTES` (no overflow on a 20,000-level ``elif`` chain)."""
MAX_FIX_DEPTH = 2_000
"""Deepest ``ast`` nesting for which a fix is offered, well below the depth ``--fix`` succeeds
at in the deep thread (``docs/performance.md``, "Figures the code relies on"); a deeper
module's fixable violations are reported as not fixable ("expression too deep")."""

MAX_FIX_STRING_PARTS = 3_000
"""Most parts of one implicit string concatenation (``"a" "b" ...``) for which a fix is
offered: LibCST's parser (1.x, native) rejects one more ("expected one of STRING"), with
plain, bytes and f-string parts alike (``docs/performance.md``). ``ast`` makes one node of
them, so :data:`MAX_FIX_DEPTH` does not see them."""

_DEEP_LOCK = threading.Lock()
DEEP_STATE = threading.local()


def call_with_deep_limit(function: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Call ``function(*args, **kwargs)`` in the calling thread under the recursion limit
    :func:`call_with_deep_stack`'s thread has (:data:`DEEP_RECURSION_LIMIT`), so that what
    recurses gives up at the same depth wherever it runs; for work whose nesting is known to
    be shallow (its C stack stays small). The limit is process-wide: it is raised only for
    the call, one such call (or :func:`call_with_deep_stack`) at a time, and restored
    afterwards. Called from inside either, ``function`` simply runs."""
    if getattr(DEEP_STATE, "active", False):
        return function(*args, **kwargs)
    with _DEEP_LOCK:
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
        DEEP_STATE.active = True  # a call_with_deep_stack inside runs here too
        try:
            return function(*args, **kwargs)
        finally:
            DEEP_STATE.active = False
            sys.setrecursionlimit(old_limit)


def call_with_deep_stack(function: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Call ``function(*args, **kwargs)`` in a thread with a large stack and a raised
    recursion limit, and return its result (or raise what it raised, ``BaseException`` s
    such as LibCST's ``PanicException`` included).

    Python's default limit (1000) ends LibCST and the ``ast`` analysis at a few hundred
    levels of nesting, which a prompt built from a few hundred ``"..." + "..."`` parts
    reaches. The limit is process-wide, so it is raised only while the thread runs (the
    caller waits in ``join``; one such call at a time). Called from inside that thread, or
    where the thread cannot be started, ``function`` simply runs in the calling thread.
    """
    if getattr(DEEP_STATE, "active", False):
        return function(*args, **kwargs)
    box: list[tuple[bool, object]] = []

    def target() -> None:
        DEEP_STATE.active = True
        try:
            box.append((True, function(*args, **kwargs)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, re-raised there
            box.append((False, exc))

    with _DEEP_LOCK:
        old_limit = sys.getrecursionlimit()
        try:
            old_size = threading.stack_size(DEEP_STACK_BYTES)
        except (ValueError, RuntimeError):  # pragma: no cover - platform without the knob
            return function(*args, **kwargs)
        thread = threading.Thread(target=target, name="gpu-test-lint-deep", daemon=True)
        sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
        try:
            try:
                thread.start()
            finally:
                threading.stack_size(old_size)
            thread.join()
        except RuntimeError:  # pragma: no cover - no memory for the thread
            sys.setrecursionlimit(old_limit)
            return function(*args, **kwargs)
        finally:
            sys.setrecursionlimit(old_limit)
    ok, value = box[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]


def decode_source(source: bytes) -> str:
    """Decode Python source bytes as the interpreter would (PEP 263 cookie, BOM, UTF-8).

    Raises:
        SyntaxError: when the declared encoding is unknown or the bytes do not decode.
    """
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        text = source.decode(encoding)
    except (LookupError, UnicodeDecodeError) as exc:
        raise SyntaxError(f"cannot decode source: {exc}") from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def char_col(lines: list[str], line: int, byte_col: int) -> int:
    """Convert ``ast``'s UTF-8 byte column to a 0-based character column."""
    if 1 <= line <= len(lines):
        return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))
    return byte_col


def parse_error(path: str, message: str, line: int, col: int) -> Violation:
    return Violation(
        code=PARSE_ERROR_CODE,
        name=PARSE_ERROR_NAME,
        message=f"SyntaxError: {message}",
        path=path,
        location=Location(line, col),
        end_location=Location(line, col),
        fix=None,
    )


def parse_source(source: bytes, path: str) -> tuple[ast.Module | None, str, Violation | None]:
    """Parse ``source``; return ``(tree, text, None)`` or ``(None, text, GPU900 violation)``.

    A file that cannot be decoded, has a syntax error, a NUL byte, or nests too deep for
    the parser is reported, never raised.
    """
    try:
        text = decode_source(source)
    except SyntaxError as exc:
        return None, "", parse_error(path, str(exc), 1, 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path, type_comments=False)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = (exc.offset or 1) if exc.offset and exc.offset > 0 else 1
        return None, text, parse_error(path, exc.msg, line, col)
    except RecursionError:
        if getattr(DEEP_STATE, "active", False):
            return None, text, parse_error(path, "source nests too deeply to parse", 1, 1)
        # Building the tree recurses; a deeper stack may be all it takes.
        return call_with_deep_stack(parse_source, source, path)
    except (ValueError, MemoryError) as exc:
        # CPython reports a parser stack overflow as a bare MemoryError.
        msg = str(exc) if isinstance(exc, ValueError) else "source nests too deeply to parse"
        return None, text, parse_error(path, msg, 1, 1)
    return tree, text, None


#: Fields that never hold a node, whatever the node (identifiers, numbers, flags, comments).
_SCALAR_FIELDS = frozenset({"name", "id", "attr", "arg", "module", "asname", "rest", "level",
                            "is_async", "conversion", "type_comment", "kind"})
#: Nodes whose ``value`` is a Python object, not a node.
_CONSTANT_VALUES = (ast.Constant, ast.MatchSingleton)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type[ast.AST]) -> tuple[str, ...]:
    """The fields of the node class ``cls`` that may hold nodes (``_fields`` without the
    identifiers, numbers and flags of Python's grammar, ``Parser/Python.asdl``): walkers read
    only these."""
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        skip = _SCALAR_FIELDS | ({"value"} if issubclass(cls, _CONSTANT_VALUES) else set())
        fields = _CHILD_FIELDS[cls] = tuple(f for f in cls._fields if f not in skip)
    return fields


def reversed_child_fields(cls: type[ast.AST]) -> tuple[str, ...]:
    """:func:`child_fields` of ``cls``, last first (for walkers that push onto a stack)."""
    fields = _REVERSED_CHILD_FIELDS.get(cls)
    if fields is None:
        fields = _REVERSED_CHILD_FIELDS[cls] = tuple(reversed(child_fields(cls)))
    return fields


_REVERSED_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def parent_index(tree: ast.AST) -> dict[int, ast.AST]:
    """``id(node) -> its parent`` for every node below ``tree``, built in one pass that reads
    each node's fields directly (``ast.walk`` with ``ast.iter_child_nodes`` walks every node
    twice through two generators; ``docs/performance.md`` compares the two)."""
    parents: dict[int, ast.AST] = {}
    stack: list[ast.AST] = [tree]
    pop, push, node_type = stack.pop, stack.append, ast.AST
    fields_of = _REVERSED_CHILD_FIELDS.get
    while stack:
        node = pop()
        cls = node.__class__
        for name in fields_of(cls) or reversed_child_fields(cls):
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, node_type):
                        parents[id(item)] = node
                        push(item)
            elif isinstance(value, node_type):
                parents[id(value)] = node
                push(value)
    return parents


def walk_nodes(roots: Sequence[ast.AST], stop: tuple[type[ast.AST], ...] = (), *,
               breadth_first: bool = False) -> list[ast.AST]:
    """Every node of ``roots`` and below, not descending into nodes of the ``stop`` types
    (which are included themselves); the package's one ``ast`` walker.

    Depth first by default: each node before its children, children left to right (the
    order of a recursive walk). With ``breadth_first``, level by level, children in field
    order: for one root and no ``stop``, exactly ``list(ast.walk(root))``. The children are
    pushed straight onto a deque, last first for a depth-first walk (no list of them built
    per node, no generator per node)."""
    pending: deque[ast.AST] = deque(roots)
    out: list[ast.AST] = []
    append, push, node_type = out.append, pending.append, ast.AST
    items: Callable[[list[ast.AST]], Iterator[ast.AST]]
    if breadth_first:
        take, fields_of, fields_for, items = (
            pending.popleft, _CHILD_FIELDS.get, child_fields, iter)
    else:
        pending.reverse()
        take, fields_of, fields_for, items = (
            pending.pop, _REVERSED_CHILD_FIELDS.get, reversed_child_fields, reversed)
    while pending:
        node = take()
        append(node)
        if stop and isinstance(node, stop):
            continue
        cls = node.__class__
        for name in fields_of(cls) or fields_for(cls):
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in items(value):
                    if isinstance(item, node_type):
                        push(item)
            elif isinstance(value, node_type):
                push(value)
    return out


def walk_breadth(node: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(node))``: :func:`walk_nodes` of ``node`` breadth first, for callers
    that read the whole walk in :func:`ast.walk`'s order or test each node with a pure
    predicate."""
    return walk_nodes((node,), breadth_first=True)


_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def physical_lines(text: str) -> list[str]:
    """``text`` split into lines as the tokenizer counts them (``\n``, ``\r\n``, ``\r``;
    unlike :meth:`str.splitlines`, a form feed does not end a line), endings kept."""
    return _LINE_RE.findall(text)


def first_line(stmt: ast.stmt) -> int:
    """The first line of ``stmt``, its decorators included."""
    decorators: list[ast.expr] = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno, *(d.lineno for d in decorators)])


class TopLevel:
    """The statements of a module's body, found by line (for work done one top-level
    statement at a time: a parent index, scope resolution).

    Args:
        body: the module's statements, in source order.
    """

    def __init__(self, body: list[ast.stmt]) -> None:
        self.body = body
        self._starts = [first_line(s) for s in body]

    def at(self, line: int) -> list[ast.stmt]:
        """The statements whose lines (decorators included) hold ``line``: none outside
        every statement, several when statements share it (``a = 1; b = 2``)."""
        out: list[ast.stmt] = []
        index = bisect.bisect_right(self._starts, line) - 1
        while index >= 0 and (self.body[index].end_lineno or self.body[index].lineno) >= line:
            out.append(self.body[index])
            index -= 1
        return out

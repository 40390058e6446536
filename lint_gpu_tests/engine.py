"""The checker engine: one file's source in, violations (and fixed source) out.

This module is the single place where rules run, ``# noqa`` is honoured and
selection is applied; the CLI (through :mod:`lint_gpu_tests.api`) and the flake8
plugin both call :func:`check_source`. LibCST is imported only by :func:`fix_source`,
and only when a file has something to fix.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import Applicability, FixInfo, Location, Violation

PARSE_ERROR_CODE = "GPU900"
PARSE_ERROR_NAME = "syntax-error"
INTERNAL_ERROR_CODE = "GPU999"

NOQA_RE = re.compile(r"#[ \t]*noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
"""An inline ``# noqa`` as flake8 spells it (``flake8.defaults.NOQA_INLINE_REGEXP``); ``#noqa``
without the space is accepted too, as ruff does."""
FILE_NOQA_RE = re.compile(
    r"\s*(?:(?P<flake8># flake8[:=]\s*noqa)"
    r"|#\s*gpu-test-lint:\s*noqa(?::\s?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?)", re.IGNORECASE)
"""A file-level directive at the start of a line: flake8's ``# flake8: noqa``
(``flake8.defaults.NOQA_FILE``: the whole file, whatever follows) or ``# gpu-test-lint: noqa``
(every code, or with ``: GPU004`` only the codes named, as ruff's ``# ruff: noqa: F401``)."""


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
"""Deepest ``ast`` nesting for which a fix is offered. ``--fix`` was measured to succeed on a
7,000-part ``"..." + "..."`` concatenation (about 7,000 levels) in the deep thread; a deeper
module's fixable violations are reported as not fixable ("expression too deep")."""

_DEEP_LOCK = threading.Lock()
_DEEP_STATE = threading.local()


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
    if getattr(_DEEP_STATE, "active", False):
        return function(*args, **kwargs)
    box: list[tuple[bool, object]] = []

    def target() -> None:
        _DEEP_STATE.active = True
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


def max_depth(tree: ast.AST) -> tuple[int, int]:
    """Return ``(depth, line)``: the deepest nesting of ``tree`` (the module is depth 1) and
    the line of a node at that depth (of its nearest ancestor with a line). Iterative, level
    by level, so it works at any depth."""
    iter_children = ast.iter_child_nodes
    level: list[ast.AST] = [tree]
    depth, line = 0, 1
    while level:
        depth += 1
        line = getattr(level[0], "lineno", line)
        below: list[ast.AST] = []
        for node in level:
            below.extend(iter_children(node))
        if not below:
            return depth, line
        level = below
    return depth, line


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


@dataclass(frozen=True)
class Noqa:
    """The ``# noqa`` directives of one module: what the CLI and the flake8 plugin both obey.

    Semantics are flake8's (``FileProcessor._noqa_line_mapping`` and
    ``Violation.is_inline_ignored``), so that whatever flake8 suppresses the CLI suppresses
    too: a bare ``# noqa`` suppresses every code on its line, ``# noqa: GPU001,GPU004`` the
    codes named, each taken as a prefix (``# noqa: GPU00`` covers GPU001..GPU009); the
    directive is looked for in the whole run of lines that tokenises as one (a multi-line
    string, a backslash continuation), so ``# noqa`` after the closing quotes of a multi-line
    string covers the string's first line too; like flake8, the raw text is searched (a
    ``"# noqa"`` inside a string counts). Beyond flake8, as ruff does: codes match regardless of
    case and ``#noqa`` needs no space. File level: ``# flake8: noqa`` (flake8 then skips the
    file) and ``# gpu-test-lint: noqa[: CODES]`` on a line of their own.

    Attributes:
        lines: 1-based line -> codes named (``None``: every code).
        file_codes: codes a file-level ``# gpu-test-lint: noqa: CODES`` suppresses.
        whole_file: a file-level ``# flake8: noqa`` or bare ``# gpu-test-lint: noqa``.
    """

    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)
    file_codes: frozenset[str] = frozenset()
    whole_file: bool = False

    def suppresses(self, line: int, code: str) -> bool:
        """Whether a violation of ``code`` reported on ``line`` is suppressed."""
        code = code.upper()
        if self.whole_file or code.startswith(tuple(self.file_codes)):
            return True
        if line not in self.lines:
            return False
        codes = self.lines[line]
        return codes is None or code.startswith(tuple(codes))


def _noqa_codes(codes: str | None) -> frozenset[str] | None:
    if codes is None:
        return None
    return frozenset(c for c in re.split(r"[,\s]+", codes.upper()) if c)


def _logical_ranges(text: str) -> list[tuple[int, int]]:
    """The runs of physical lines flake8 searches for ``# noqa`` as one: lines between two
    ``NL``/``NEWLINE`` tokens (a multi-line string or a backslash continuation joins lines;
    a bracket does not, its line breaks are ``NL`` tokens). Empty when tokenising fails."""
    import io
    import tokenize

    ranges: list[tuple[int, int]] = []
    start, end = 0, 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            start = start or tok.start[0]
            end = max(end, tok.end[0])
            if tok.type in (tokenize.NL, tokenize.NEWLINE):
                ranges.append((start, end))
                start, end = 0, 0
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return ranges


_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def physical_lines(text: str) -> list[str]:
    """``text`` split into lines as the tokenizer counts them (``\n``, ``\r\n``, ``\r``;
    unlike :meth:`str.splitlines`, a form feed does not end a line), endings kept."""
    return _LINE_RE.findall(text)


def parse_noqa(text: str) -> Noqa:
    """Read every ``# noqa`` directive of ``text`` (see :class:`Noqa`)."""
    physical = physical_lines(text)
    lines: dict[int, frozenset[str] | None] = {}
    file_codes: set[str] = set()
    whole_file = False
    for line in physical:
        if "noqa" not in line.lower():
            continue
        whole = FILE_NOQA_RE.match(line)
        if whole is not None:
            codes = _noqa_codes(whole.group("codes"))
            if whole.group("flake8") or codes is None:
                whole_file = True
            else:
                file_codes.update(codes)
    for start, end in _logical_ranges(text):
        joined = "".join(physical[start - 1:end])
        if "noqa" not in joined.lower():
            continue
        match = NOQA_RE.search(joined)
        if match is not None:
            lines.update(dict.fromkeys(range(start, end + 1), _noqa_codes(match.group("codes"))))
    return Noqa(lines, frozenset(file_codes), whole_file)


def _noqa_target_lines(text: str) -> dict[int, int]:
    """Line -> the line whose end a ``# noqa`` for it goes to: the last line of its run of
    lines (after a multi-line string's closing quotes, after a continuation)."""
    target: dict[int, int] = {}
    for start, end in _logical_ranges(text):
        target.update(dict.fromkeys(range(start, end + 1), end))
    return target


def add_noqa(source: bytes, violations: Iterable[Violation]) -> tuple[bytes | None, int]:
    """Add ``# noqa: CODES`` so that each of ``violations`` is suppressed (``--add-noqa``).

    A new directive goes at the end of the violation's run of lines (see :class:`Noqa`),
    after any comment there; an existing ``# noqa: CODES`` gets the missing codes, sorted.
    Encoding, BOM and each line's ending are kept. ``GPU900`` cannot be suppressed.

    Returns:
        ``(new bytes, number of lines given or extended a directive)``, or ``(None, 0)``
        when nothing changes.

    Raises:
        SyntaxError: when ``source`` cannot be decoded.
    """
    import io
    import tokenize

    text = decode_source(source)
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    lines = physical_lines(text)
    target = _noqa_target_lines(text)
    wanted: dict[int, set[str]] = {}
    for v in violations:
        if v.code != PARSE_ERROR_CODE:
            wanted.setdefault(target.get(v.location.row, v.location.row), set()).add(v.code)
    changed = 0
    for row, codes in sorted(wanted.items()):
        if not 1 <= row <= len(lines):
            continue
        line = lines[row - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        match = NOQA_RE.search(body)
        if match is None:
            body = f"{body}  # noqa: {', '.join(sorted(codes))}"
        elif match.group("codes") is not None:
            have = _noqa_codes(match.group("codes")) or frozenset()
            if codes <= have:
                continue
            tail = " " if match.group(0)[-1:].isspace() else ""
            body = (body[:match.start()] + f"# noqa: {', '.join(sorted(have | codes))}{tail}"
                    + body[match.end():])
        else:
            continue  # a bare # noqa already suppresses everything
        lines[row - 1] = body + ending
        changed += 1
    if not changed:
        return None, 0
    return "".join(lines).encode(encoding), changed


def in_scope(source: bytes, path: str, config: Config) -> bool | None:
    """Whether the rules look at the module at ``path`` (a test module by name, under a
    ``test-roots`` directory, or defining pytest tests or fixtures); ``None`` when it does
    not parse. For ``--show-files``."""
    from lint_gpu_tests.analysis import ModuleAnalysis

    tree, text, error = parse_source(source, path)
    if tree is None or error is not None:
        return None
    return call_with_deep_stack(ModuleAnalysis.build, tree, text, path, config).in_scope


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    """Convert ``ast``'s UTF-8 byte column to a 0-based character column."""
    if 1 <= line <= len(lines):
        return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))
    return byte_col


@dataclass
class CheckResult:
    """Violations of one file plus the parsed tree (reused by fixing)."""

    violations: list[Violation] = field(default_factory=list)
    tree: ast.Module | None = None
    text: str = ""


def _parse_error(path: str, message: str, line: int, col: int) -> Violation:
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
        return None, "", _parse_error(path, str(exc), 1, 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path, type_comments=False)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = (exc.offset or 1) if exc.offset and exc.offset > 0 else 1
        return None, text, _parse_error(path, exc.msg, line, col)
    except RecursionError:
        if getattr(_DEEP_STATE, "active", False):
            return None, text, _parse_error(path, "source nests too deeply to parse", 1, 1)
        # Building the tree recurses; a deeper stack may be all it takes.
        return call_with_deep_stack(parse_source, source, path)
    except (ValueError, MemoryError) as exc:
        # CPython reports a parser stack overflow as a bare MemoryError.
        msg = str(exc) if isinstance(exc, ValueError) else "source nests too deeply to parse"
        return None, text, _parse_error(path, msg, 1, 1)
    return tree, text, None


def check_tree(
    tree: ast.Module, text: str, path: str, config: Config, *, apply_noqa: bool = True
) -> list[Violation]:
    """Run every enabled rule over a parsed module and return sorted violations.

    Args:
        tree: the module parsed by :func:`ast.parse` from ``text``.
        text: the decoded source (for noqa comments and character columns).
        path: the path used in violations and for test-module detection.
        config: settings (selection, engine classes, runner names...).
        apply_noqa: drop violations suppressed by ``# noqa`` (:func:`parse_noqa`).

    A module nesting deeper than the default recursion limit allows is analysed again in
    :func:`call_with_deep_stack`; fixes in a module deeper than :data:`MAX_FIX_DEPTH` are
    reported as not available ("expression too deep").

    Raises:
        SourceTooDeep: when even the deep thread cannot walk the module.
        InternalError: when a rule raises; the message names the rule and the error.
    """
    try:
        return _check_tree(tree, text, path, config, apply_noqa)
    except SourceTooDeep:
        if getattr(_DEEP_STATE, "active", False):
            raise
    return call_with_deep_stack(_check_tree, tree, text, path, config, apply_noqa)


def _check_tree(tree: ast.Module, text: str, path: str, config: Config, apply_noqa: bool
                ) -> list[Violation]:
    from lint_gpu_tests.analysis import ModuleAnalysis
    from lint_gpu_tests.conftest_index import conftest_engine_fixtures
    from lint_gpu_tests.rules import ALL_RULES

    codes = [rule for rule in ALL_RULES if config.is_code_enabled(rule.code)]
    ignored = per_file_ignored_codes(path, config)
    codes = [rule for rule in codes if not any(rule.code.startswith(p) for p in ignored)]
    if not codes:
        return []
    try:
        module = ModuleAnalysis.build(tree, text, path, config,
                                      conftest_engine_fixtures(path, config))
    except RecursionError as exc:
        raise SourceTooDeep(TOO_DEEP_TO_ANALYSE) from exc
    if not module.in_scope:
        return []
    lines: list[str] | None = None
    noqa: Noqa | None = None
    out: list[Violation] = []
    depends: dict[int, tuple[str, int]] = {}
    for rule_cls in codes:
        rule = rule_cls()
        try:
            hits = list(rule.check(module))
        except RecursionError as exc:
            raise SourceTooDeep(f"{rule.code} ({rule.name}): {TOO_DEEP_TO_ANALYSE}") from exc
        except Exception as exc:  # noqa: BLE001 - reported per file, run goes on
            raise InternalError(f"{rule.code} ({rule.name}): {type(exc).__name__}: {exc}") from exc
        if hits and lines is None:
            lines = text.splitlines()
            wants_noqa = apply_noqa and "noqa" in text.lower()
            noqa = parse_noqa(text) if wants_noqa else Noqa()
        for hit in hits:
            assert lines is not None and noqa is not None
            if noqa.suppresses(hit.node_line, rule.code):
                continue
            if hit.depends_on is not None and hit.fix is not None:
                depends[len(out)] = hit.depends_on
            out.append(
                Violation(
                    code=rule.code,
                    name=rule.name,
                    message=hit.message,
                    path=path,
                    location=Location(hit.node_line, _char_col(lines, hit.node_line,
                                                               hit.node_col) + 1),
                    end_location=Location(hit.end_line, _char_col(lines, hit.end_line,
                                                                  hit.end_col) + 1),
                    fix=hit.fix,
                )
            )
    if depends:
        out = _drop_orphan_fixes(out, depends)
    if any(v.fixable for v in out):
        out = _drop_too_deep_fixes(tree, text, out)
    return sorted(set(out), key=Violation.sort_key)


def _drop_too_deep_fixes(tree: ast.Module, text: str, out: list[Violation]
                         ) -> list[Violation]:
    """LibCST must parse, visit and print the whole module to fix any part of it: in a
    module nested deeper than :data:`MAX_FIX_DEPTH`, report the fixes as unavailable
    (``check`` must not advertise ``[*]`` for a fix ``--fix`` cannot make)."""
    if len(text) < MAX_FIX_DEPTH:  # every level of nesting takes a character of source
        return out
    depth, line = max_depth(tree)
    if depth <= MAX_FIX_DEPTH:
        return out
    reason = (f"expression too deep (line {line} nests {depth} levels; the fixer rewrites "
              f"at most {MAX_FIX_DEPTH})")
    return [dataclasses.replace(v, fix=FixInfo(Applicability.NONE, v.fix.title, reason))
            if v.fix is not None and v.fixable else v for v in out]


def _drop_orphan_fixes(out: list[Violation], depends: dict[int, tuple[str, int]]
                       ) -> list[Violation]:
    """A fix that rides on another violation's rewrite (GPU003/GPU004 removed by GPU001's)
    cannot be applied when that violation is not reported (``# noqa``, not selected):
    report it without a fix, saying why, rather than promise a fix that never comes."""
    reported = {(v.code, v.location.row) for v in out}
    for index, (code, row) in depends.items():
        violation = out[index]
        if (code, row) in reported or violation.fix is None:
            continue
        out[index] = dataclasses.replace(violation, fix=FixInfo(
            Applicability.NONE, violation.fix.title,
            f"it is fixed by the {code} rewrite of line {row}, which is suppressed or not "
            "selected"))
    return out


def per_file_ignored_codes(path: str, config: Config) -> tuple[str, ...]:
    """Return the code prefixes that ``per-file-ignores`` switches off for ``path``."""
    if not config.per_file_ignores:
        return ()
    import os

    import pathspec

    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(config.root))
    except ValueError:
        rel = path
    rel = rel.replace(os.sep, "/")
    ignored: list[str] = []
    for pattern, codes in config.per_file_ignores:
        spec = pathspec.GitIgnoreSpec.from_lines([pattern])
        if spec.match_file(rel) or spec.match_file(os.path.basename(path)):
            ignored.extend(codes)
    return tuple(ignored)


def check_source(source: bytes, path: str, config: Config) -> list[Violation]:
    """Check one file's bytes and return its violations, sorted by position.

    Args:
        source: the file's raw bytes (any PEP 263 encoding, BOM allowed).
        path: the path as the user gave it; used in violations and for scope.
        config: the run's settings.

    Returns:
        Violations after selection and ``# noqa``. A file that does not parse yields a single
        ``GPU900`` violation with the parser's line and message (never an exception); so
        does one that parses but nests too deeply for the analysis to walk.

    Raises:
        InternalError: when a rule fails unexpectedly on this file.
    """
    tree, text, error = parse_source(source, path)
    if error is None:
        assert tree is not None
        try:
            return check_tree(tree, text, path, config)
        except SourceTooDeep:
            error = _parse_error(path, TOO_DEEP_TO_ANALYSE, 1, 1)
    return [error] if config.is_code_enabled(PARSE_ERROR_CODE) else []


@dataclass
class FixOutcome:
    """Result of fixing one file.

    Attributes:
        new_source: fixed bytes, or ``None`` when nothing changed.
        fixed: violations the fix removed.
        remaining: violations left in the (fixed) file.
        error: an internal-error message when a fix pass was thrown away.
        exception: the exception that made a codemod fail, for ``--verbose``.
    """

    new_source: bytes | None
    fixed: list[Violation]
    remaining: list[Violation]
    error: str | None = None
    exception: BaseException | None = None


MAX_FIX_PASSES = 10


def wanted_fixes(violations: Iterable[Violation], unsafe: bool) -> list[Violation]:
    """Return the violations whose fix may be applied (safe, or unsafe when allowed)."""
    allowed = {Applicability.SAFE} | ({Applicability.UNSAFE} if unsafe else set())
    return [v for v in violations if v.fix is not None and v.fix.applicability in allowed]


def _fixed_violations(original: list[Violation], remaining: list[Violation]) -> list[Violation]:
    """The original violations that fixing removed. Positions move when code is rewritten,
    so violations are matched by code and message, counting repeats (three identical GPU001
    messages with one left means two fixed)."""
    from collections import Counter

    left = Counter((v.code, v.message) for v in remaining)
    fixed: list[Violation] = []
    for v in original:
        key = (v.code, v.message)
        if left[key] > 0:
            left[key] -= 1
        else:
            fixed.append(v)
    return fixed


def fix_source(source: bytes, path: str, config: Config, *, unsafe: bool = False,
               violations: list[Violation] | None = None) -> FixOutcome:
    """Check ``source`` and apply fixes until nothing changes (at most 10 passes).

    Each pass runs the codemods on the current text; a pass whose output does not parse,
    or that raises (LibCST's ``PanicException``, a ``BaseException``, included), is thrown
    away (the file is left as the last good pass had it) and reported in ``error``. When
    the tenth pass still leaves something to fix, the fixes do not converge: nothing is
    kept, ``error`` says ``failed to converge after 10 passes`` (as ruff does). The work
    runs in :func:`call_with_deep_stack`, so deeply nested modules (long string
    concatenations) can be rewritten. LibCST is imported only when there is something to fix.

    Args:
        source: the file's raw bytes.
        path: path used for reports and scope.
        config: the run's settings.
        unsafe: apply unsafe fixes too (``--unsafe-fixes``).
        violations: ``check_source(source, path, config)`` when the caller has it already
            (saves checking the same bytes again).

    Returns:
        A :class:`FixOutcome`; ``new_source`` keeps the original encoding, BOM and
        line endings.

    Raises:
        InternalError: when a rule fails unexpectedly.
    """
    original = violations if violations is not None else check_source(source, path, config)
    if not wanted_fixes(original, unsafe):
        return FixOutcome(None, [], original)
    return call_with_deep_stack(_fix_loop, source, path, config, unsafe, original)


def _failure_detail(exc: BaseException) -> str:
    """One line saying why a fix pass failed. LibCST's ``ParserSyntaxError`` on a file that
    ``ast`` parsed is LibCST's limitation, not the user's syntax error: say so, without its
    multi-line excerpt."""
    if isinstance(exc, InternalError):
        return str(exc)
    if type(exc).__name__ == "ParserSyntaxError":
        return (f"LibCST cannot parse this file ({getattr(exc, 'message', exc)} at line "
                f"{getattr(exc, 'raw_line', '?')}, column {getattr(exc, 'raw_column', '?')})")
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _fix_loop(source: bytes, path: str, config: Config, unsafe: bool,
              original: list[Violation]) -> FixOutcome:
    from lint_gpu_tests.codemods.driver import apply_fixes  # imports libcst

    current = source
    current_violations = original
    error: str | None = None
    failure: BaseException | None = None
    for _ in range(MAX_FIX_PASSES):
        todo = wanted_fixes(current_violations, unsafe)
        if not todo:
            break
        try:
            candidate = apply_fixes(current, path, config, todo)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - a failed pass is reported, file kept
            error = f"fix failed: {_failure_detail(exc)}; pass discarded"
            failure = exc
            break
        if candidate is None or candidate == current:
            break
        _, _, parse_error = parse_source(candidate, path)
        if parse_error is not None:
            error = f"fix produced invalid code ({parse_error.message}); pass discarded"
            break
        current = candidate
        current_violations = check_source(current, path, config)
    else:
        if wanted_fixes(current_violations, unsafe):
            return FixOutcome(None, [], original,
                              f"failed to converge after {MAX_FIX_PASSES} passes; "
                              "file left unchanged")
    remaining = current_violations
    fixed = _fixed_violations(original, remaining) if current != source else []
    return FixOutcome(current if current != source else None, fixed, remaining, error, failure)

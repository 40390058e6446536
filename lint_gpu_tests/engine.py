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
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import Applicability, FixInfo, Location, Violation

PARSE_ERROR_CODE = "GPU900"
PARSE_ERROR_NAME = "syntax-error"
INTERNAL_ERROR_CODE = "GPU999"

NOQA_RE = re.compile(
    r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)


class InternalError(Exception):
    """A rule or codemod raised unexpectedly on one file; the message names which."""


class SourceTooDeep(InternalError):
    """The module parses but nests deeper than the analysis can recurse."""


TOO_DEEP_TO_ANALYSE = "source nests too deeply to analyse"


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


def noqa_map(text: str) -> dict[int, frozenset[str] | None]:
    """Map 1-based line numbers to the codes their ``# noqa`` comment names.

    ``None`` means a bare ``# noqa`` (every code). Only real comments count: the
    tokenizer is used, so ``"# noqa"`` inside a string is not a suppression.
    """
    import io
    import tokenize

    found: dict[int, frozenset[str] | None] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            match = NOQA_RE.search(tok.string)
            if not match:
                continue
            codes = match.group("codes")
            found[tok.start[0]] = (
                None if codes is None else frozenset(re.split(r"[,\s]+", codes.upper().strip()))
            )
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return found


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
    except (ValueError, RecursionError, MemoryError) as exc:
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
        apply_noqa: drop violations suppressed by ``# noqa`` (flake8 does this itself).

    Raises:
        InternalError: when a rule raises; the message names the rule and the error.
    """
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
    noqa: dict[int, frozenset[str] | None] | None = None
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
            noqa = noqa_map(text) if wants_noqa else {}
        for hit in hits:
            assert lines is not None and noqa is not None
            suppressed = noqa.get(hit.node_line, False)
            if suppressed is None or (suppressed and rule.code in suppressed):
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
    return sorted(set(out), key=Violation.sort_key)


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
        spec = pathspec.PathSpec.from_lines("gitwildmatch", [pattern])
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

    Each pass runs the codemods on the current text; a pass whose output does not parse
    is thrown away (the file is left as the last good pass had it) and reported in
    ``error``. LibCST is imported only when there is something to fix.

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
        except Exception as exc:  # noqa: BLE001 - a failed pass is reported, file kept
            detail = str(exc) if isinstance(exc, InternalError) else \
                f"{type(exc).__name__}: {exc}"
            error = f"fix failed: {detail}; pass discarded"
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
    remaining = current_violations
    fixed = _fixed_violations(original, remaining) if current != source else []
    return FixOutcome(current if current != source else None, fixed, remaining, error, failure)

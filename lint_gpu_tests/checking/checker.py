"""The checker: one file's source in, violations out.

This module is the single place where rules run, ``# noqa`` is honoured and
selection is applied; the CLI (through :mod:`lint_gpu_tests.api`) and the flake8
plugin both call :func:`check_source`. Fixing is one layer up, in
:mod:`lint_gpu_tests.fixing.fixloop`; this module never imports LibCST.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lint_gpu_tests.codes import INTERNAL_ERROR_CODE, PARSE_ERROR_CODE, PARSE_ERROR_NAME
from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import Applicability, FixInfo, Location, Violation, wanted_fixes
from lint_gpu_tests.parsing.noqa import (
    NOQA_RE,
    Noqa,
    logical_ranges,
    noqa_codes,
    parse_noqa,
)
from lint_gpu_tests.parsing.source import (
    DEEP_STATE,
    MAX_FIX_DEPTH,
    MAX_FIX_STRING_PARTS,
    TOO_DEEP_TO_ANALYSE,
    InternalError,
    SourceTooDeep,
    call_with_deep_stack,
    char_col,
    child_fields,
    decode_source,
    parse_source,
    physical_lines,
)
from lint_gpu_tests.parsing.source import parse_error as _parse_error

if TYPE_CHECKING:
    from lint_gpu_tests.analysis.analysis import ModuleAnalysis
    from lint_gpu_tests.checking.conftest_index import ConftestIndex

# Names of the layer below, re-exported: the engine is where front ends and tests meet.
__all__ = [
    "INTERNAL_ERROR_CODE",
    "PARSE_ERROR_CODE",
    "PARSE_ERROR_NAME",
    "CheckResult",
    "InternalError",
    "Noqa",
    "SourceTooDeep",
    "add_noqa",
    "call_with_deep_stack",
    "check_module",
    "check_source",
    "check_tree",
    "decode_source",
    "in_scope",
    "nests_deeper_than",
    "parse_noqa",
    "parse_source",
    "physical_lines",
    "wanted_fixes",
]

def _nesting(tree: ast.AST, shortest: int) -> tuple[int, int, list[ast.expr]]:
    """``(depth, line, strings)``: the deepest nesting of ``tree`` (the module is depth 1),
    the line of a node at that depth (of its nearest ancestor with a line), and the string
    nodes (``str`` or ``bytes`` constants, f-strings) of ``tree`` that span several lines or
    at least ``shortest`` columns (0: none are collected). Iterative, level by level, so it
    works at any depth."""
    level: list[ast.AST] = [tree]
    depth, line = 0, 1
    strings: list[ast.expr] = []
    in_fstring: set[int] = set()  # nodes inside an f-string (its parts are not collected)
    node_type = ast.AST
    if not shortest:
        return (*_depth(tree), strings)
    while level:
        depth += 1
        line = getattr(level[0], "lineno", line)
        below: list[ast.AST] = []
        for node in level:  # the fields that hold nodes, read directly (as parent_index)
            cls = node.__class__
            start = len(below)
            for name in child_fields(cls):
                value = getattr(node, name, None)
                if isinstance(value, node_type):
                    below.append(value)
                elif value.__class__ is list:
                    below.extend(item for item in value if isinstance(item, node_type))
            if not shortest:
                continue
            if id(node) in in_fstring:
                in_fstring.update(id(child) for child in below[start:])
            elif cls is ast.JoinedStr or (
                    cls is ast.Constant and isinstance(node.value, (str, bytes))):  # type: ignore[attr-defined]
                assert isinstance(node, ast.expr)
                if node.end_lineno != node.lineno or \
                        (node.end_col_offset or 0) - node.col_offset >= shortest:
                    strings.append(node)
                in_fstring.update(id(child) for child in below[start:])
        if not below:
            return depth, line, strings
        level = below
    return depth, line, strings


def nests_deeper_than(tree: ast.AST, levels: int) -> bool:
    """True when ``tree`` nests more than ``levels`` levels (the module is level 1, as
    :func:`_nesting` counts); the walk stops at that level."""
    return _depth(tree, levels + 1)[0] > levels


def _depth(tree: ast.AST, stop: int = 0) -> tuple[int, int]:
    """The ``(depth, line)`` of :func:`_nesting` without its strings: the same levels, in
    the same order, without the strings' bookkeeping per node; with ``stop``, no deeper
    than that level."""
    level: list[ast.AST] = [tree]
    depth, line = 0, 1
    node_type = ast.AST
    while True:
        depth += 1
        line = getattr(level[0], "lineno", line)
        below: list[ast.AST] = []
        push = below.append
        for node in level:
            for name in child_fields(node.__class__):
                value = getattr(node, name, None)
                if value.__class__ is list:
                    for item in value:
                        if isinstance(item, node_type):
                            push(item)
                elif isinstance(value, node_type):
                    push(value)
        if not below or depth == stop:
            return depth, line
        level = below


def _noqa_target_lines(text: str) -> dict[int, int]:
    """Line -> the line whose end a ``# noqa`` for it goes to: the last line of its run of
    lines (after a multi-line string's closing quotes, after a continuation)."""
    target: dict[int, int] = {}
    for start, end in logical_ranges(text):
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
            have = noqa_codes(match.group("codes")) or frozenset()
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
    from lint_gpu_tests.analysis.analysis import ModuleAnalysis

    tree, text, error = parse_source(source, path)
    if tree is None or error is not None:
        return None
    return call_with_deep_stack(ModuleAnalysis.build, tree, text, path, config).in_scope


@dataclass
class CheckResult:
    """One file's violations and the analysis they were found on.

    Attributes:
        violations: as :func:`check_source` returns them; their fixes carry the plans
            made on ``module`` (:attr:`lint_gpu_tests.ftypes.FixInfo.plan`).
        module: the analysis of the file's text, which a fix of these violations applies
            its plans to; ``None`` when no rule looked at the file (it does not parse, is
            not a test module, or no rule is enabled).
    """

    violations: list[Violation] = field(default_factory=list)
    module: ModuleAnalysis | None = None


def check_tree(
    tree: ast.Module, text: str, path: str, config: Config, *, apply_noqa: bool = True,
    module: ModuleAnalysis | None = None, conftests: ConftestIndex | None = None,
) -> list[Violation]:
    """Run every enabled rule over a parsed module and return sorted violations.

    Args:
        tree: the module parsed by :func:`ast.parse` from ``text``.
        text: the decoded source (for noqa comments and character columns).
        path: the path used in violations and for test-module detection.
        config: settings (selection, engine classes, runner names...).
        apply_noqa: drop violations suppressed by ``# noqa`` (:func:`parse_noqa`).
        module: the analysis of ``tree`` for ``path`` under ``config``, when one is at hand
            (a conftest's, from
            :meth:`lint_gpu_tests.checking.conftest_index.ConftestIndex.analysed`).
        conftests: the run's conftest index, which knows the engine fixtures of the
            conftests pytest loads for ``path`` (``None``: one for this check alone).

    A module nesting deeper than the default recursion limit allows is analysed again in
    :func:`call_with_deep_stack`; fixes in a module deeper than :data:`MAX_FIX_DEPTH` are
    reported as not available ("expression too deep").

    Raises:
        SourceTooDeep: when even the deep thread cannot walk the module.
        InternalError: when a rule raises; the message names the rule and the error.
    """
    return _checked_tree(tree, text, path, config, apply_noqa, module, conftests).violations


def _checked_tree(tree: ast.Module, text: str, path: str, config: Config, apply_noqa: bool,
                  module: ModuleAnalysis | None, conftests: ConftestIndex | None
                  ) -> CheckResult:
    """:func:`check_tree`, with the analysis the violations were found on."""
    try:
        return _check_tree(tree, text, path, config, apply_noqa, module, conftests)
    except SourceTooDeep:
        if getattr(DEEP_STATE, "active", False):
            raise
    return call_with_deep_stack(_check_tree, tree, text, path, config, apply_noqa, None,
                                conftests)


def _check_tree(tree: ast.Module, text: str, path: str, config: Config, apply_noqa: bool,
                module: ModuleAnalysis | None = None,
                conftests: ConftestIndex | None = None) -> CheckResult:
    from lint_gpu_tests.analysis.analysis import ModuleAnalysis
    from lint_gpu_tests.checking.conftest_index import conftest_engine_fixtures
    from lint_gpu_tests.rules import ALL_RULES

    codes = [rule for rule in ALL_RULES if config.is_code_enabled(rule.code)]
    ignored = per_file_ignored_codes(path, config)
    codes = [rule for rule in codes if not any(rule.code.startswith(p) for p in ignored)]
    if not codes:
        return CheckResult()
    try:
        if module is None:
            module = ModuleAnalysis.build(tree, text, path, config,
                                          conftest_engine_fixtures(path, config,
                                                                   index=conftests))
    except RecursionError as exc:
        raise SourceTooDeep(TOO_DEEP_TO_ANALYSE) from exc
    if not module.in_scope:
        return CheckResult()
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
            noqa = parse_noqa(text, tree) if wants_noqa else Noqa()
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
                    location=Location(hit.node_line, char_col(lines, hit.node_line,
                                                               hit.node_col) + 1),
                    end_location=Location(hit.end_line, char_col(lines, hit.end_line,
                                                                  hit.end_col) + 1),
                    fix=hit.fix,
                )
            )
    if depends:
        out = _drop_orphan_fixes(out, depends)
    if any(v.fixable for v in out):
        out = _drop_too_deep_fixes(tree, text, out)
    return CheckResult(sorted(set(out), key=Violation.sort_key), module)


def _drop_too_deep_fixes(tree: ast.Module, text: str, out: list[Violation]
                         ) -> list[Violation]:
    """LibCST must parse, visit and print the whole module to fix any part of it: in a
    module nested deeper than :data:`MAX_FIX_DEPTH`, report the fixes as unavailable
    (``check`` must not advertise ``[*]`` for a fix ``--fix`` cannot make)."""
    if len(text) < MAX_FIX_DEPTH:  # every level of nesting takes a character of source
        return out
    shortest = 2 * (MAX_FIX_STRING_PARTS + 1)  # each part takes at least two characters
    # ... two of them quotes (a string's, or an f-string's start and end): a text with
    # fewer quotes than that holds no concatenation of too many parts.
    strings_wanted = len(text) >= shortest and \
        text.count('"') + text.count("'") >= shortest
    depth, line, strings = _nesting(tree, shortest if strings_wanted else 0)
    if depth > MAX_FIX_DEPTH:
        reason = (f"expression too deep (line {line} nests {depth} levels; the fixer rewrites "
                  f"at most {MAX_FIX_DEPTH})")
    else:
        parts, line = _longest_concatenation(strings, text, shortest)
        if parts <= MAX_FIX_STRING_PARTS:
            return out
        reason = (f"an implicit string concatenation of {parts} parts (line {line}; the "
                  f"fixer's parser takes at most {MAX_FIX_STRING_PARTS})")
    return [dataclasses.replace(v, fix=FixInfo(Applicability.NONE, v.fix.title, reason))
            if v.fix is not None and v.fixable else v for v in out]


def _longest_concatenation(strings: Sequence[ast.expr], text: str,
                           shortest: int) -> tuple[int, int]:
    """``(parts, line)`` of the implicit string concatenation among ``strings`` (string
    nodes of the module ``text``, as :func:`_nesting` collects them) with the most parts
    (``"a" "b"`` is two), counted with the tokenizer in those whose source holds at least
    ``shortest`` characters; ``(0, 0)`` when there is none."""
    import io
    import tokenize

    string_tokens = {tokenize.STRING}
    string_tokens.add(getattr(tokenize, "FSTRING_START", tokenize.STRING))
    lines: list[str] = []  # split once, and only for a string that may be long
    ends: list[int] = []  # ends[k]: characters in lines 1..k
    best = (0, 0)
    for node in strings:
        first, last = node.lineno, node.end_lineno or node.lineno
        if not lines:
            lines = physical_lines(text)
            ends = [0]
            for piece in lines:
                ends.append(ends[-1] + len(piece))
        if last > len(lines) or ends[last] - ends[first - 1] < shortest:
            continue  # the lines the string spans are too short to hold that many parts
        segment = _segment(lines, node)
        if len(segment) < shortest:
            continue
        try:
            parts = sum(1 for tok in tokenize.generate_tokens(
                io.StringIO(f"({segment})").readline) if tok.type in string_tokens)
        except (tokenize.TokenError, SyntaxError):
            continue
        if parts > best[0]:
            best = (parts, first)
    return best


def _segment(lines: Sequence[str], node: ast.expr) -> str:
    """The source of ``node`` (``ast`` positions: one-based lines, UTF-8 byte columns) cut
    from ``lines`` (the module's :func:`physical_lines`), as :func:`ast.get_source_segment`
    gives it without splitting the module again."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    start, end = node.col_offset, node.end_col_offset or 0
    if first == last:
        return lines[first].encode()[start:end].decode()
    head = lines[first].encode()[start:].decode()
    tail = lines[last].encode()[:end].decode()
    return "".join([head, *lines[first + 1:last], tail])


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


def check_source(source: bytes, path: str, config: Config,
                 conftests: ConftestIndex | None = None) -> list[Violation]:
    """Check one file's bytes and return its violations, sorted by position (the
    :attr:`CheckResult.violations` of :func:`check_module`)."""
    return check_module(source, path, config, conftests).violations


def check_module(source: bytes, path: str, config: Config,
                 conftests: ConftestIndex | None = None, *,
                 parsed: tuple[ast.Module, str] | None = None) -> CheckResult:
    """Check one file's bytes: its violations, sorted by position, and their analysis.

    Args:
        source: the file's raw bytes (any PEP 263 encoding, BOM allowed).
        path: the path as the user gave it; used in violations and for scope.
        config: the run's settings.
        conftests: the run's conftest index
            (:class:`~lint_gpu_tests.checking.conftest_index.ConftestIndex`: the engine fixtures of
            the conftests pytest loads for ``path``, and the analysis of a conftest built to
            index it); ``None``: one for this check alone.
        parsed: ``(tree, text)`` as :func:`~lint_gpu_tests.parsing.source.parse_source` gave them
            for ``source``, where the caller parsed it already.

    Returns:
        Violations after selection and ``# noqa``, with the analysis they were found on (the
        fixes' plans refer to it). A file that does not parse yields a single ``GPU900``
        violation with the parser's line and message (never an exception); so does one that
        parses but nests too deeply for the analysis to walk.

    Raises:
        InternalError: when a rule fails unexpectedly on this file.
    """
    module = conftests.analysed(path, source, config) if conftests is not None else None
    tree: ast.Module | None
    if module is not None:
        tree, text, error = module.tree, module.text, None
    elif parsed is not None:
        (tree, text), error = parsed, None
    else:
        tree, text, error = parse_source(source, path)
    if error is None:
        assert tree is not None
        try:
            return _checked_tree(tree, text, path, config, True, module, conftests)
        except SourceTooDeep:
            error = _parse_error(path, TOO_DEEP_TO_ANALYSE, 1, 1)
    return CheckResult([error] if config.is_code_enabled(PARSE_ERROR_CODE) else [])



"""One file's fix loop: check, choose the fixes that may be applied, run one codemod pass,
re-check, until nothing changes (bounded), as ruff does.

Layered above the codemods (:mod:`lint_gpu_tests.codemods.driver` applies one pass) and the
engine (:func:`lint_gpu_tests.checking.checker.check_source` re-checks); the API calls
:func:`fix_source`. LibCST is imported only when a file has something to fix.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lint_gpu_tests.checking.checker import (
    CheckResult,
    check_module,
    nests_deeper_than,
    per_file_ignored_codes,
    wanted_fixes,
)
from lint_gpu_tests.checking.conftest_index import ConftestIndex
from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import Applicability, FixInfo, FixKind, Violation
from lint_gpu_tests.parsing.source import (
    InternalError,
    call_with_deep_limit,
    call_with_deep_stack,
    parse_source,
)

if TYPE_CHECKING:
    from lint_gpu_tests.analysis.analysis import ModuleAnalysis

__all__ = ["MAX_FIX_PASSES", "SHALLOW_FIX_DEPTH", "FixOutcome", "fix_source", "match_key"]


@dataclass
class FixOutcome:
    """Result of fixing one file.

    Attributes:
        new_source: fixed bytes, or ``None`` when nothing changed.
        fixed: violations the fix removed.
        remaining: violations left in the (fixed) file.
        error: an internal-error message when a fix pass was thrown away.
        exception: the exception that made a codemod fail, for ``--verbose``.
        passes: each kept pass as ``(kind of fixes applied, bytes before, bytes after)``,
            in order (the JSON edits are credited to the fixes of the kind that made them).
    """

    new_source: bytes | None
    fixed: list[Violation]
    remaining: list[Violation]
    error: str | None = None
    exception: BaseException | None = None
    passes: list[tuple[FixKind, bytes, bytes]] = field(default_factory=list)


MAX_FIX_PASSES = 10


_LINE_REF = re.compile(r"\bline \d+")


def match_key(v: Violation) -> tuple[str, str]:
    """What identifies a violation across a rewrite: its code and message, with the line
    numbers a message quotes blanked, since rewrites move lines. A violation with no fix
    (GPU007's message names the engines' calls and lines, which a rewrite changes) is matched
    by its code alone."""
    if v.fix is None:
        return v.code, ""
    return v.code, _LINE_REF.sub("line N", v.message)


def _fixed_violations(original: list[Violation], remaining: list[Violation],
                      unsafe: bool) -> list[Violation]:
    """The original violations that fixing removed. Positions move when code is rewritten,
    so violations are matched by :func:`match_key`, counting repeats (three identical GPU001
    messages with one left means two fixed). Where repeats share a key, the ones whose fix
    was not to be applied are the ones still there: they are matched first, so a fix is never
    credited to a violation that has none."""
    from collections import Counter

    left = Counter(match_key(v) for v in remaining)
    wanted = {id(v) for v in wanted_fixes(original, unsafe)}
    order = sorted(range(len(original)), key=lambda i: id(original[i]) in wanted)
    fixed: list[int] = []
    for index in order:
        key = match_key(original[index])
        if left[key] > 0:
            left[key] -= 1
        else:
            fixed.append(index)
    return [original[i] for i in sorted(fixed)]


def unselected_fixed(before: bytes, after: bytes, path: str, config: Config,
                     conftests: ConftestIndex | None = None) -> list[Violation]:
    """The violations of ``before`` that ``config``'s selection leaves out (``select``,
    ``extend-select``, ``ignore``, ``per-file-ignores``) and that ``after``, its fixed
    bytes, no longer has: what the fixes of the selected violations removed with them.
    Both are checked again with every rule selected, unless ``config`` selects everything
    already (then nothing is checked and the answer is empty). Matched as
    :func:`_fixed_violations` matches, positions those of ``before``.

    Raises:
        InternalError: when a rule fails on either text.
    """
    wide = config.with_overrides(select=("GPU",), extend_select=(), ignore=(),
                                 per_file_ignores=())
    if wide == config:
        return []
    ignored = per_file_ignored_codes(path, config)
    left_out = [v for v in check_module(before, path, wide, conftests).violations
                if not config.is_code_enabled(v.code)
                or any(v.code.startswith(p) for p in ignored)]
    if not left_out:
        return []
    return _fixed_violations(left_out, check_module(after, path, wide, conftests).violations,
                             True)


def fix_source(source: bytes, path: str, config: Config, *, unsafe: bool = False,
               violations: list[Violation] | None = None,
               analysis: ModuleAnalysis | None = None,
               conftests: ConftestIndex | None = None) -> FixOutcome:
    """Check ``source`` and apply fixes until nothing changes (at most 10 passes).

    Each pass applies the plans the violations of the current text carry (one codemod,
    :func:`lint_gpu_tests.codemods.driver.apply_fixes`), then checks the new text once,
    which gives the next pass its violations and plans. A pass whose output does not parse,
    or that raises (LibCST's ``PanicException``, a ``BaseException``, included), is thrown
    away (the file is left as the last good pass had it) and reported in ``error``. When
    the tenth pass still leaves something to fix, the fixes do not converge: nothing is
    kept, ``error`` says ``failed to converge after 10 passes`` (as ruff does), and the
    violations whose fixes were to be applied are left without a fix, saying why. A module
    nesting more than :data:`SHALLOW_FIX_DEPTH` levels is fixed in
    :func:`call_with_deep_stack`, so deeply nested modules (long string concatenations) can
    be rewritten; a shallower one in the calling thread, under the same recursion limit
    (:func:`~lint_gpu_tests.parsing.source.call_with_deep_limit`).
    LibCST is imported only when there is something to fix.

    Args:
        source: the file's raw bytes.
        path: path used for reports and scope.
        config: the run's settings.
        unsafe: apply unsafe fixes too (``--unsafe-fixes``).
        violations: ``check_module(source, path, config).violations`` when the caller
            has them already, with ``analysis``, that check's analysis: the first pass
            applies the plans they carry. Without ``analysis``, or when a fix to apply has
            no plan (violations read back from the cache), the bytes are checked again.
        analysis: see ``violations``.
        conftests: the run's conftest index, for every check of the loop (``None``: one
            for this call alone).

    Returns:
        A :class:`FixOutcome`; ``new_source`` keeps the original encoding, BOM and
        line endings.

    Raises:
        InternalError: when a rule fails unexpectedly.
    """
    if conftests is None:
        conftests = ConftestIndex()
    if violations is None:
        checked = check_module(source, path, config, conftests)
    else:
        checked = CheckResult(violations, analysis)
    original = checked.violations
    todo = wanted_fixes(original, unsafe)
    if not todo:
        return FixOutcome(None, [], original)
    if checked.module is None or any(_needs_plan(v) for v in todo):
        checked = check_module(source, path, config, conftests)  # the same, with plans
    if checked.module is not None and not nests_deeper_than(checked.module.tree,
                                                            SHALLOW_FIX_DEPTH):
        return call_with_deep_limit(_fix_loop, source, path, config, unsafe, checked,
                                    conftests)
    return call_with_deep_stack(_fix_loop, source, path, config, unsafe, checked, conftests)


SHALLOW_FIX_DEPTH = 100
"""Deepest ``ast`` nesting of a module fixed in the calling thread rather than in
:func:`call_with_deep_stack`'s thread. LibCST's visitors and code generation are Python
calling Python (no C stack per level on CPython 3.11), so a module this shallow is fixed
within the raised recursion limit on any thread's stack; the same fix pass costs more CPU
in the other thread, started or kept (``docs/performance.md``, "Where a fix's time
goes")."""


def _needs_plan(violation: Violation) -> bool:
    """True when the fix of ``violation`` is missing the plan a codemod applies (a violation
    read back from the cache carries no kind nor plan)."""
    fix = violation.fix
    return fix is None or fix.kind is None or (fix.kind is not FixKind.WITH_ANOTHER
                                               and fix.plan is None)


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


def _not_fixable(violations: list[Violation], failed: list[Violation],
                 reason: str) -> list[Violation]:
    """``violations`` with the fixes of those in ``failed`` (the pass that was thrown away)
    made unavailable, saying why: ``check`` must not count as fixable what ``--fix`` could
    not do."""
    gone = {id(v) for v in failed}
    return [dataclasses.replace(v, fix=FixInfo(Applicability.NONE, v.fix.title, reason))
            if id(v) in gone and v.fix is not None else v for v in violations]


def _fix_loop(source: bytes, path: str, config: Config, unsafe: bool,
              checked: CheckResult, conftests: ConftestIndex) -> FixOutcome:
    from lint_gpu_tests.codemods.driver import apply_fixes  # imports libcst

    original = checked.violations
    current = source
    current_violations = original
    analysis = checked.module
    error: str | None = None
    failure: BaseException | None = None
    passes: list[tuple[FixKind, bytes, bytes]] = []
    for _ in range(MAX_FIX_PASSES):
        todo = wanted_fixes(current_violations, unsafe)
        if not todo:
            break
        assert analysis is not None  # violations with fixes come from an analysis
        try:
            candidate = apply_fixes(current, path, config, todo, analysis)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - a failed pass is reported, file kept
            error = f"{_failure_detail(exc)}; pass discarded"
            failure = exc
            current_violations = _not_fixable(current_violations, todo,
                                              f"the fix failed: {_failure_detail(exc)}")
            break
        if candidate is None or candidate.source == current:
            break
        tree, text, parse_error = parse_source(candidate.source, path)
        if parse_error is not None:
            error = f"fix produced invalid code ({parse_error.message}); pass discarded"
            current_violations = _not_fixable(current_violations, todo,
                                              f"the fix failed: it produced invalid code "
                                              f"({parse_error.message})")
            break
        passes.append((candidate.kind, current, candidate.source))
        current = candidate.source
        assert tree is not None  # parsed without error
        checked = check_module(current, path, config, conftests, parsed=(tree, text))
        current_violations, analysis = checked.violations, checked.module
    else:
        if wanted_fixes(current_violations, unsafe):
            # Nothing is kept, so nothing is fixed: the fixes are not counted as fixable.
            return FixOutcome(None, [], _not_fixable(
                original, wanted_fixes(original, unsafe),
                f"the fix failed: it did not converge after {MAX_FIX_PASSES} passes"),
                f"failed to converge after {MAX_FIX_PASSES} passes; file left unchanged")
    remaining = current_violations
    fixed = _fixed_violations(original, remaining, unsafe) if current != source else []
    return FixOutcome(current if current != source else None, fixed, remaining, error, failure,
                      passes)

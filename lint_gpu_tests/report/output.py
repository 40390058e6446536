"""Output formats, as ruff prints them: concise, full, json, sarif, github, junit.

Every renderer takes the violations (already sorted) and a :class:`RenderOptions`, and
returns the text to print; none of them prints or reads files except ``full``, which reads
the source lines it shows. Summary lines (``Found N violations.``), ``--statistics`` and
``--show-fixes`` live here too, so the CLI only chooses and prints.
"""

from __future__ import annotations

import enum
import json
import os
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lint_gpu_tests import __version__
from lint_gpu_tests.ftypes import Applicability, LeakEvidence, Location, Violation

if TYPE_CHECKING:
    from lint_gpu_tests.fixing.edits import Edit

TOOL_NAME = "gpu-test-lint"
DOCS_URL = "docs/rules.md"
"""Where the rule documentation ships: ``docs/rules.md`` of the gpu-test-lint repository (a
relative reference; the package is installed from a clone or a wheel, it has no web site)."""
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
CONFIRMED_MARK = "[leak confirmed]"
"""Text formats' mark of a violation that a run's leak report confirms (``--leak-report``)."""
"""The ``originalUriBaseIds`` key that SARIF artifact URIs are relative to (the repository)."""


class OutputFormat(enum.Enum):
    """The ``--output-format`` choices."""

    CONCISE = "concise"
    FULL = "full"
    JSON = "json"
    SARIF = "sarif"
    GITHUB = "github"
    JUNIT = "junit"

    @property
    def is_text(self) -> bool:
        """Human formats get summary lines; machine formats are printed alone."""
        return self in (OutputFormat.CONCISE, OutputFormat.FULL)


@dataclass(frozen=True)
class RenderOptions:
    """How to render.

    Attributes:
        unsafe_fixes: ``--unsafe-fixes`` is on, so unsafe fixes count as applicable.
        color: emit ANSI colours (only for text formats).
        cwd: directory that relative paths in JSON/SARIF are resolved against.
        edits: the edits of each violation's fix (see
        :func:`lint_gpu_tests.fixing.edits.fix_edits`);
            a violation missing here has ``edits: []``.
        leak_report: a leak report was read (``--leak-report``): JSON and SARIF say of
            every violation whether it is confirmed, not only of the confirmed ones.
    """

    unsafe_fixes: bool = False
    color: bool = False
    cwd: str = "."
    edits: Mapping[Violation, tuple[Edit, ...]] = field(default_factory=dict)
    leak_report: bool = False


def rule_url(code: str) -> str:
    """Documentation URL of a rule: its anchor in ``docs/rules.md`` (``docs/rules.md#gpu001``,
    relative to the gpu-test-lint repository)."""
    return f"{DOCS_URL}#{code.lower()}"


def applicable(violation: Violation, unsafe_fixes: bool) -> bool:
    """True when ``--fix`` (with ``--unsafe-fixes`` when given) would fix ``violation``."""
    fix = violation.fix
    if fix is None:
        return False
    return fix.applicability is Applicability.SAFE or (
        unsafe_fixes and fix.applicability is Applicability.UNSAFE
    )


def _hidden(violation: Violation, unsafe_fixes: bool) -> bool:
    fix = violation.fix
    return not unsafe_fixes and fix is not None and fix.applicability is Applicability.UNSAFE


def _style(text: str, color: bool, **styles: Any) -> str:
    if not color:
        return text
    import click

    return click.style(text, **styles)


def _confirmed_mark(violation: Violation, color: bool) -> str:
    """`` [leak confirmed]`` for a confirmed violation, else ``""``."""
    if violation.leak is None:
        return ""
    return " " + _style(CONFIRMED_MARK, color, fg="magenta", bold=True)


def _gib(count: int) -> str:
    return f"{count / (1 << 30):.2f} GiB"


def leak_note(leak: LeakEvidence) -> str:
    """One line on what confirmed a violation: ``leaked after test_x.py::test_a (1.62 GiB;
    held by: ...)``, its fixture named when it came through one."""
    tests = ", ".join(leak.tests)
    through = "" if leak.via == "test" else f" through its {leak.via}"
    held = f"; held by: {'; '.join(leak.held_by)}" if leak.held_by else ""
    size = _gib(leak.bytes) if leak.bytes else "size not measured"
    return f"an engine stayed alive after {tests}{through} ({size}{held})"


def _leak_json(leak: LeakEvidence) -> dict[str, Any]:
    return {"bytes": leak.bytes, "held_by": list(leak.held_by), "tests": list(leak.tests),
            "via": leak.via}


# --------------------------------------------------------------------------- concise / full


def format_concise_line(violation: Violation, options: RenderOptions) -> str:
    """``path:line:col: CODE [*] message`` (``[*]`` only when ``--fix`` would fix it;
    then ``[leak confirmed]`` when a run's leak report confirms it)."""
    color = options.color
    loc = violation.location
    mark = " " + _style("[*]", color, fg="cyan") if applicable(violation, options.unsafe_fixes) \
        else ""
    mark += _confirmed_mark(violation, color)
    return (
        f"{_style(violation.path, color, bold=True)}{_style(':', color, fg='cyan')}"
        f"{loc.row}{_style(':', color, fg='cyan')}{loc.column}{_style(':', color, fg='cyan')} "
        f"{_style(violation.code, color, fg='red', bold=True)}{mark} {violation.message}"
    )


def render_concise(violations: Sequence[Violation], options: RenderOptions) -> str:
    """One line per violation."""
    return "".join(format_concise_line(v, options) + "\n" for v in violations)


def source_lines(path: str, cache: dict[str, list[str]],
                 sources: Mapping[str, bytes] | None = None) -> list[str]:
    """The lines of the file at ``path`` (decoded as Python decodes it), read once per
    ``cache``; ``sources`` (path -> bytes) gives the text of a file that is not on disk (a
    buffer read from stdin). An unreadable file has no lines."""
    if path not in cache:
        from lint_gpu_tests.checking.checker import decode_source

        try:
            data = sources[path] if sources is not None and path in sources \
                else Path(path).read_bytes()
            try:
                text = decode_source(data)
            except SyntaxError:
                text = data.decode("utf-8", "replace")
            cache[path] = text.splitlines()
        except OSError:
            cache[path] = []
    return cache[path]


FULL_CONTEXT = 2


def render_full(violations: Sequence[Violation], options: RenderOptions) -> str:
    """ruff's ``full`` format: header, source lines around the range, carets, fix hint."""
    color = options.color
    sources: dict[str, list[str]] = {}
    blocks: list[str] = []
    for v in violations:
        mark = " " + _style("[*]", color, fg="cyan") if applicable(v, options.unsafe_fixes) \
            else ""
        mark += _confirmed_mark(v, color)
        out = [f"{_style(v.code, color, fg='red', bold=True)}{mark} {v.message}",
               f" {_style('-->', color, fg='blue')} {v.path}:{v.location.row}:{v.location.column}"]
        lines = source_lines(v.path, sources)
        row = v.location.row
        if 1 <= row <= len(lines):
            first = max(1, row - FULL_CONTEXT)
            last = min(len(lines), row + FULL_CONTEXT)
            width = len(str(last))
            gutter = _style(" " * width + " |", color, fg="blue")
            out.append(gutter)
            for number in range(first, last + 1):
                text = lines[number - 1].expandtabs(4) if number != row else lines[number - 1]
                out.append(f"{_style(f'{number:>{width}} |', color, fg='blue')} {text}".rstrip())
                if number == row:
                    line = lines[row - 1]
                    start = max(0, v.location.column - 1)
                    end = v.end_location.column - 1 if v.end_location.row == row else len(line)
                    carets = "^" * max(1, end - start)
                    prefix = "".join("\t" if ch == "\t" else " " for ch in line[:start])
                    out.append(f"{gutter} {prefix}{_style(carets, color, fg='red', bold=True)}")
            out.append(gutter)
        if v.fix is not None and v.fix.title:
            help_text = v.fix.title
            if v.fix.applicability is Applicability.UNSAFE:
                help_text += f" (unsafe fix: {v.fix.reason})" if v.fix.reason else \
                    " (unsafe fix)"
            elif v.fix.applicability is Applicability.NONE and v.fix.reason:
                help_text += f" (no automatic fix: {v.fix.reason})"
            out.append(f"{_style('help:', color, bold=True)} {help_text}")
        if v.leak is not None:
            out.append(f"{_style('leak:', color, bold=True)} {leak_note(v.leak)}")
        blocks.append("\n".join(out) + "\n")
    return "\n".join(blocks)


# --------------------------------------------------------------------------- json


def _absolute(path: str, cwd: str) -> str:
    return os.path.normpath(os.path.join(cwd, path))


def _edit_json(edit: Edit) -> dict[str, Any]:
    return {"content": edit.content,
            "end_location": {"column": edit.end_location.column, "row": edit.end_location.row},
            "location": {"column": edit.location.column, "row": edit.location.row}}


def _by_file(edits: Sequence[Edit]) -> tuple[list[Edit], dict[str, list[Edit]]]:
    """A fix's edits of the violation's own file, and those of each other file (a fix unit
    across modules: :attr:`Edit.path` set), in the order they come."""
    own: list[Edit] = []
    others: dict[str, list[Edit]] = {}
    for edit in edits:
        if edit.path is None:
            own.append(edit)
        else:
            others.setdefault(edit.path, []).append(edit)
    return own, others


def violation_json(violation: Violation, options: RenderOptions) -> dict[str, Any]:
    """One violation as ruff's JSON object (keys in ruff's order)."""
    fix: dict[str, Any] | None = None
    if violation.fix is not None and violation.fix.available:
        own, others = _by_file(options.edits.get(violation, ()))
        fix = {
            "applicability": violation.fix.applicability.value,
            "edits": [_edit_json(edit) for edit in own],
            "message": violation.fix.title,
        }
        if others:  # a fix unit across modules (not in ruff's shape)
            fix["other_files"] = [
                {"edits": [_edit_json(edit) for edit in edits],
                 "filename": _absolute(path, options.cwd)}
                for path, edits in others.items()]
        if violation.fix.reason:
            fix["reason"] = violation.fix.reason  # why it is unsafe (not in ruff's shape)
    return {
        "cell": None,
        "code": violation.code,
        "end_location": {"column": violation.end_location.column,
                         "row": violation.end_location.row},
        "filename": _absolute(violation.path, options.cwd),
        "fix": fix,
        "location": {"column": violation.location.column, "row": violation.location.row},
        "message": violation.message,
        "name": violation.name,
        "noqa_row": violation.location.row,
        "severity": "error",
        "url": rule_url(violation.code),
        **({"no_fix_reason": violation.fix.reason}
           if violation.fix is not None and not violation.fix.available and violation.fix.reason
           else {}),
        **({"confirmed": violation.confirmed} if options.leak_report or violation.confirmed
           else {}),
        **({"leak": _leak_json(violation.leak)} if violation.leak is not None else {}),
    }


def render_json(violations: Sequence[Violation], options: RenderOptions) -> str:
    """A JSON list of violations in ruff's shape."""
    return json.dumps([violation_json(v, options) for v in violations], indent=2) + "\n"


# --------------------------------------------------------------------------- sarif


def repository_root(cwd: str) -> str:
    """The directory SARIF URIs are relative to: the enclosing git checkout of ``cwd``
    (a directory holding ``.git``), else ``cwd`` itself."""
    here = Path(os.path.abspath(cwd))
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return str(directory)
    return str(here)


def sarif_artifact(path: str, cwd: str, root: str) -> dict[str, str]:
    """``artifactLocation`` of ``path``: a percent-encoded URI reference relative to
    :data:`SRCROOT` (``root``), or an absolute ``file:`` URI for a file outside it."""
    from urllib.parse import quote

    absolute = _absolute(path, cwd)
    rel = os.path.relpath(absolute, root)
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return {"uri": Path(absolute).as_uri()}
    return {"uri": quote(rel.replace(os.sep, "/"), safe="/"), "uriBaseId": SRCROOT}


def _region(start: Location, end: Location) -> dict[str, int]:
    return {"startLine": start.row, "startColumn": start.column,
            "endLine": end.row, "endColumn": end.column}


def fingerprint(v: Violation, key: str, lines: Sequence[str], seen: Counter[str], *,
                every_line: bool = False) -> str:
    """A violation's identity that survives lines moving, as GitHub's code scanning spells
    its ``primaryLocationLineHash``: ``hash:occurrence``. The hash is of the rule, ``key``
    (the file as the caller names it) and the reported line's text without whitespace, so a
    result keeps its identity when lines above it move; the occurrence counts the violations
    with the same hash so far (``seen``, updated), so repeats of one statement differ.

    Args:
        v: the violation.
        key: the file's name in the hash (SARIF: its URI; a baseline: its path relative to
            the baseline file).
        lines: the lines of the file the violation's position refers to.
        seen: the hashes given so far in this file (or run), counted.
        every_line: hash every line the violation spans, not only its first (a baseline
            entry then goes stale when any line of the statement changes).
    """
    import hashlib

    last = v.end_location.row if every_line else v.location.row
    text = "".join("".join(lines[row - 1].split())
                   for row in range(v.location.row, last + 1) if 1 <= row <= len(lines))
    digest = hashlib.sha256(f"{v.code}\0{key}\0{text}".encode()).hexdigest()[:16]
    seen[digest] += 1
    return f"{digest}:{seen[digest]}"


def sarif_rules(reported: Collection[str] = ()) -> list[dict[str, Any]]:
    """``tool.driver.rules`` entries for every rule on by default, each rule from outside the
    package whose code is in ``reported`` (the codes of the run's results: such a rule is off
    by default, :data:`lint_gpu_tests.codes.OPT_IN_CODES`), plus the parse-error
    pseudo-rule. The full documentation is embedded (``help``); there is no ``helpUri``,
    which SARIF wants absolute, and the rule docs have no web address."""
    from lint_gpu_tests.checking.checker import PARSE_ERROR_CODE, PARSE_ERROR_NAME
    from lint_gpu_tests.codes import OPT_IN_CODES
    from lint_gpu_tests.report.docs import render_rule
    from lint_gpu_tests.rules import ALL_RULES

    out: list[dict[str, Any]] = []
    for rule in ALL_RULES:
        if rule.code in OPT_IN_CODES and rule.code not in reported:
            continue
        text = render_rule(rule)
        out.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.what_it_does.strip()},
            "help": {"text": text, "markdown": text},
            "properties": {"tags": ["gpu", "resource-leak"]},
        })
    out.append({
        "id": PARSE_ERROR_CODE,
        "name": PARSE_ERROR_NAME,
        "shortDescription": {"text": "The file does not parse"},
        "fullDescription": {"text": "The file is not valid Python; it is reported and never "
                                    "rewritten."},
        "help": {"text": "Fix the syntax error.", "markdown": "Fix the syntax error."},
    })
    return out


def render_sarif(violations: Sequence[Violation], options: RenderOptions) -> str:
    """A SARIF 2.1.0 log with one run, the rules described (:func:`sarif_rules`), one result
    per violation: URIs relative to the repository (``originalUriBaseIds``),
    ``partialFingerprints``, and the fix's ``artifactChanges`` where the fix's edits are
    known (one per file: the violation's own first, then each other file a fix unit across
    modules changes)."""
    rules = sarif_rules({v.code for v in violations})
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    root = repository_root(options.cwd)
    sources: dict[str, list[str]] = {}
    seen: Counter[str] = Counter()
    results = []
    for v in violations:
        artifact = sarif_artifact(v.path, options.cwd, root)
        result: dict[str, Any] = {
            "ruleId": v.code,
            "level": "error",
            "message": {"text": v.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": artifact,
                    "region": _region(v.location, v.end_location),
                }
            }],
            "partialFingerprints": {
                "primaryLocationLineHash": fingerprint(
                    v, artifact["uri"], source_lines(v.path, sources), seen)},
        }
        if v.code in index:
            result["ruleIndex"] = index[v.code]
        if v.leak is not None:
            result["properties"] = {"confirmed": True, "leak": _leak_json(v.leak)}
        elif options.leak_report:
            result["properties"] = {"confirmed": False}
        own, others = _by_file(options.edits.get(v, ()))
        changes = [(artifact, own)] if own else []
        changes += [(sarif_artifact(path, options.cwd, root), edits)
                    for path, edits in others.items()]
        if changes and v.fix is not None:
            result["fixes"] = [{
                "description": {"text": v.fix.title},
                "artifactChanges": [{
                    "artifactLocation": location,
                    "replacements": [{"deletedRegion": _region(e.location, e.end_location),
                                      "insertedContent": {"text": e.content}}
                                     for e in edits],
                } for location, edits in changes],
            }]
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": TOOL_NAME,
                "version": __version__,
                "rules": rules,
            }},
            "originalUriBaseIds": {SRCROOT: {"uri": Path(root).as_uri().rstrip("/") + "/"}},
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"


# --------------------------------------------------------------------------- github


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(violations: Sequence[Violation], options: RenderOptions) -> str:
    """GitHub Actions workflow commands, one ``::error`` annotation per violation."""
    lines = []
    for v in violations:
        title = f"{TOOL_NAME} ({v.code}, leak confirmed)" if v.leak is not None \
            else f"{TOOL_NAME} ({v.code})"
        props = (
            f"title={_gh_prop(title)},file={_gh_prop(v.path)},"
            f"line={v.location.row},col={v.location.column},"
            f"endLine={v.end_location.row},endColumn={v.end_location.column}"
        )
        text = f"{v.code} {v.message}"
        if v.leak is not None:
            text += f"\n{CONFIRMED_MARK} {leak_note(v.leak)}"
        lines.append(f"::error {props}::{_gh_data(text)}\n")
    return "".join(lines)


# --------------------------------------------------------------------------- junit


def escape(text: str) -> str:
    """Escape XML character data (``xml.sax.saxutils`` would pull in ``urllib``: slow start)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quoteattr(text: str) -> str:
    """An XML attribute value with its double quotes."""
    escaped = escape(text).replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;")
    return f'"{escaped.replace(chr(9), "&#9;")}"'


def render_junit(violations: Sequence[Violation], options: RenderOptions) -> str:
    """JUnit XML like ruff's: a testsuite per file, a failed testcase per violation."""
    by_file: dict[str, list[Violation]] = {}
    for v in violations:
        by_file.setdefault(v.path, []).append(v)
    total = len(violations)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="{TOOL_NAME}" tests="{max(total, 1)}" skipped="0" '
           f'failures="{total}" errors="0">']
    if not by_file:
        out += [f'    <testsuite name="{TOOL_NAME}" tests="1" skipped="0" errors="0" '
                f'failures="0" package="org.{TOOL_NAME}">',
                f'        <testcase name="No errors found" classname="{TOOL_NAME}"/>',
                "    </testsuite>"]
    for path, items in by_file.items():
        classname = path[:-3] if path.endswith(".py") else path
        out.append(f"    <testsuite name={quoteattr(path)} tests=\"{len(items)}\" skipped=\"0\" "
                   f"errors=\"0\" failures=\"{len(items)}\" package=\"org.{TOOL_NAME}\">")
        for v in items:
            row, col = v.location.row, v.location.column
            message = f"{CONFIRMED_MARK} {v.message}" if v.leak is not None else v.message
            out += [
                f"        <testcase name=\"org.{TOOL_NAME}.{v.code}\" "
                f"classname={quoteattr(classname)} line=\"{row}\" column=\"{col}\">",
                f"            <failure message={quoteattr(message)}>"
                f"line {row}, col {col}, {escape(message)}</failure>",
                "        </testcase>",
            ]
        out.append("    </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


RENDERERS: dict[OutputFormat, Callable[[Sequence[Violation], RenderOptions], str]] = {
    OutputFormat.CONCISE: render_concise,
    OutputFormat.FULL: render_full,
    OutputFormat.JSON: render_json,
    OutputFormat.SARIF: render_sarif,
    OutputFormat.GITHUB: render_github,
    OutputFormat.JUNIT: render_junit,
}


def render(violations: Sequence[Violation], fmt: OutputFormat, options: RenderOptions) -> str:
    """Render ``violations`` in ``fmt``; machine formats render even an empty list."""
    return RENDERERS[fmt](violations, options)


# --------------------------------------------------------------------------- summaries


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summary_lines(
    remaining: Sequence[Violation],
    fixed_count: int,
    *,
    unsafe_fixes: bool,
    fix_mode: bool,
) -> list[str]:
    """ruff's closing lines: ``Found N violations.``, the fixable count and hidden fixes.

    Args:
        remaining: violations still reported.
        fixed_count: violations that ``--fix`` removed.
        unsafe_fixes: ``--unsafe-fixes`` is on.
        fix_mode: ``--fix`` was given (changes the ``Found`` line as ruff does).

    Returns:
        The lines to print (no trailing newlines); ``["All checks passed!"]`` when nothing
        was found.
    """
    total = len(remaining) + fixed_count
    if total == 0:
        return ["All checks passed!"]
    if fix_mode and fixed_count:
        lines = [f"Found {_plural(total, 'violation')} ({fixed_count} fixed, "
                 f"{len(remaining)} remaining)."]
    else:
        lines = [f"Found {_plural(total, 'violation')}."]
    fixable = sum(1 for v in remaining if applicable(v, unsafe_fixes))
    hidden = sum(1 for v in remaining if _hidden(v, unsafe_fixes))
    hint = (f" ({hidden} hidden fix{'' if hidden == 1 else 'es'} can be enabled with the "
            "`--unsafe-fixes` option)") if hidden else ""
    if fixable:
        lines.append(f"[*] {fixable} fixable with the `--fix` option{hint}.")
    elif hidden:
        lines.append(f"No fixes available{hint}.")
    return lines


def confirmed_lines(violations: Sequence[Violation], report_path: str, *, left_out: int = 0,
                    unmatched: Sequence[str] = ()) -> list[str]:
    """``--leak-report``'s closing lines: how many violations the report confirms (listed
    first), how many ``--select-confirmed`` left out, and the leaking tests that confirm no
    violation.

    Args:
        violations: the violations reported.
        report_path: the leak report's path, as given.
        left_out: violations not confirmed that ``--select-confirmed`` does not show.
        unmatched: node ids of leaking tests in the checked files that confirm nothing.
    """
    count = sum(1 for v in violations if v.leak is not None)
    line = f"{CONFIRMED_MARK} {_plural(count, 'violation')} confirmed by the leak report " \
        f"{report_path}"
    line += " (listed first)." if count and count < len(violations) else "."
    lines = [line]
    if left_out:
        lines.append(f"{_plural(left_out, 'violation')} not confirmed left out "
                     "(--select-confirmed).")
    if unmatched:
        lines.append(f"{_plural(len(unmatched), 'leaking test')} of the checked files "
                     f"confirm{'s' if len(unmatched) == 1 else ''} no violation: "
                     + ", ".join(unmatched))
    return lines


def statistics_lines(violations: Sequence[Violation], unsafe_fixes: bool) -> list[str]:
    """``--statistics``: one row per code, most frequent first, as ruff prints it:
    ``count<TAB>code<TAB>[*] name`` (``[ ]`` when no occurrence is fixable)."""
    counts = Counter(v.code for v in violations)
    names = {v.code: v.name for v in violations}
    fixable = {v.code for v in violations if applicable(v, unsafe_fixes)}
    if not counts:
        return []
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    width = max(len(str(n)) for n in counts.values())
    code_width = max(len(code) for code in counts)
    return [
        f"{count:>{width}}\t{code:<{code_width}}\t{'[*]' if code in fixable else '[ ]'} "
        f"{names[code]}"
        for code, count in rows
    ]


def statistics_json(violations: Sequence[Violation], unsafe_fixes: bool) -> str:
    """``--statistics --output-format json``: the rows of :func:`statistics_lines` as ruff's
    JSON statistics, a list of ``{"code", "name", "count", "fixable"}`` objects, most frequent
    first, indented by 2 and ending in a newline."""
    counts = Counter(v.code for v in violations)
    names = {v.code: v.name for v in violations}
    fixable = {v.code for v in violations if applicable(v, unsafe_fixes)}
    rows = [{"code": code, "name": names[code], "count": count, "fixable": code in fixable}
            for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    return json.dumps(rows, indent=2) + "\n"


def show_fixes_lines(fixed: Sequence[Violation],
                     units: Sequence[tuple[str, Sequence[str]]] = ()) -> list[str]:
    """``--show-fixes``: the fixed violations per file, as ruff prints them; and each file a
    fix across modules rewrote without a violation of its own fixed there (``units``:
    ``(helper or fixture name, the paths it rewrote)``; a helper module the rules do not
    look at)."""
    if not fixed:
        return []
    by_file: dict[str, Counter[tuple[str, str]]] = {}
    for v in fixed:
        by_file.setdefault(v.path, Counter())[(v.code, v.name)] += 1
    lines = [f"Fixed {_plural(len(fixed), 'violation')}:"]
    for path in sorted(by_file):
        lines.append(f"- {path}:")
        counter = by_file[path]
        width = max(len(str(n)) for n in counter.values())
        for (code, name), count in sorted(counter.items()):
            lines.append(f"    {count:>{width}} × {code} ({name})")
    for helper, paths in units:
        for path in paths:
            if path not in by_file:
                lines += [f"- {path}:", f"    rewritten with every call of `{helper}`"]
    return lines

"""``prove``'s report: text (one line per difference, then a table per module), JSON, SARIF."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lint_gpu_tests import __version__
from lint_gpu_tests.prove.compare import ModuleResult, Status
from lint_gpu_tests.prove.pipeline import ProveResult
from lint_gpu_tests.report.output import (
    SARIF_SCHEMA,
    SRCROOT,
    TOOL_NAME,
    repository_root,
    sarif_artifact,
)

#: SARIF rule ids: one per way a module can fail its proof.
SARIF_RULES = {
    "prove-differs": "The fixed module behaves differently from the original",
    "prove-inconclusive": "A run of the module did not exercise the fix",
    "prove-not-run": "The module's proof did not complete",
}


def _names(tests: list[str]) -> str:
    return ", ".join(tests) if tests else "none"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """``rows`` (the first the heading) in aligned columns, a rule under the heading."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _notes(m: ModuleResult) -> list[str]:
    """What the report says of ``m`` above the tables: each difference, why it was not run
    or is inconclusive, why it ran again, and how to run it by hand."""
    lines = [d.describe() for d in m.differences]
    if m.note:
        lines.append(f"{m.module}: {m.status.value}: {m.note}")
    if m.rerun:
        lines.append(f"{m.module}: run again alone: {m.rerun}")
    if not m.status.proven:
        lines += [f"{m.module}: by hand ({variant}): {command}"
                  for variant, command in m.commands.items()]
    return lines


def render_text(result: ProveResult) -> str:
    """One line per difference (``module: test: field: before, after``), per module not run
    or inconclusive, per module run again alone, the commands that run a module not
    proven by hand (with ``--work-dir``), and per fix unit across modules its files (and
    with ``--apply`` whether they were written, or why not); then each test's outcome before
    and after; then the table: module, verdict, tests, failed in both, leaked before /
    after, texts by outcome only, seconds; then the totals and what ``--apply`` wrote."""
    lines: list[str] = []
    for m in result.modules:
        lines += _notes(m)
    for unit in result.units:
        written = ": written together" if unit.applied else \
            f": not written: {unit.withheld}" if unit.withheld else ""
        lines.append(f"fix unit ({', '.join(unit.helpers)} and its calls): "
                     f"{', '.join(unit.files)}{written}")
    for path, message in result.errors:
        lines.append(f"{path}: the fixer failed: {message}")
    if lines:
        lines.append("")
    tests = [(t, o["before"] or "-", o["after"] or "-")
             for m in result.modules for t, o in m.outcomes.items()]
    if tests:
        lines += [*_table([("test", "before", "after"), *tests]), ""]
    rows = [("module", "verdict", "tests", "failed in both", "leaked before", "leaked after",
             "texts by outcome only", "seconds")]
    for m in result.modules:
        recorded = f" ({', '.join(m.from_recordings)} recorded)" if m.from_recordings else ""
        rows.append((m.module, m.status.value + (" (run again)" if m.rerun else ""),
                     str(len(m.tests)), str(len(m.failed_in_both)),
                     str(len(m.leaked_before)), str(len(m.leaked_after)),
                     str(len(m.outcome_only)), f"{m.seconds:.1f}{recorded}"))
    if result.modules:
        lines += [*_table(rows), ""]
    counts = {s: sum(1 for m in result.modules if m.status is s) for s in Status}
    again = sum(1 for m in result.modules if m.rerun)
    lines.append(
        f"{_plural(len(result.modules), 'module')} proven: {counts[Status.SAME]} same, "
        f"{counts[Status.LEAK_FIXED]} leaked before and fixed after, "
        f"{counts[Status.DIFFERS]} differ, {counts[Status.INCONCLUSIVE]} inconclusive, "
        f"{counts[Status.NOT_RUN]} not run ({again} run again alone); "
        f"{_plural(len(result.unchanged), 'test module')} unchanged by the fix; "
        f"{result.seconds:.0f} s." + (
            f" Shard {result.shard} of the {len(result.to_prove)} modules to prove."
            if result.shard else ""))
    if result.applied or result.withheld:
        lines.append(f"Applied the fix to {_plural(len(result.applied), 'file')}"
                     + (f"; not written: {', '.join(result.withheld)}" if result.withheld
                        else "") + ".")
    return "\n".join(lines) + "\n"


def _module_json(m: ModuleResult) -> dict[str, Any]:
    data = asdict(m)
    data["status"] = m.status.value
    return data


def render_json(result: ProveResult) -> str:
    """The whole result as JSON: ``modules`` (each with its ``status``, ``differences``,
    tests, leaks, ``outcome_only``, seconds, ``from_recordings``, ``note``, per test its
    ``outcomes`` before and after, ``failed_in_both``, ``not_exercised``, ``engines`` built
    per run, ``rerun``, ``logs``, ``commands``), ``unchanged``, ``changed``, ``applied``,
    ``withheld``, ``errors``, ``seconds``, ``proven``, ``shard`` (``K/N``), ``to_prove``
    (every shard's modules), ``fix`` (how it was made: ``prove merge --apply`` makes it
    again), ``digests`` (each changed file's SHA-256 before and after the fix) and ``units``
    (each fix unit across modules: ``helpers``, ``files``, ``applied``, ``withheld``)."""
    data = {
        "root": result.root,
        "proven": result.proven,
        "modules": [_module_json(m) for m in result.modules],
        "unchanged": result.unchanged,
        "changed": result.changed,
        "applied": result.applied,
        "withheld": result.withheld,
        "errors": [{"path": p, "message": msg} for p, msg in result.errors],
        "seconds": round(result.seconds, 1),
        "shard": result.shard,
        "to_prove": result.to_prove,
        "fix": result.fix,
        "digests": result.digests,
        "units": [asdict(unit) for unit in result.units],
    }
    return json.dumps(data, indent=2, default=str) + "\n"


def render_sarif(result: ProveResult, cwd: str) -> str:
    """A SARIF 2.1.0 log: one result per difference (``prove-differs``, at its module) and
    per module inconclusive or not run (``prove-inconclusive``, ``prove-not-run``, warnings)."""
    root = repository_root(cwd)
    rules = [{"id": rule_id, "name": rule_id, "shortDescription": {"text": text}}
             for rule_id, text in SARIF_RULES.items()]
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    results = []

    def add(rule_id: str, level: str, module: str, text: str) -> None:
        artifact = sarif_artifact(str(Path(result.root, module)), cwd, root)
        results.append({"ruleId": rule_id, "ruleIndex": index[rule_id], "level": level,
                        "message": {"text": text},
                        "locations": [{"physicalLocation": {"artifactLocation": artifact}}]})

    for m in result.modules:
        for d in m.differences:
            add("prove-differs", "error", m.module, d.describe())
        if m.status in (Status.NOT_RUN, Status.INCONCLUSIVE):
            add(f"prove-{m.status.value.replace(' ', '-')}", "warning", m.module,
                f"{m.module}: {m.status.value}: {m.note}")
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": TOOL_NAME, "version": __version__, "rules": rules}},
            "originalUriBaseIds": {SRCROOT: {"uri": Path(root).as_uri().rstrip("/") + "/"}},
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"


def render(result: ProveResult, fmt: str, cwd: str) -> str:
    """``result`` in ``fmt`` (``text``, ``json`` or ``sarif``)."""
    if fmt == "json":
        return render_json(result)
    if fmt == "sarif":
        return render_sarif(result, cwd)
    return render_text(result)

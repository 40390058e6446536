"""``prove``'s report: text (one line per difference, then a table per module), JSON, SARIF."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lint_gpu_tests import __version__
from lint_gpu_tests.output import SARIF_SCHEMA, SRCROOT, TOOL_NAME, repository_root, sarif_artifact
from lint_gpu_tests.prove.compare import ModuleResult, Status
from lint_gpu_tests.prove.pipeline import ProveResult

#: SARIF rule ids: one per way a module can fail its proof.
SARIF_RULES = {
    "prove-differs": "The fixed module behaves differently from the original",
    "prove-not-run": "The module's proof did not complete",
}


def _names(tests: list[str]) -> str:
    return ", ".join(tests) if tests else "none"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def render_text(result: ProveResult) -> str:
    """One line per difference (``module: test: field: before, after``), one per module not
    run, then the table: module, verdict, tests, leaked before / after, texts by outcome
    only, seconds; then the totals and what ``--apply`` wrote."""
    lines: list[str] = []
    for m in result.modules:
        lines += [d.describe() for d in m.differences]
        if m.status is Status.NOT_RUN:
            lines.append(f"{m.module}: not run: {m.note}")
    for path, message in result.errors:
        lines.append(f"{path}: the fixer failed: {message}")
    if lines:
        lines.append("")
    rows = [("module", "verdict", "tests", "leaked before", "leaked after",
             "texts by outcome only", "seconds")]
    for m in result.modules:
        recorded = f" ({', '.join(m.from_recordings)} recorded)" if m.from_recordings else ""
        rows.append((m.module, m.status.value, str(len(m.tests)), str(len(m.leaked_before)),
                     str(len(m.leaked_after)), str(len(m.outcome_only)),
                     f"{m.seconds:.1f}{recorded}"))
    if result.modules:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for index, row in enumerate(rows):
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                         .rstrip())
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines.append("")
    counts = {s: sum(1 for m in result.modules if m.status is s) for s in Status}
    lines.append(
        f"{_plural(len(result.modules), 'module')} proven: {counts[Status.SAME]} same, "
        f"{counts[Status.LEAK_FIXED]} leaked before and fixed after, "
        f"{counts[Status.DIFFERS]} differ, {counts[Status.NOT_RUN]} not run; "
        f"{_plural(len(result.unchanged), 'test module')} unchanged by the fix; "
        f"{result.seconds:.0f} s.")
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
    tests, leaks, ``outcome_only``, seconds, ``from_recordings``, ``note``), ``unchanged``,
    ``changed``, ``applied``, ``withheld``, ``errors``, ``seconds``, ``proven``."""
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
    }
    return json.dumps(data, indent=2, default=str) + "\n"


def render_sarif(result: ProveResult, cwd: str) -> str:
    """A SARIF 2.1.0 log: one result per difference (``prove-differs``, at its module) and
    per module not run (``prove-not-run``, a warning)."""
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
        if m.status is Status.NOT_RUN:
            add("prove-not-run", "warning", m.module, f"{m.module}: not run: {m.note}")
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

"""Render the differential runs' figures (``tests/e2e/work/differential.json``, written by
``test_differential.py``) as the Markdown tables of ``docs/e2e.md``.

``python tests/e2e/report.py`` prints them; paste them under "Differential runs".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

WORK = Path(__file__).resolve().parent / "work"


def _names(tests: list[str]) -> str:
    return ", ".join(f"`{t}`" for t in tests) if tests else "none"


def render(summary: dict[str, Any]) -> str:
    """Markdown for one ``differential.json``."""
    seconds = summary["seconds"]
    rerun, recorded = summary.get("rerun", []), summary.get("from_recordings", [])
    lines = [
        f"Inner pytest sessions, one per module and variant (run now, or as recorded): "
        f"original {seconds['before']:.0f} s, `--fix` {seconds['safe']:.0f} s, `--fix "
        f"--unsafe-fixes` {seconds['unsafe']:.0f} s (only the modules where it writes something "
        f"else); {seconds.get('wall', 0):.0f} s wall for the differential, {len(rerun)} modules "
        f"run on the real engine, {len(recorded)} taken from their recordings.",
        "",
        "| module | engines built (before / safe / unsafe) | tests starting with a leaked engine, "
        "before | after `--fix` | behaviour differences after `--fix` | left after `--fix` |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for module, entry in summary["modules"].items():
        built = entry["engines_built"]
        unsafe = built.get("unsafe", "–")
        diffs = entry["safe_differences"]
        diff_text = "none" if not diffs else "; ".join(
            f"`{d['test']}` {d['field']}" for d in diffs)
        lines.append(
            f"| `{module}` | {built['before']} / {built['safe']} / {unsafe} | "
            f"{_names(entry['leaked_before'])} | {_names(entry['leaked_after_safe'])} | "
            f"{diff_text} | {', '.join(entry['left_after_safe']) or 'nothing'} |")
    unsafe_rows = [(m, e) for m, e in summary["modules"].items() if "unsafe_differences" in e]
    if unsafe_rows:
        lines += ["", "With `--unsafe-fixes`:", "",
                  "| module | leaked after | behaviour differences |", "| --- | --- | --- |"]
        for module, entry in unsafe_rows:
            diffs = entry["unsafe_differences"]
            diff_text = "none" if not diffs else "; ".join(
                f"`{d['test']}` {d['field']}: {d['before']!r} → {d['after']!r}" for d in diffs)
            lines.append(f"| `{module}` | {_names(entry['leaked_after_unsafe'])} | "
                         f"{diff_text} |")
    return "\n".join(lines)


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else WORK / "differential.json"
    print(render(json.loads(path.read_text())))

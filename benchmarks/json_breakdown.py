"""Where a JSON report's time goes, in one process (run by hand, not part of the tests).

Usage: ``python benchmarks/json_breakdown.py DIR [--format json|sarif|concise]``, from the
repository root after ``make install-test``; DIR is a tree such as ``benchmarks/gen_tree.py``
writes.

Runs ``check --no-cache --jobs 1 --output-format FORMAT DIR`` inside this process (output
thrown away) with timers around the parts of the run, and prints the CPU seconds (this
process's: no worker runs) of each part, the number of calls and the time per call:
importing the codemod driver (LibCST and the codemods, once a process), each file's check
(``run._checked_bytes``), and, for the files with a fix to show, the fix loop's parts: the
codemod pass (``driver.apply_fixes``: LibCST's parse, the rewrite, the printing), the parse
of the new text and its check (``fixloop.parse_source`` / ``fixloop.check_module``), and the
edits (``run.pass_edits``, ``run.assign_edits``), then the report (``output.render``). The
parts nest: ``run._edits`` holds the fix loop and the edits.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

SECONDS: Counter[str] = Counter()
CALLS: Counter[str] = Counter()


def timed(module: Any, name: str, label: str) -> None:
    """Replace ``module.name`` by a wrapper adding its CPU time to ``label``'s."""
    function: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SECONDS[label] += time.process_time() - start
            CALLS[label] += 1

    setattr(module, name, wrapper)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree")
    parser.add_argument("--format", default="json", choices=["json", "sarif", "concise"])
    args = parser.parse_args(argv)
    start = time.process_time()
    import lint_gpu_tests.fixing.fixloop as fixloop
    import lint_gpu_tests.report.present as present
    import lint_gpu_tests.running.run as run
    from lint_gpu_tests.interfaces.cli import main as cli

    if args.format != "concise":
        before = time.process_time()
        import lint_gpu_tests.codemods.driver as driver

        SECONDS["import the codemod driver (LibCST)"] = time.process_time() - before
        CALLS["import the codemod driver (LibCST)"] = 1
        timed(driver, "apply_fixes", "fix loop: codemod pass (driver.apply_fixes)")
        timed(fixloop, "parse_source", "fix loop: parse of the new text")
        timed(fixloop, "check_module", "fix loop: check of the new text")
        timed(run, "pass_edits", "edits from the passes (edits.pass_edits)")
        timed(run, "assign_edits", "edits to violations (edits.assign_edits)")
        timed(run, "_edits", "files with a fix to show, all told (run._edits)")
    timed(run, "_checked_bytes", "check of each admitted file (run._checked_bytes)")
    timed(present, "render", "report (output.render)")
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
        cli(["check", "--no-cache", "--jobs", "1", "--output-format", args.format, args.tree])
    SECONDS["the whole run, imports included"] = time.process_time() - start
    CALLS["the whole run, imports included"] = 1
    print(f"| part (`--output-format {args.format}`, `--jobs 1`) | CPU s | calls | ms a call |")
    print("| --- | ---: | ---: | ---: |")
    for label, seconds in sorted(SECONDS.items(), key=lambda item: -item[1]):
        print(f"| {label} | {seconds:.3f} | {CALLS[label]} | "
              f"{1000 * seconds / CALLS[label]:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

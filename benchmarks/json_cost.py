"""Benchmark what a JSON or SARIF report costs beyond a plain check (run by hand, not part of
the tests).

Usage (from the repository root, after ``make install-test``)::

    .venv/bin/python benchmarks/json_cost.py --rounds 7 [--baseline /path/to/other/checkout]

A JSON or SARIF report carries each violation's fix as edits, so the run fixes (without
writing) every file with a fix to show; a plain ``check`` prints the concise format and never
imports LibCST. On the generated tree (``benchmarks/gen_tree.py``, 3,040 files by default: 304
of them with fixes to show) these commands run in alternating rounds (round 1 runs each once,
then round 2, ...), so drifting load on a shared machine hits them alike:

* ``check --no-cache -q .`` (plain), ``check --no-cache --output-format json .`` and
  ``check --no-cache --output-format sarif .`` of this checkout (``python -m lint_gpu_tests``
  with ``PYTHONPATH`` set to it), and of ``--baseline CHECKOUT`` when given;
* ``benchmarks/libcst_roundtrip.py`` over the files with a fix to show (import LibCST, then
  ``libcst.parse_module(source).code`` once per file, the loop timed inside the process): what
  a fix that parses and prints each file with LibCST adds at the least.

The untimed warm-up runs name the files with fixes to show (the JSON report's files with
edits) and compare the baseline's JSON and SARIF output with ours byte for byte. The report
gives the medians of each command (wall and CPU: user + system of the command and the workers
it waited for) and the ratios JSON / plain and SARIF / plain taken round by round (median,
min - max), so that every ratio comes from runs of the same rounds. The floor row is (plain +
the reference's loop) / plain: no fix that parses and prints every file with a fix to show
with LibCST can cost less, before LibCST's import and the rewrite itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fix_cost import Reference, captured, prepare_checkouts, spread
from run import Command

HERE = Path(__file__).resolve().parent
FORMATS = ("json", "sarif")


def edited_files(report: str) -> list[str]:
    """The files of a JSON report whose violations carry edits, in report order."""
    found: dict[str, None] = {}
    for item in json.loads(report):
        if item["fix"] is not None and item["fix"]["edits"]:
            found[item["filename"]] = None
    return list(found)


def ratio_line(label: str, over: Command, under: Command) -> str:
    """``label``: the per-round ratios of ``over`` to ``under`` (median, spread), wall and
    CPU."""
    wall = [a / b for a, b in zip(over.times, under.times, strict=True)]
    cpu = [a / b for a, b in zip(over.cpu, under.cpu, strict=True)]
    return (f"- {label}: **{statistics.median(wall):.2f}x** wall (per round min / median / max: "
            f"{spread(wall)}); CPU {statistics.median(cpu):.2f}x ({spread(cpu)})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generated", type=int, default=3040,
                        help="files in the generated tree [default: 3040]")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds [default: 7]")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout: its commands in the same rounds")
    parser.add_argument("--jobs", type=int, help="passed to every command as --jobs")
    parser.add_argument("--out", type=Path, help="also write the Markdown report here")
    args = parser.parse_args(argv)

    checkouts, heads = prepare_checkouts(args.baseline)
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    lines = [f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {'; '.join(heads)}; "
             f"{args.generated} generated files, {args.rounds} rounds, jobs "
             f"{args.jobs or 'default'}", ""]
    print(lines[0], flush=True)
    with tempfile.TemporaryDirectory(prefix="gtl-json-bench-") as tmp:
        scratch = Path(tmp)
        tree = scratch / "generated"
        subprocess.run([sys.executable, str(HERE / "gen_tree.py"), str(tree),
                        str(args.generated)], check=True)
        commands: dict[tuple[str, str], Command] = {}
        outputs: dict[tuple[str, str], str] = {}
        for checkout in checkouts:
            for fmt in ("plain", *FORMATS):
                options = ["-q"] if fmt == "plain" else ["--output-format", fmt]
                command = Command(f"{checkout.label} {fmt}",
                                  checkout.argv("check", "--no-cache", *jobs, *options, "."),
                                  tree, env=checkout.env)
                commands[checkout.label, fmt] = command
                outputs[checkout.label, fmt] = captured(command).stdout  # warm-up
        fixed = edited_files(outputs["ours", "json"])
        listing = scratch / "fixed.txt"
        listing.write_text("".join(f"{path}\n" for path in fixed))
        reference = Reference([sys.executable, str(HERE / "libcst_roundtrip.py"),
                               str(listing)], tree)
        reference.run()  # warm-up
        reference.wall.clear()
        reference.cpu.clear()
        reference.process.clear()
        for _ in range(args.rounds):
            for command in commands.values():
                command.run()
            reference.run()
        lines += [f"{len(fixed)} files with fixes to show.", "",
                  "| command | median s | min s | max s | median CPU s |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for command in commands.values():
            lines.append(f"| {command.label} | {command.median:.3f} | {min(command.times):.3f} "
                         f"| {max(command.times):.3f} | {command.median_cpu:.3f} |")
        lines.append(f"| LibCST parse + print of those files (in process) | "
                     f"{statistics.median(reference.wall):.3f} | {min(reference.wall):.3f} | "
                     f"{max(reference.wall):.3f} | {statistics.median(reference.cpu):.3f} |")
        lines.append("")
        for checkout in checkouts:
            plain = commands[checkout.label, "plain"]
            for fmt in FORMATS:
                lines.append(ratio_line(f"{checkout.label}: {fmt} / plain",
                                        commands[checkout.label, fmt], plain))
        ours = commands["ours", "plain"]
        floor = [(p + r) / p for p, r in zip(ours.times, reference.wall, strict=True)]
        floor_cpu = [(p + r) / p for p, r in zip(ours.cpu, reference.cpu, strict=True)]
        lines.append(f"- floor, (ours plain + LibCST parse + print) / ours plain: "
                     f"{statistics.median(floor):.2f}x wall, "
                     f"{statistics.median(floor_cpu):.2f}x CPU")
        for checkout in checkouts[1:]:
            for fmt in FORMATS:
                lines.append(ratio_line(f"ours / {checkout.label}, {fmt}", commands["ours", fmt],
                                        commands[checkout.label, fmt]))
                same = outputs["ours", fmt] == outputs[checkout.label, fmt]
                lines.append(f"- {checkout.label}'s {fmt} output is "
                             f"{'byte-identical to' if same else 'DIFFERENT from'} ours")
    print("\n".join(lines[1:]), flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark what fixing costs beyond checking (run by hand, not part of the tests).

Usage (from the repository root, after ``make install-test``)::

    .venv/bin/python benchmarks/fix_cost.py --tree /path/to/vllm-ascend/tests \\
        --tree /path/to/vllm-gaudi/tests --baseline /path/to/older/checkout

Each tree is its own group: the real trees (``--tree``, repeatable) are copied into a scratch
directory; the generated tree (``--generated N`` files from ``benchmarks/gen_tree.py``, 3,040 by
default: 304 files to fix, 1,824 violations) is written there. For each group these commands run
in alternating rounds (round 1 runs each once, then round 2, ...), so drifting load on a shared
machine hits them alike:

* ``check --no-cache PATHS`` and ``check --diff --no-cache PATHS`` of this checkout (``python -m
  lint_gpu_tests`` with ``PYTHONPATH`` set to it), and of ``--baseline CHECKOUT`` when given;
* ``benchmarks/libcst_roundtrip.py`` over the files the diff fixes (start Python, import LibCST,
  ``libcst.parse_module(source).code`` once per file, the loop timed inside the process).

The untimed warm-up run of ``check --diff`` names the fixed files (its ``+++`` lines); the
baseline's warm-up diff is compared with ours byte for byte. The report gives, from the medians
and round by round (min / median / max of the per-round ratios):

* **fix cost per fixed file**: (``check --diff`` - ``check``) / fixed files, against LibCST's
  parse and print per fixed file (the roundtrip's loop / fixed files). Goal <= 3x. Ours
  includes importing LibCST (a ``check`` never imports it); the reference does not, and the
  report prints its process's start, import and reads apart;
* **``check --diff`` / ``check``**: goal <= 3x on the 3,040-file generated tree;
* with ``--baseline``: ours / baseline for both commands;
* with ``--copies K``: each real tree is also timed as K copies of itself in one tree (copies
  2 to K end each file with a ``# copy N`` comment, so that no two files share their bytes),
  in the same rounds, and the **marginal fix cost per fixed file** is the slope ((``check
  --diff`` - ``check``) on K copies less that on one) / ((K - 1) x fixed files), against
  LibCST's parse and print per fixed file: what each more file to fix costs, free of the
  costs a run pays once (importing LibCST and the codemods, starting the workers).

CPU figures (user + system seconds of the command and the workers it waited for; the
reference's loop in process) are printed beside the wall ones: on a shared machine a run that
is mostly one busy process (today's ``check --diff``) loses more wall time to other jobs than a
run spread over workers, so the wall ratios move with the load. Today's ``check --diff`` takes
about 70 s a run on the generated tree on a quiet machine (140 s on a busy one), so the default
run (the generated tree, 3 rounds after the warm-up) takes 5 to 10 minutes; ``--generated 0``
times only the real trees, ``--generated-rounds`` fewer rounds.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from run import Command

HERE = Path(__file__).resolve().parent
FIXED_FILE = re.compile(r"^\+\+\+ (.+?)(?:\t.*)?$", re.MULTILINE)
FIXED_COUNT = re.compile(r"Would fix (\d+) violations?")
ROUNDTRIP = re.compile(r"files ([0-9.]+) s wall ([0-9.]+) s cpu")


@dataclass
class Checkout:
    """A checkout of gpu-test-lint, run as ``python -m lint_gpu_tests`` from its own tree."""

    label: str
    root: Path

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "lint_gpu_tests", *args]

    @property
    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.root)}


@dataclass
class Reference:
    """``libcst_roundtrip.py`` over the fixed files: per run, the in-process wall and CPU
    seconds of its parse-and-print loop and the whole process's wall seconds."""

    argv: list[str]
    cwd: Path
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    process: list[float] = field(default_factory=list)

    def run(self) -> None:
        start = time.perf_counter()
        out = subprocess.run(self.argv, cwd=self.cwd, capture_output=True, text=True,
                             check=False)
        self.process.append(time.perf_counter() - start)
        found = ROUNDTRIP.search(out.stdout)
        if out.returncode or found is None:
            raise SystemExit(f"libcst_roundtrip.py failed: {out.stdout}{out.stderr[-2000:]}")
        self.wall.append(float(found.group(1)))
        self.cpu.append(float(found.group(2)))


@dataclass
class Group:
    """One tree and its commands: per checkout a ``check`` and a ``check --diff``, and the
    LibCST reference over the fixed files."""

    name: str
    cwd: Path
    rounds: int
    reference: Reference
    check: dict[str, Command] = field(default_factory=dict)
    diff: dict[str, Command] = field(default_factory=dict)
    fixed: list[str] = field(default_factory=list)
    violations: str = "?"
    notes: list[str] = field(default_factory=list)

    @property
    def commands(self) -> list[Command]:
        return [c for label in self.check for c in (self.check[label], self.diff[label])]

    def run_round(self) -> None:
        """Each command once, then the reference."""
        for command in self.commands:
            command.run()
        if self.fixed:
            self.reference.run()


def captured(command: Command) -> subprocess.CompletedProcess[str]:
    """Run ``command`` once, untimed, keeping its output (the warm-up run)."""
    proc = subprocess.run(command.argv, cwd=command.cwd, capture_output=True, text=True,
                          env={**os.environ, **command.env} if command.env else None,
                          check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{command.label}: exit {proc.returncode}: {' '.join(command.argv)}\n"
                         f"{proc.stderr[-2000:]}")
    return proc


def build_group(name: str, cwd: Path, paths: Sequence[str], rounds: int,
                checkouts: Sequence[Checkout], options: Sequence[str], scratch: Path) -> Group:
    """The group's commands, after the warm-up run of each (which names the fixed files)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")
    listing = scratch / f"{slug}-fixed.txt"
    reference = Reference([sys.executable, str(HERE / "libcst_roundtrip.py"), str(listing)],
                          cwd)
    group = Group(name, cwd, rounds, reference)
    outputs: dict[str, str] = {}
    for checkout in checkouts:
        check = checkout.argv("check", "--no-cache", *options, *paths)
        group.check[checkout.label] = Command(f"{checkout.label} check", check, cwd,
                                              env=checkout.env)
        group.diff[checkout.label] = Command(f"{checkout.label} check --diff",
                                             [*check[:4], "--diff", *check[4:]], cwd,
                                             env=checkout.env)
        proc = captured(group.diff[checkout.label])
        outputs[checkout.label] = proc.stdout
        if checkout is checkouts[0]:
            group.fixed = FIXED_FILE.findall(proc.stdout)
            found = FIXED_COUNT.search(proc.stderr)
            group.violations = found.group(1) if found else "?"
        captured(group.check[checkout.label])
    for label, text in outputs.items():
        if label != checkouts[0].label:
            same = "byte-identical to" if text == outputs[checkouts[0].label] else "DIFFERS from"
            group.notes.append(f"{label}'s `check --diff` output is {same} ours")
    listing.write_text("".join(f"{path}\n" for path in group.fixed))
    if group.fixed:
        reference.run()  # warm-up
        reference.wall.clear()
        reference.cpu.clear()
        reference.process.clear()
    return group


def spread(values: Sequence[float]) -> str:
    """``min / median / max`` of per-round ratios."""
    return (f"{min(values):.2f}x / {statistics.median(values):.2f}x / "
            f"{max(values):.2f}x")


def report(group: Group) -> list[str]:
    """The group's table and ratios, as Markdown lines."""
    n = len(group.fixed)
    ref = group.reference
    lines = [f"### {group.name}", "",
             f"{n} files fixed ({group.violations} violations), {group.rounds} rounds.", "",
             "| command | median s | min s | max s | median CPU s |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for command in group.commands:
        lines.append(f"| {command.label} | {command.median:.3f} | {min(command.times):.3f} | "
                     f"{max(command.times):.3f} | {command.median_cpu:.3f} |")
    if ref.wall:
        lines.append(f"| LibCST parse + print of the fixed files (in process) | "
                     f"{statistics.median(ref.wall):.3f} | {min(ref.wall):.3f} | "
                     f"{max(ref.wall):.3f} | {statistics.median(ref.cpu):.3f} |")
    lines.append("")
    if ref.wall:
        per_lib = statistics.median(ref.wall) / n
        start = statistics.median(p - w for p, w in zip(ref.process, ref.wall, strict=True))
        lines.append(f"- LibCST parse + print per fixed file: {1000 * per_lib:.1f} ms "
                     f"(CPU {1000 * statistics.median(ref.cpu) / n:.1f} ms); the reference "
                     f"process's start, LibCST import and reads: {start:.3f} s")
    for label in group.check:
        check, diff = group.check[label], group.diff[label]
        pairs = zip(diff.times, check.times, strict=True)
        line = (f"- {label}: `check --diff` / `check` **{diff.median / check.median:.2f}x** "
                f"(per round min / median / max: {spread([d / c for d, c in pairs])}; CPU "
                f"{diff.median_cpu / check.median_cpu:.2f}x)")
        if ref.wall:
            per_fix = (diff.median - check.median) / n
            per_fix_cpu = (diff.median_cpu - check.median_cpu) / n
            rounds = [(d - c) / w for d, c, w
                      in zip(diff.times, check.times, ref.wall, strict=True)]
            line += (f"; fix cost {1000 * per_fix:.1f} ms per fixed file = "
                     f"**{per_fix * n / statistics.median(ref.wall):.1f}x** LibCST's parse + "
                     f"print (per round: {spread(rounds)}; CPU "
                     f"{per_fix_cpu * n / statistics.median(ref.cpu):.1f}x)")
        lines.append(line)
    labels = list(group.check)
    for other in labels[1:]:
        ours = labels[0]
        lines.append(f"- {ours} / {other}: `check` "
                     f"{group.check[ours].median / group.check[other].median:.2f}x, "
                     f"`check --diff` {group.diff[ours].median / group.diff[other].median:.2f}x")
    lines += [f"- {note}" for note in group.notes]
    return [*lines, ""]


def slope_report(one: Group, many: Group, copies: int) -> list[str]:
    """The marginal fix cost per fixed file, from the tree (``one``) and ``copies`` copies of
    it (``many``), timed in the same rounds."""
    n = len(one.fixed)
    if not n or not one.reference.wall or len(many.fixed) != copies * n:
        return [f"- slope: not computed ({len(one.fixed)} and {len(many.fixed)} fixed files)",
                ""]
    per_lib = statistics.median(one.reference.wall) / n
    lines = []
    for label in one.check:
        extra = [((dk - ck) - (d1 - c1)) / ((copies - 1) * n) for d1, c1, dk, ck in zip(
            one.diff[label].times, one.check[label].times, many.diff[label].times,
            many.check[label].times, strict=True)]
        marginal = ((many.diff[label].median - many.check[label].median) -
                    (one.diff[label].median - one.check[label].median)) / ((copies - 1) * n)
        lines.append(f"- {label}: marginal fix cost {1000 * marginal:.1f} ms per fixed file "
                     f"(slope from 1 to {copies} copies) = **{marginal / per_lib:.1f}x** "
                     f"LibCST's parse + print (per round: "
                     f"{spread([e / per_lib for e in extra])})")
    return [*lines, ""]


def prepare_checkouts(baseline: Path | None) -> tuple[list[Checkout], list[str]]:
    """This checkout and ``baseline``'s (when given), each package compiled, and a line
    naming each checkout and its commit."""
    checkouts = [Checkout("ours", HERE.parent)]
    if baseline is not None:
        checkouts.append(Checkout("baseline", baseline.resolve()))
    # This container sets PYTHONDONTWRITEBYTECODE=1: compile once, or every run recompiles.
    for checkout in checkouts:
        compileall.compile_dir(str(checkout.root / "lint_gpu_tests"), quiet=1)
    heads = []
    for checkout in checkouts:
        head = subprocess.run(["git", "-C", str(checkout.root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=False).stdout.strip()
        heads.append(f"{checkout.label} {checkout.root} at {head or '?'}")
    return checkouts, heads


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], type=Path,
                        help="a real tests/ tree (repeatable; each its own group); copied")
    parser.add_argument("--generated", type=int, default=3040,
                        help="files in the generated tree (0: none) [default: 3040]")
    parser.add_argument("--rounds", type=int, default=5, help="rounds for each real tree")
    parser.add_argument("--generated-rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path,
                        help="another checkout: its check and check --diff in the same rounds")
    parser.add_argument("--jobs", type=int, help="passed to both commands as --jobs")
    parser.add_argument("--unsafe-fixes", action="store_true",
                        help="pass --unsafe-fixes to both commands")
    parser.add_argument("--copies", type=int, default=1,
                        help="also time K copies of each real tree, for the marginal fix cost")
    parser.add_argument("--out", type=Path, help="also write the Markdown report here")
    args = parser.parse_args(argv)

    checkouts, heads = prepare_checkouts(args.baseline)
    options = [*(["--jobs", str(args.jobs)] if args.jobs else []),
               *(["--unsafe-fixes"] if args.unsafe_fixes else [])]
    lines = [f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {'; '.join(heads)}; "
             f"options: {' '.join(options) or 'none'}", ""]
    print(lines[0], flush=True)
    with tempfile.TemporaryDirectory(prefix="gtl-fix-bench-") as tmp:
        scratch = Path(tmp)
        specs: list[tuple[str, Path, list[str], int, int]] = []
        for tree in args.tree:
            name = f"{tree.resolve().parent.name}-{tree.name}"
            shutil.copytree(tree, scratch / "real" / name)
            count = sum(1 for _ in (scratch / "real" / name).rglob("*.py"))
            specs.append((f"{name} ({count} files)", scratch / "real", [name], args.rounds, 1))
            if args.copies > 1:
                many = scratch / f"copies-{name}"
                for k in range(1, args.copies + 1):
                    shutil.copytree(tree, many / f"copy{k}")
                    for path in (many / f"copy{k}").rglob("*.py") if k > 1 else ():
                        with path.open("ab") as handle:
                            handle.write(f"\n# copy {k}\n".encode())
                specs.append((f"{name} x{args.copies} ({count * args.copies} files)", many,
                              ["."], args.rounds, args.copies))
        if args.generated:
            gen = scratch / "generated"
            subprocess.run([sys.executable, str(HERE / "gen_tree.py"), str(gen),
                            str(args.generated)], check=True)
            specs.append((f"generated tree ({args.generated} files)", gen, ["."],
                          args.generated_rounds, 1))
        index = 0
        while index < len(specs):
            batch = [specs[index]]
            if index + 1 < len(specs) and specs[index + 1][4] > 1:
                batch.append(specs[index + 1])  # a tree and its copies: the same rounds
            groups = [build_group(name, cwd, paths, rounds, checkouts, options, scratch)
                      for name, cwd, paths, rounds, _ in batch]
            for _ in range(batch[0][3]):
                for group in groups:
                    group.run_round()
            rows = [row for group in groups for row in report(group)]
            if len(groups) == 2:
                rows += [f"### {batch[0][0]}: the slope to {batch[1][4]} copies", "",
                         *slope_report(groups[0], groups[1], batch[1][4])]
            lines += rows
            print("\n".join(rows), flush=True)
            index += len(batch)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark gpu-test-lint against ruff and flake8 (run by hand; not part of the tests).

Usage (from the repository root, after ``make install-test``)::

    .venv/bin/python benchmarks/run.py --tree /path/to/vllm-ascend/tests --generated 0 \\
        --no-flake8 --slope

What it times, in one process and alternating (round 1 runs every command once, then round 2,
...), so that drifting machine load hits every command alike:

* ``gpu-test-lint check`` cold (``--no-cache``) and warm (cache filled);
* the floors a Python checker cannot beat, as commands of their own:
  ``benchmarks/floor_cold.py`` (start Python, read every file, ``ast.parse`` those naming an
  engine or a runner; with ``--environ`` also those naming ``os.environ``, which GPU008 needs;
  with ``--importers`` also those importing an engine builder of a module it parsed)
  and ``benchmarks/floor_warm.py`` (start Python, read and hash every file); the report gives
  ours / floor for both, with the goals (cold <= 1.5x, warm <= 2x);
* ``ruff check --select E9,F`` cold and warm (its own cache, emptied the same way);
* with ``--baseline CHECKOUT``, our cold and warm runs from that checkout too
  (``PYTHONPATH``; its package compiled first), for before/after ratios in the same rounds;
* with ``--slope``, cold runs (ours, ``--jobs 1``, the baseline's, the cold floor) on five
  copies of the real trees too (copies 1 to 4 end each file with a comment naming the copy, so
  no two files share their bytes): the cold per-file cost is the slope
  (t(5T) - t(T)) / (4 files(T)), ours against the floor's (the goal: <= 1.2x), free of
  the start-up that a whole-run ratio counts;
* flake8 with the gpu-test-lint plugin (``--extend-select GPU``) and without it (the plugin
  dropped from flake8's plugin list by ``benchmarks/flake8_toggle.py``), both with flake8's
  default checks, so the difference is the plugin's cost.

The real trees are copied into a scratch directory first (their own caches and configs stay
untouched); the generated tree (``benchmarks/gen_tree.py``) is written there too. For each
command it reports the median wall time, the ratio to its baseline, and the peak resident
memory of the largest process (``os.wait4``'s ``ru_maxrss``: for a run with worker processes
that is the largest worker or the parent, not their sum; ``--jobs 1`` rows give the
single-process figure). With ``--scaling`` it also times cold single-process runs on the first
quarter, half and all of the generated tree to show the growth is linear.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


@dataclass
class Command:
    """One timed command: ``argv`` run in ``cwd``; ``setup`` runs untimed before each run."""

    label: str
    argv: list[str]
    cwd: Path
    clear: Path | None = None
    env: dict[str, str] | None = None
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak_kib: int = 0

    def run(self) -> None:
        if self.clear is not None:
            shutil.rmtree(self.clear, ignore_errors=True)
        start = time.perf_counter()
        proc = subprocess.Popen(self.argv, cwd=self.cwd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL,
                                env={**os.environ, **self.env} if self.env else None)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{self.label}: exit {proc.returncode}: {' '.join(self.argv)}")
        self.times.append(elapsed)
        self.cpu.append(usage.ru_utime + usage.ru_stime)  # worker processes included
        self.peak_kib = max(self.peak_kib, usage.ru_maxrss)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def median_cpu(self) -> float:
        """Median CPU seconds (user + system, of the command and the workers it waited for):
        less sensitive than wall time to other jobs on a shared machine."""
        return statistics.median(self.cpu)


STARTUP_IMPORTS = ("import os, lint_gpu_tests.interfaces.cli, lint_gpu_tests.api, "
                   "lint_gpu_tests.checking.checker, "
                   "lint_gpu_tests.rules; os._exit(0)")
"""What a cold run imports before it reads a file (the CLI, click, the checker and the
rules), left the way the CLI leaves (``os._exit``, no teardown)."""


def commands_for(label: str, paths: Sequence[str], cwd: Path, scratch: Path,
                 flake8: bool, jobs1: bool, baseline: Path | None = None,
                 copies: tuple[Path, list[str]] | None = None) -> list[Command]:
    """The group's commands; ``copies`` (a directory and the paths of five copies of the
    tree in it) adds the cold runs of the slope rows."""
    gpu_cache = scratch / f"gpu-cache-{label}"
    ruff_cache = scratch / f"ruff-cache-{label}"
    gpu = [str(BIN / "gpu-test-lint"), "check", "--exit-zero", "-q", "--cache-dir",
           str(gpu_cache), *paths]
    ruff = [str(BIN / "ruff"), "check", "--select", "E9,F", "--exit-zero", "-q",
            "--cache-dir", str(ruff_cache), *paths]
    floor_cold = [sys.executable, str(HERE / "floor_cold.py"), *paths]
    out = [
        Command(f"{label}: gpu-test-lint cold", [*gpu[:2], "--no-cache", *gpu[2:]], cwd),
        Command(f"{label}: floor cold", floor_cold, cwd),
        Command(f"{label}: floor cold + environ", [*floor_cold[:2], "--environ", *paths], cwd),
        Command(f"{label}: floor cold + importers", [*floor_cold[:2], "--environ",
                                                     "--importers", *paths], cwd),
        Command(f"{label}: floor cold + one walk", [*floor_cold[:2], "--walk", *paths], cwd),
        Command(f"{label}: floor cold + importers + one walk",
                [*floor_cold[:2], "--environ", "--importers", "--walk", *paths], cwd),
        Command(f"{label}: python start", [sys.executable, "-c", "pass"], cwd),
        Command(f"{label}: gpu-test-lint imports", [sys.executable, "-c", STARTUP_IMPORTS],
                cwd),
        Command(f"{label}: ruff cold", ruff, cwd, clear=ruff_cache),
        Command(f"{label}: gpu-test-lint warm", gpu, cwd),
        Command(f"{label}: floor warm", [sys.executable, str(HERE / "floor_warm.py"), *paths],
                cwd),
        Command(f"{label}: ruff warm", ruff, cwd),
    ]
    if jobs1:
        out.append(Command(f"{label}: gpu-test-lint cold --jobs 1",
                           [*gpu[:2], "--no-cache", "--jobs", "1", *gpu[2:]], cwd))
    if baseline is not None:
        # The same commands from another checkout, in the same rounds: ``PYTHONPATH`` comes
        # before the editable install's finder, and ``python -m lint_gpu_tests`` runs that
        # checkout's own entry point (the installed script names this checkout's).
        env = {"PYTHONPATH": str(baseline)}
        base = [sys.executable, "-m", "lint_gpu_tests", *gpu[1:5],
                str(scratch / f"baseline-cache-{label}"), *paths]
        out += [
            Command(f"{label}: baseline cold", [*base[:4], "--no-cache", *base[4:]], cwd,
                    env=env),
            Command(f"{label}: baseline warm", base, cwd, env=env),
        ]
        if jobs1:
            out.append(Command(f"{label}: baseline cold --jobs 1",
                               [*base[:4], "--no-cache", "--jobs", "1", *base[4:]], cwd,
                               env=env))
    if copies is not None:
        where, five = copies
        out += [
            Command(f"{label}: gpu-test-lint cold x5", [*gpu[:2], "--no-cache", *gpu[2:5],
                                                        str(scratch / f"x5-cache-{label}"),
                                                        *five], where),
            Command(f"{label}: floor cold x5", [*floor_cold[:2], *five], where),
            Command(f"{label}: floor cold + environ x5", [*floor_cold[:2], "--environ", *five],
                    where),
            Command(f"{label}: floor cold + importers x5",
                    [*floor_cold[:2], "--environ", "--importers", *five], where),
            Command(f"{label}: floor cold + importers + one walk x5",
                    [*floor_cold[:2], "--environ", "--importers", "--walk", *five], where),
        ]
        if jobs1:
            out.append(Command(f"{label}: gpu-test-lint cold --jobs 1 x5",
                               [*out[-5].argv[:3], "--jobs", "1", *out[-5].argv[3:]], where))
        if baseline is not None:
            out.append(Command(f"{label}: baseline cold x5",
                               [*base[:4], "--no-cache", *base[4:7],
                                str(scratch / f"x5-baseline-cache-{label}"), *five],
                               where, env=env))
    if flake8:
        toggle = [sys.executable, str(HERE / "flake8_toggle.py")]
        out += [
            Command(f"{label}: flake8 + GPU plugin",
                    [*toggle, "on", "--extend-select", "GPU", "--exit-zero", *paths], cwd),
            Command(f"{label}: flake8 without plugin",
                    [*toggle, "off", "--exit-zero", *paths], cwd),
        ]
    return out


def budget(by: dict[str, Command]) -> list[str]:
    """What the cold goal leaves for the work beyond the floor's, and what two fixed costs
    take of it: our imports beyond Python's start, and one bare walk over the parsed trees."""
    needed = ("floor cold", "floor cold + one walk", "python start", "gpu-test-lint imports")
    if not all(n in by for n in needed):
        return []
    floor = by["floor cold"].median
    left = 0.5 * floor
    imports = by["gpu-test-lint imports"].median - by["python start"].median
    walk = by["floor cold + one walk"].median - floor
    return [f"- cold budget at the goal (0.5 x floor, beyond the floor's own work): "
            f"{left:.3f} s; our imports beyond Python's start take {imports:.3f} s "
            f"({imports / left:.0%}), one bare walk over the parsed trees "
            f"{walk:.3f} s ({walk / left:.0%})"]


def five_copies(tree: Path, names: Sequence[str], where: Path) -> list[str]:
    """Write five copies of the trees ``names`` under ``tree`` into ``where``
    (``copy0/NAME`` ... ``copy4/NAME``) and return their paths. Copies 1 to 4 end each
    ``.py`` file with a comment naming the copy, so that no two copies share a file's bytes
    (the checker remembers a conftest's fixtures by its content within a run)."""
    paths = []
    for k in range(5):
        for name in names:
            target = where / f"copy{k}" / name
            shutil.copytree(tree / name, target)
            if k:
                for path in target.rglob("*.py"):
                    with path.open("ab") as handle:
                        handle.write(f"\n# copy {k}\n".encode())
            paths.append(str(target.relative_to(where)))
    return paths


def slope(by: dict[str, Command], files: int) -> list[str]:
    """Cold per-file cost from a tree and five copies of it: (t(5T) - t(T)) / (4 files(T)),
    ours and the cold floor's, from the medians and round by round."""
    if "floor cold x5" not in by:
        return []

    def per_file(name: str) -> tuple[float, list[float]]:
        one, five = by[name], by[f"{name} x5"]
        rounds = [(b - a) / (4 * files) for a, b in zip(one.times, five.times, strict=True)]
        return (five.median - one.median) / (4 * files), rounds

    def per_file_cpu(name: str) -> float:
        return (by[f"{name} x5"].median_cpu - by[name].median_cpu) / (4 * files)

    lines = []
    for floor_name in ("floor cold", "floor cold + environ", "floor cold + importers"):
        if f"{floor_name} x5" not in by:
            continue
        floor, floor_rounds = per_file(floor_name)
        floor_cpu = per_file_cpu(floor_name)
        short = floor_name.replace(" cold", "")
        lines.append(f"- cold slope, {short}: {1000 * floor:.3f} ms per file (CPU "
                     f"{1000 * floor_cpu:.3f} ms)")
        for name in ("gpu-test-lint cold", "gpu-test-lint cold --jobs 1", "baseline cold"):
            if f"{name} x5" in by:
                ours, rounds = per_file(name)
                ratios = sorted(r / f for r, f in zip(rounds, floor_rounds, strict=True)
                                if f > 0)
                lines.append(f"  - {name}: {1000 * ours:.3f} ms per file = "
                             f"**{ours / floor:.2f}x** the {short}'s (goal <= 1.2x; "
                             f"per round min / median / max: {ratios[0]:.2f}x / "
                             f"{statistics.median(ratios):.2f}x / {ratios[-1]:.2f}x; CPU "
                             f"{1000 * per_file_cpu(name):.3f} ms, "
                             f"{per_file_cpu(name) / floor_cpu:.2f}x)")
    walked = "floor cold + importers + one walk"
    if f"{walked} x5" in by and "floor cold + importers x5" in by:
        # The least any analysis of the parsed files adds: one visit of each node, in Python.
        walk, walk_rounds = per_file(walked)
        floor, floor_rounds = per_file("floor cold + importers")
        ratios = sorted(w / f for w, f in zip(walk_rounds, floor_rounds, strict=True) if f > 0)
        lines.append(f"- cold slope, floor + importers + one bare walk of each parsed tree: "
                     f"{1000 * walk:.3f} ms per file = **{walk / floor:.2f}x** the floor + "
                     f"importers' (per round median {statistics.median(ratios):.2f}x; CPU "
                     f"{per_file_cpu(walked) / per_file_cpu('floor cold + importers'):.2f}x):"
                     " the least a Python analysis of those files adds")
    return lines


def report(commands: Sequence[Command], label: str, files: int = 0) -> list[str]:
    by = {c.label.split(": ", 1)[1]: c for c in commands if c.label.startswith(label + ":")}

    def ratio(a: str, b: str, cpu: bool = False) -> str:
        if a in by and b in by:
            if cpu:
                return f"{by[a].median_cpu / by[b].median_cpu:.2f}x"
            return f"{by[a].median / by[b].median:.2f}x"
        return "-"

    lines = [f"### {label}", "",
             "| command | median s | median CPU s | runs | peak RSS MiB (largest process) |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, command in by.items():
        lines.append(f"| {name} | {command.median:.3f} | {command.median_cpu:.3f} | "
                     f"{len(command.times)} | {command.peak_kib / 1024:.0f} |")
    lines += [
        "",
        f"- cold ratio gpu-test-lint / floor: {ratio('gpu-test-lint cold', 'floor cold')}"
        f" (goal <= 1.5x); / floor + environ: "
        f"{ratio('gpu-test-lint cold', 'floor cold + environ')}",
        f"- warm ratio gpu-test-lint / floor: {ratio('gpu-test-lint warm', 'floor warm')}"
        " (goal <= 2x)",
        *budget(by),
        *slope(by, files),
        f"- CPU time ratios: cold --jobs 1 / floor "
        f"{ratio('gpu-test-lint cold --jobs 1', 'floor cold', cpu=True)}, / floor + environ "
        f"{ratio('gpu-test-lint cold --jobs 1', 'floor cold + environ', cpu=True)}; "
        f"warm / floor {ratio('gpu-test-lint warm', 'floor warm', cpu=True)}",
        f"- cold ratio gpu-test-lint / ruff: {ratio('gpu-test-lint cold', 'ruff cold')}"
        " (target <= 3x)",
        f"- warm ratio gpu-test-lint / ruff: {ratio('gpu-test-lint warm', 'ruff warm')}"
        " (target <= 1.5x)",
        *([f"- against the baseline checkout: cold "
           f"{ratio('gpu-test-lint cold', 'baseline cold')}, cold --jobs 1 "
           f"{ratio('gpu-test-lint cold --jobs 1', 'baseline cold --jobs 1')}, warm "
           f"{ratio('gpu-test-lint warm', 'baseline warm')}"] if "baseline cold" in by else []),
        f"- flake8 with plugin / without: "
        f"{ratio('flake8 + GPU plugin', 'flake8 without plugin')} (target <= 1.10x)",
        "",
    ]
    return lines


def scaling(tree: Path, scratch: Path, rounds: int) -> list[str]:
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*.py"))
    lines = ["### scaling (generated tree, cold, --jobs 1, --no-cache)", "",
             "| files | median s | ms per file | peak RSS MiB |", "| ---: | ---: | ---: | ---: |"]
    for fraction in (4, 2, 1):
        subset = files[: len(files) // fraction]
        listing = scratch / f"subset-{fraction}"
        listing.mkdir(exist_ok=True)
        for name in subset:
            target = listing / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                os.link(tree / name, target)
        cmd = Command(f"scale {len(subset)}", [str(BIN / "gpu-test-lint"), "check", "-q",
                                               "--exit-zero", "--no-cache", "--jobs", "1", "."],
                      listing)
        for _ in range(rounds):
            cmd.run()
        lines.append(f"| {len(subset)} | {cmd.median:.2f} | "
                     f"{1000 * cmd.median / len(subset):.3f} | {cmd.peak_kib / 1024:.0f} |")
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], type=Path,
                        help="a real tests/ tree (repeatable); copied into the scratch dir")
    parser.add_argument("--generated", type=int, default=20000,
                        help="files in the generated tree (0: none)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--generated-rounds", type=int, default=3)
    parser.add_argument("--no-flake8-generated", action="store_true",
                        help="skip flake8 on the generated tree (slow)")
    parser.add_argument("--no-flake8", action="store_true", help="skip the flake8 rows")
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--slope", action="store_true",
                        help="also time cold runs on five copies of the real trees: the "
                             "per-file slope against the floor's")
    parser.add_argument("--out", type=Path, help="also write the Markdown report here")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout: its cold and warm runs in the same rounds")
    args = parser.parse_args(argv)
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        compileall.compile_dir(str(args.baseline / "lint_gpu_tests"), quiet=1)

    # This container sets PYTHONDONTWRITEBYTECODE=1: compile once, or every run recompiles.
    compileall.compile_dir(str(HERE.parent / "lint_gpu_tests"), quiet=1)
    lines = [f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
             f"{subprocess.check_output([str(BIN / 'ruff'), '--version'], text=True).strip()}, "
             f"flake8 {subprocess.check_output([sys.executable, '-m', 'flake8', '--version'], text=True).split()[0]}",  # noqa: E501
             ""]
    with tempfile.TemporaryDirectory(prefix="gtl-bench-") as tmp:
        scratch = Path(tmp)
        groups: list[tuple[str, list[Command], int, int]] = []
        if args.tree:
            real = scratch / "real"
            names = []
            for tree in args.tree:
                name = f"{tree.parent.name}-{tree.name}"
                shutil.copytree(tree, real / name)
                names.append(name)
            count = sum(1 for _ in real.rglob("*.py"))
            label = f"real trees ({', '.join(names)}; {count} files)"
            copies = None
            if args.slope:
                where = scratch / "real-x5"
                copies = (where, five_copies(real, names, where))
            groups.append((label, commands_for(label, names, real, scratch,
                                               not args.no_flake8, True, args.baseline,
                                               copies),
                           args.rounds, count))
        if args.generated:
            gen = scratch / "generated"
            subprocess.run([sys.executable, str(HERE / "gen_tree.py"), str(gen),
                            str(args.generated)], check=True)
            label = f"generated tree ({args.generated} files)"
            groups.append((label, commands_for(label, ["."], gen, scratch,
                                               not (args.no_flake8_generated
                                                    or args.no_flake8), True),
                           args.generated_rounds, args.generated))
        for label, commands, rounds, files in groups:
            for command in commands:  # warm-up: fills caches for the warm rows
                command.run()
                command.times.clear()
            for _ in range(rounds):
                for command in commands:
                    command.run()
            rows = report(commands, label, files)
            lines += rows
            print("\n".join(rows), flush=True)
        if args.scaling and args.generated:
            rows = scaling(scratch / "generated", scratch, max(1, args.generated_rounds))
            lines += rows
            print("\n".join(rows), flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

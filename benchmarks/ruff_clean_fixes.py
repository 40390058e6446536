"""Hold every file ``--fix`` changes to its project's own ruff (run by hand).

Usage (from the repository root, after ``make install-test``)::

    .venv/bin/python benchmarks/ruff_clean_fixes.py            # the default inputs below
    .venv/bin/python benchmarks/ruff_clean_fixes.py spyre=/path/to/repo.git@HEAD \\
        mine=/path/to/a/checkout

An input is ``NAME=GIT_DIR@REV`` (its ``tests/`` and ``pyproject.toml`` at ``REV``, read with
``git archive``) or ``NAME=DIRECTORY`` (copied whole: a ``tests/`` beside its project's
config). For each input and each variant (``--unsafe-fixes``, and ``--unsafe-fixes --target
vllm``) the tree is laid out twice in a scratch directory, once left as it is and once fixed
with ``gpu-test-lint check --fix``; each file the fix changed is then checked with ``ruff
check`` and ``ruff format --check`` in both copies (the project's ``pyproject.toml`` is
ruff's config in both). The report names, per input and variant, the changed files, the
violations the fix added (per file and code: how many more there are after than before; a
line number moves with the fix) and the files ``ruff format`` would now reformat that it
left alone before. The goal is 0 and 0; the exit status is 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

MIRRORS = Path("/work/.mirror")
DEFAULT_INPUTS = (
    f"gaudi={MIRRORS}/vllm-project+vllm-gaudi/repo@HEAD",
    f"gaudi_old={MIRRORS}/vllm-project+vllm-gaudi/repo@00e55391",
    f"spyre={MIRRORS}/vllm-project+vllm-spyre/repo@HEAD",
    f"spyre_old={MIRRORS}/vllm-project+vllm-spyre/repo@007e1926",
)
VARIANTS = (("unsafe", ("--unsafe-fixes",)), ("vllm", ("--unsafe-fixes", "--target", "vllm")))


@dataclass
class Outcome:
    """What fixing one input under one variant did to its ruff results."""

    name: str
    variant: str
    changed: list[str] = field(default_factory=list)
    new_violations: list[str] = field(default_factory=list)
    new_count: int = 0
    newly_unformatted: list[str] = field(default_factory=list)


def lay_out(spec: str, dest: Path) -> None:
    """Write input ``spec`` (``GIT_DIR@REV`` or a directory) into ``dest``."""
    dest.mkdir(parents=True)
    if "@" in spec and not Path(spec).is_dir():
        git_dir, rev = spec.rsplit("@", 1)
        archive = subprocess.run(
            ["git", "--git-dir", git_dir, "archive", rev, "tests", "pyproject.toml"],
            check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    else:
        shutil.copytree(spec, dest, dirs_exist_ok=True)


def python_files(root: Path) -> dict[str, bytes]:
    """Every ``*.py`` file under ``root``, by path relative to it, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def ruff_violations(ruff: str, root: Path, files: list[str]) -> Counter[tuple[str, str]]:
    """``ruff check`` of ``files`` (relative to ``root``, ruff run there): how many
    violations of each code each file has."""
    if not files:
        return Counter()
    run = subprocess.run([ruff, "check", "--no-cache", "--force-exclude", "--exit-zero",
                          "--output-format", "json", *files],
                         cwd=root, capture_output=True, text=True, check=True)
    found: Counter[tuple[str, str]] = Counter()
    for item in json.loads(run.stdout or "[]"):
        path = os.path.relpath(item["filename"], root)
        found[(path, item["code"] or "syntax-error")] += 1
    return found


def ruff_unformatted(ruff: str, root: Path, files: list[str]) -> set[str]:
    """The ``files`` that ``ruff format --check`` (run in ``root``) would reformat."""
    if not files:
        return set()
    run = subprocess.run([ruff, "format", "--no-cache", "--force-exclude", "--check", *files],
                         cwd=root, capture_output=True, text=True)
    # ``Would reformat: PATH`` (ruff < 0.15), or ``--> PATH:LINE:COL`` under each
    # ``unformatted:`` diagnostic (newer ruff)
    named = (re.match(r"Would reformat: (.+)$|\s*--> (.+):\d+:\d+$", line)
             for line in run.stdout.splitlines())
    return {os.path.relpath(os.path.join(root, m.group(1) or m.group(2)), root)
            for m in named if m}


def measure(name: str, spec: str, variant: str, flags: tuple[str, ...], tool: str,
            ruff: str, scratch: Path) -> Outcome:
    """Fix input ``spec`` with ``flags`` and compare ruff's results on the changed files."""
    before_dir, after_dir = scratch / f"{name}-{variant}-before", scratch / f"{name}-{variant}"
    lay_out(spec, before_dir)
    lay_out(spec, after_dir)
    original = python_files(after_dir)
    subprocess.run([tool, "check", "--no-cache", "--fix", "--exit-zero", "--quiet", *flags,
                    "."], cwd=after_dir, capture_output=True, check=True)
    fixed = python_files(after_dir)
    outcome = Outcome(name, variant,
                      [p for p in fixed if original.get(p) != fixed[p]])
    before = ruff_violations(ruff, before_dir, outcome.changed)
    after = ruff_violations(ruff, after_dir, outcome.changed)
    for (path, code), count in sorted(after.items()):
        if count > before[(path, code)]:
            outcome.new_count += count - before[(path, code)]
            outcome.new_violations.append(
                f"{path}: {code} x{count - before[(path, code)]}")
    unformatted_before = ruff_unformatted(ruff, before_dir, outcome.changed)
    outcome.newly_unformatted = sorted(
        ruff_unformatted(ruff, after_dir, outcome.changed) - unformatted_before)
    return outcome


def main(argv: list[str] | None = None) -> int:
    """Run every input under every variant and print the report; 1 when anything is new."""
    here = Path(sys.executable).parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="*", default=list(DEFAULT_INPUTS),
                        help="NAME=GIT_DIR@REV or NAME=DIRECTORY (default: the four trees)")
    parser.add_argument("--tool", default=str(here / "gpu-test-lint"))
    parser.add_argument("--ruff", default=str(here / "ruff"))
    parser.add_argument("--keep", metavar="DIR", help="lay the trees out here and keep them")
    args = parser.parse_args(argv)
    args.tool, args.ruff = (os.path.abspath(shutil.which(p) or p) for p in (args.tool, args.ruff))
    scratch = Path(args.keep or tempfile.mkdtemp(prefix="ruff-clean-"))
    version = subprocess.run([args.ruff, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    print(f"# {version}; gpu-test-lint check --fix {{--unsafe-fixes, --unsafe-fixes "
          "--target vllm}")
    total_new = total_unformatted = 0
    try:
        for spec in args.inputs:
            name, _, source = spec.partition("=")
            for variant, flags in VARIANTS:
                outcome = measure(name, source, variant, flags, args.tool, args.ruff,
                                  scratch)
                total_new += outcome.new_count
                total_unformatted += len(outcome.newly_unformatted)
                print(f"{name:10} {variant:7} {len(outcome.changed):3} changed files, "
                      f"{outcome.new_count} new violations, "
                      f"{len(outcome.newly_unformatted)} newly unformatted")
                for line in outcome.new_violations:
                    print(f"    new violation: {line}")
                for path in outcome.newly_unformatted:
                    print(f"    newly unformatted: {path}")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"total: {total_new} new violations, {total_unformatted} newly unformatted")
    return 1 if total_new or total_unformatted else 0


if __name__ == "__main__":
    sys.exit(main())

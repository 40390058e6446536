"""How many violations get a fix: per suite and in total, the share with a fix (safe or
unsafe), the share with a safe fix, and why the rest have none or only an unsafe one.

Usage (from the repository root, after ``make install-test``)::

    .venv/bin/python benchmarks/fix_coverage.py gaudi=/work/real/gaudi/tests \\
        spyre=/work/real/spyre/tests [--fix-strategy isolate] [--target vllm] [--config FILE]

Each argument is a suite root, ``NAME=PATH`` or a bare ``PATH`` (named after the path, or
after its parent when it ends in ``tests``). The tool runs through the library
(:func:`lint_gpu_tests.api.check_paths`, no cache, the defaults anchored at the root as
``cd ROOT && gpu-test-lint check .`` anchors them) and checks only: what a violation's
:class:`~lint_gpu_tests.ftypes.FixInfo` says is what ``--show-fixes`` and the JSON output
say. A violation whose rule offers no fix at all (``fix`` is ``None``) counts as "no fix"
with the reason ``(the rule has no fix)``; the shares are given again without them.

Reasons are grouped after normalising them (:func:`normalise`): every backquoted span
becomes ```…``` and every number ``N``, so that the names and lines a reason quotes do not
split its group; each group is printed with its most frequent wording as an example.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from lint_gpu_tests.api import ConfigResolver, Violation, check_paths
from lint_gpu_tests.ftypes import Applicability

#: The reason given for a violation whose rule offers no fix at all.
NO_FIX_AT_ALL = "(the rule has no fix)"
#: The goals: shares of all violations that get a fix, and a safe fix.
GOAL_FIX, GOAL_SAFE = 0.95, 0.70
_BACKQUOTED = re.compile(r"`[^`]*`")
_NUMBER = re.compile(r"\b\d+\b")


def normalise(reason: str) -> str:
    """``reason`` with each backquoted span replaced by ```…``` and each number by ``N``:
    ``"`llm` is rebound (line 12)"`` -> ``"`…` is rebound (line N)"``."""
    return _NUMBER.sub("N", _BACKQUOTED.sub("`…`", reason))


@dataclass
class Coverage:
    """What one suite's (or all suites') violations get.

    Attributes:
        violations: how many violations were reported.
        fixed: how many have a fix, safe or unsafe.
        safe: how many have a safe fix.
        fixless: how many are of a rule that offers no fix at all (GPU007: the
            specification gives it none).
        reasons: (kind, rule code, normalised reason) -> count, kind ``"none"`` or
            ``"unsafe"``.
        wordings: normalised reason -> the reasons as written -> count.
    """

    violations: int = 0
    fixed: int = 0
    safe: int = 0
    fixless: int = 0
    reasons: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    wordings: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, violation: Violation) -> None:
        """Count ``violation``: its fix's applicability and, unless safe, its reason."""
        self.violations += 1
        fix = violation.fix
        applicability = fix.applicability if fix is not None else Applicability.NONE
        if applicability is Applicability.SAFE:
            self.safe += 1
            self.fixed += 1
            return
        if applicability is Applicability.UNSAFE:
            self.fixed += 1
        if fix is None:
            self.fixless += 1
        reason = fix.reason if fix is not None and fix.reason else NO_FIX_AT_ALL
        group = normalise(reason)
        self.reasons[(applicability.value, violation.code, group)] += 1
        self.wordings.setdefault(group, Counter())[reason] += 1

    def merge(self, other: Coverage) -> None:
        """Add ``other``'s counts to these."""
        self.violations += other.violations
        self.fixed += other.fixed
        self.safe += other.safe
        self.fixless += other.fixless
        self.reasons.update(other.reasons)
        for group, wordings in other.wordings.items():
            self.wordings.setdefault(group, Counter()).update(wordings)


def suite_name(spec: str) -> tuple[str, str]:
    """``NAME=PATH`` -> (NAME, PATH); a bare path is named after its last part, or the part
    before it when that is ``tests``."""
    if "=" in spec:
        name, path = spec.split("=", 1)
        return name, path
    parts = os.path.normpath(os.path.abspath(spec)).split(os.sep)
    return (parts[-2] if parts[-1] == "tests" and len(parts) > 1 else parts[-1]), spec


def measure(path: str, overrides: dict[str, str], config_file: str | None) -> Coverage:
    """Check the tree at ``path`` (no cache, the defaults anchored there) and count what
    its violations get.

    Raises:
        PathNotFoundError: when ``path`` does not exist.
        ConfigError: when a config file that governs a file is invalid.
    """
    root = os.path.abspath(path)
    resolver = ConfigResolver(config_file, overrides, cwd=root)
    result = check_paths([root], resolver, cache=False)
    coverage = Coverage()
    for violation in result.violations:
        coverage.add(violation)
    return coverage


def share(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage with one decimal ("-" for an empty whole)."""
    return f"{100 * part / whole:.1f} %" if whole else "-"


def table(rows: Sequence[tuple[str, Coverage]]) -> list[str]:
    """The Markdown table of the suites' counts and shares, the total last."""
    lines = ["| suite | violations | with a fix | with a safe fix |",
             "| --- | ---: | ---: | ---: |"]
    for name, c in rows:
        lines.append(f"| {name} | {c.violations} | {c.fixed} ({share(c.fixed, c.violations)}) "
                     f"| {c.safe} ({share(c.safe, c.violations)}) |")
    return lines


def reason_lines(names: Sequence[str], suites: dict[str, Coverage], total: Coverage
                 ) -> list[str]:
    """The reason groups, biggest first within each kind (no fix, then unsafe): the count,
    the count per rule and per suite, the normalised reason and its most frequent wording."""
    lines = []
    for kind, title in (("none", "no fix"), ("unsafe", "unsafe fix only")):
        groups: dict[str, Counter[str]] = {}  # normalised reason -> "code"/"suite" -> count
        for (k, code, group), n in total.reasons.items():
            if k == kind:
                groups.setdefault(group, Counter())[code] += n
        for name in names:
            for (k, _, group), n in suites[name].reasons.items():
                if k == kind:
                    groups[group][name] += n
        order = sorted(groups, key=lambda g: (-sum(groups[g][n] for n in names), g))
        lines.append(f"{title}: {sum(sum(groups[g][n] for n in names) for g in order)}")
        for group in order:
            counts = groups[group]
            parts = [f"{key} {n}" for key, n in sorted(counts.items()) if key not in names]
            parts += [f"{name} {counts[name]}" for name in names if counts[name]]
            lines.append(f"  {sum(counts[n] for n in names):3d}  [{', '.join(parts)}]  {group}")
            example = total.wordings[group].most_common(1)[0][0]
            if example != group:
                lines.append(f"       e.g. {example}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each suite named on the command line and print the table and the reasons;
    exit 0 (the goals are reported, not enforced)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="+", metavar="[NAME=]PATH")
    parser.add_argument("--fix-strategy", choices=("runner", "isolate"))
    parser.add_argument("--target", choices=("bundled", "vllm"))
    parser.add_argument("--config", help="config file for every suite (as `--config`)")
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in (("fix_strategy", args.fix_strategy),
                                   ("target", args.target)) if v is not None}
    suites: dict[str, Coverage] = {}
    for spec in args.suites:
        name, path = suite_name(spec)
        suites[name] = measure(path, overrides, args.config)
    total = Coverage()
    for coverage in suites.values():
        total.merge(coverage)
    names = list(suites)
    out = table([*suites.items(), ("total", total)])
    out += ["", f"goals: a fix for >= {GOAL_FIX:.0%} ({share(total.fixed, total.violations)} "
                f"now), a safe fix for >= {GOAL_SAFE:.0%} "
                f"({share(total.safe, total.violations)} now)",
            f"of the {total.violations - total.fixless} violations of rules that offer a "
            f"fix: {share(total.fixed, total.violations - total.fixless)} with a fix, "
            f"{share(total.safe, total.violations - total.fixless)} safe", ""]
    out += reason_lines(names, suites, total)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

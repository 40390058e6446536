"""A long campaign of the differential generator (tests/differential): many seeds, in batches
run side by side, each batch generated, fixed (``--fix`` and ``--fix --unsafe-fixes``), run on
the stand-in engine and compared (``tests/differential/harness.py``).

Usage (``make campaign`` runs the default)::

    .venv/bin/python benchmarks/differential_campaign.py --start 0 --count 1000 \\
        [--batch 50] [--jobs N] [--known-defects] [--out campaign.json]

Prints every module that differs as its batch ends, then the figures (seeds, modules, tests,
shapes, differences after each fix); ``--out`` writes them as JSON with each difference. Exit
status 1 when a module differs after the safe fix, or after the unsafe fixes where no reason
allows it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.differential.generator import KNOWN_DEFECT_SHAPES  # noqa: E402
from tests.differential.harness import ModuleVerdict, run_batch, summarize  # noqa: E402


def _batch(args: tuple[int, int, bool]) -> list[ModuleVerdict]:
    start, count, known = args
    with tempfile.TemporaryDirectory(prefix="differential-") as tmp:
        return run_batch(Path(tmp) / "batch", range(start, start + count), known_defects=known)


def _verdict_json(v: ModuleVerdict) -> dict[str, Any]:
    data = asdict(v)
    for key in ("safe", "unsafe", "unsafe_allowed"):
        data[key] = [d.describe() for d in getattr(v, key)]
    return data


def _print_differing(verdicts: list[ModuleVerdict]) -> None:
    for v in verdicts:
        if v.before_failures or v.safe or v.unsafe:
            print(f"\n{v.module} (seed {v.seed}): {', '.join(v.shapes)}")
            for label, items in (("fails before the fix", v.before_failures),
                                 ("after --fix", [d.describe() for d in v.safe]),
                                 ("after --unsafe-fixes", [d.describe() for d in v.unsafe])):
                for item in items:
                    print(f"  {label}: {item}")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--known-defects", action="store_true",
                        help="also draw the shapes of KNOWN_DEFECT_SHAPES")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    batches = [(s, min(args.batch, args.start + args.count - s), args.known_defects)
               for s in range(args.start, args.start + args.count, args.batch)]
    began = time.monotonic()
    verdicts: list[ModuleVerdict] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for done in pool.map(_batch, batches):
            verdicts.extend(done)
            _print_differing(done)
            print(f"# {len(verdicts)} modules, {time.monotonic() - began:.0f} s", flush=True)
    seconds = time.monotonic() - began
    summary = summarize(verdicts)
    summary.update(seeds=[args.start, args.start + args.count - 1], seconds=round(seconds, 1),
                   jobs=args.jobs, known_defects=sorted(KNOWN_DEFECT_SHAPES)
                   if args.known_defects else [])
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary,
                                        "modules": [_verdict_json(v) for v in verdicts]},
                                       indent=1), encoding="utf-8")
    return 1 if any(v.safe or v.unsafe or v.before_failures for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())

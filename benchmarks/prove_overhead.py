"""Benchmark ``gpu-test-lint prove``'s own cost on the CPU, with stand-in devices (run by
hand, not part of the tests).

Usage (from the repository root, after ``make install-test``)::

    .venv/bin/python benchmarks/prove_overhead.py [--modules 8] [--engine-seconds 3]
        [--devices 1,2,4] [--rounds 1]

A project is written to a scratch folder: ``--modules`` test modules, each with one test
that builds an engine by hand (so ``check --fix`` changes every module) of a stand-in
``vllm`` package whose ``LLM`` takes ``--engine-seconds`` to start (a sleep: the CPU stays
free, as it does while a real engine starts on a GPU), resolves the configuration the
recorder reads (the runtime tests' stand-in) and "generates" each prompt reversed.
``prove tests --no-cache --devices 0,...,D-1`` then runs on it for each D of ``--devices``
(``--rounds`` times, D by D in turn), each session on devices of its own; the devices are
stand-ins (names in the visibility variable: nothing uses them).

Reported per D, from each run's progress lines (each session's pytest seconds) and its wall
time (the ``prove`` process, start to end; the medians over rounds):

* **D = 1**: wall / the sum of the sessions' seconds. Goal <= 1.1.
* **D > 1**: wall / (the one-device wall / D + the longest session). Goal <= 1.1. Sessions
  side by side share the machine's cores (pytest's start and collection, the recorder), so
  they may take longer than on one device: the run's own sessions' sum / D + its longest
  session is printed beside, the bound a scheduler without overhead keeps to.

The verdicts must be ``same`` for every module in every run (else the run is reported as
failed and the script exits 1).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNTIME_TESTS = Path(__file__).resolve().parent.parent / "tests" / "runtime"
sys.path.append(str(RUNTIME_TESTS))  # the runtime tests' helpers: runtime_fakes

from runtime_fakes import STAND_IN_ENGINE_CONFIG  # noqa: E402 - needs RUNTIME_TESTS on sys.path

FAKE_VLLM = '''\
import os
import time
from types import SimpleNamespace as N


class SamplingParams:
    def __init__(self, temperature=1.0, seed=None, max_tokens=16):
        self.temperature, self.seed, self.max_tokens = temperature, seed, max_tokens


class LLM:
    def __init__(self, model, max_model_len=64, **kwargs):
        time.sleep(float(os.environ["FAKE_ENGINE_SECONDS"]))
''' + STAND_IN_ENGINE_CONFIG + '''
    def generate(self, prompts, sampling_params=None):
        return [N(outputs=[N(text=p[::-1])]) for p in prompts]
'''

TEST = '''\
from vllm import LLM, SamplingParams


def test_generate_{n}():
    llm = LLM("tiny", max_model_len=32)
    out = llm.generate(["abc{n}"], SamplingParams(temperature=0.0))
    assert out[0].outputs[0].text == "{n}cba"
    del llm
'''

#: A session's progress line: ``prove: [3/16] tests/test_m2.py (fixed, devices 0): 1
#: test(s), pytest exit 0, 4.2 s``.
SESSION_LINE = re.compile(r"^prove: \[\d+/\d+\] .*, ([0-9.]+) s$")


def write_project(folder: Path, modules: int) -> Path:
    """The stand-in ``vllm`` under ``folder/fake`` and the project under ``folder/project``
    (its tests under ``tests/``); returns the project."""
    fake = folder / "fake" / "vllm"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_VLLM)
    tests = folder / "project" / "tests"
    tests.mkdir(parents=True)
    for n in range(modules):
        (tests / f"test_m{n}.py").write_text(TEST.format(n=n))
    return folder / "project"


def prove(project: Path, devices: int, env: dict[str, str]) -> tuple[float, list[float]]:
    """One ``prove`` run on ``devices`` stand-in devices: its wall seconds and each session's
    pytest seconds.

    Raises:
        RuntimeError: when a module is not proven the same.
    """
    cmd = [sys.executable, "-m", "lint_gpu_tests", "prove", "tests", "--no-cache",
           "--devices", ",".join(str(d) for d in range(devices)), "--output-format", "json"]
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True,
                          check=False)
    wall = time.monotonic() - start
    report = json.loads(done.stdout)
    statuses = {m["module"]: m["status"] for m in report["modules"]}
    if done.returncode != 0 or set(statuses.values()) != {"same"}:
        raise RuntimeError(f"prove on {devices} device(s): exit {done.returncode}, "
                           f"{statuses}\n{done.stderr}")
    sessions = [float(m.group(1)) for line in done.stderr.splitlines()
                if (m := SESSION_LINE.match(line))]
    return wall, sessions


def main() -> int:
    """Run the benchmark (module docstring); 0 when every run was proven the same."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", type=int, default=8)
    parser.add_argument("--engine-seconds", type=float, default=3.0)
    parser.add_argument("--devices", default="1,2,4",
                        help="device counts to run on, comma-separated (1 first)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    counts = [int(d) for d in args.devices.split(",")]
    if counts[0] != 1:
        parser.error("--devices must start with 1 (the one-device run is the reference)")
    with tempfile.TemporaryDirectory(prefix="prove-overhead-") as scratch:
        project = write_project(Path(scratch), args.modules)
        env = {**os.environ, "PYTHONPATH": str(Path(scratch, "fake")),
               "FAKE_ENGINE_SECONDS": str(args.engine_seconds)}
        runs: dict[int, list[tuple[float, list[float]]]] = {d: [] for d in counts}
        try:
            for _ in range(args.rounds):
                for count in counts:
                    runs[count].append(prove(project, count, env))
        except RuntimeError as error:
            print(f"failed: {error}", file=sys.stderr)
            return 1
    print(f"{args.modules} modules ({2 * args.modules} sessions), engines of "
          f"{args.engine_seconds:g} s, {args.rounds} round(s); medians")
    one = statistics.median(wall for wall, _ in runs[1])
    for count in counts:
        wall = statistics.median(w for w, _ in runs[count])
        total = statistics.median(sum(s) for _, s in runs[count])
        longest = statistics.median(max(s) for _, s in runs[count])
        if count == 1:
            print(f"D=1: wall {wall:.1f} s, sessions {total:.1f} s in all: "
                  f"{wall / total:.3f}x (goal <= 1.1)")
        else:
            bound = one / count + longest
            own = total / count + longest
            print(f"D={count}: wall {wall:.1f} s, one-device wall / D + longest session "
                  f"{one / count:.1f} + {longest:.1f} = {bound:.1f} s: {wall / bound:.3f}x "
                  f"(goal <= 1.1); sessions {total:.1f} s in all, wall / (their sum / D + "
                  f"longest) {wall / own:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

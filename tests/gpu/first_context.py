"""Measure the first CUDA context of a process and what the runner's memory wait makes of it;
prints one JSON object. Needs torch with CUDA and nvidia-ml-py, not vLLM.

Run from the repository root: ``PYTHONPATH=. python3 tests/gpu/first_context.py``. Each case
runs in a fresh interpreter (``CUDA_MODULE_LOADING`` is read when CUDA starts): the context
that ``torch.zeros(1, device="cuda")`` creates, with CUDA's lazy module loading (its default)
and with ``EAGER``; then a :class:`~lint_gpu_tests.runtime.VllmRunner` whose engine factory
creates this process's first context, as an in-process engine would: with the runtime's
slack and first-context allowance (also with the slack at its 1 GiB floor, so that the
allowance alone has to cover an EAGER context), and a wait with a fixed 1 GiB slack and no
first-context allowance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

GIB = 1 << 30

CASE = r"""
import json, sys, time, warnings
import pynvml
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)
used = lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
GIB = 1 << 30
out = {}
if sys.argv[1] == "context":
    import torch
    before = used()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    out["context_gib"] = (used() - before - torch.cuda.memory_reserved(0)) / GIB
    out["reserved_gib"] = torch.cuda.memory_reserved(0) / GIB
else:
    from lint_gpu_tests.runtime import VllmRunner
    from lint_gpu_tests.runtime.memory import GpuMemoryTimeoutError, wait_for_memory_to_return

    def engine(model):
        import torch
        torch.zeros(1, device="cuda")  # the process's first CUDA context
        return object()

    class Runner(VllmRunner):
        memory_wait_timeout_s = 20.0
        # the 1 GiB floor alone (not 1% of the H200): the first-context allowance must work
        memory_slack_ratio = float(sys.argv[2])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Runner("m", engine_factory=engine) as runner:
            baseline = runner._baseline.readings
    out["runner_teardown_s"] = runner.teardown_seconds
    out["runner_wait_s"] = [s.seconds for s in runner.teardown_steps][-1]
    out["runner_warnings"] = [str(w.message)[:300] for w in caught]
    out["runner_steps"] = [f"{s.name}:{s.status}" for s in runner.teardown_steps]
    out["slack_gib"] = max(1.0, Runner.memory_slack_ratio * baseline[0].total_bytes / GIB)
    out["above_baseline_gib"] = (used() - baseline[0].used_bytes) / GIB
    started = time.monotonic()
    try:  # a wait with a fixed 1 GiB slack and no first-context allowance
        wait_for_memory_to_return(baseline, slack_bytes=GIB, slack_ratio=0, timeout_s=5)
        out["fixed_1gib_wait"] = f"clear after {time.monotonic() - started:.2f} s"
    except GpuMemoryTimeoutError as exc:
        out["fixed_1gib_wait"] = f"timed out after {time.monotonic() - started:.2f} s: {exc}"
print(json.dumps(out))
"""


def run(kind: str, loading: str, ratio: str = "0.01") -> dict[str, object]:
    env = dict(os.environ, CUDA_MODULE_LOADING=loading)
    done = subprocess.run(
        [sys.executable, "-c", CASE, kind, ratio],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    figures = {}
    for loading in ("LAZY", "EAGER"):
        figures[f"context.{loading}"] = run("context", loading)
        figures[f"runner.{loading}"] = run("runner", loading)
    figures["runner.EAGER.ratio0"] = run("runner", "EAGER", "0")
    warnings.simplefilter("ignore")
    figures["at"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(json.dumps(figures, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

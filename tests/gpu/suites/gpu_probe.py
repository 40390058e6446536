"""What the GPU suites measure with, imported by the suites under ``tests/gpu/suites``.

Device memory is read with NVML (``nvidia-ml-py``): every process's memory on every device,
without creating a CUDA context, and independently of the runtime under test. Figures go to
the JSON file ``$GPU_PROBE_JSON`` (one object: key -> number, text or list), which the outer
test in ``tests/gpu`` reads back.

The session's baseline (bytes used before any engine) is read by the first process of a
suite that imports this module and passed to its children (fork and spawn isolation) in
``$GPU_PROBE_BASELINE_BYTES``, so every process compares with the same reading.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pynvml

GIB = 1 << 30

pynvml.nvmlInit()
_HANDLES = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]


def used_bytes() -> int:
    """Bytes used on all devices together, by every process (NVML)."""
    return sum(int(pynvml.nvmlDeviceGetMemoryInfo(h).used) for h in _HANDLES)


TOTAL_GIB = sum(int(pynvml.nvmlDeviceGetMemoryInfo(h).total) for h in _HANDLES) / GIB
BASELINE_BYTES = int(os.environ.setdefault("GPU_PROBE_BASELINE_BYTES", str(used_bytes())))

#: The tiny random Llama (tests/e2e/tiny_model.py), built by the outer test.
MODEL = os.environ.get("GPU_TINY_MODEL", "")

#: One engine on the tiny model: bf16 (the GPU kernels take no fp32 here), a short context,
#: no CUDA graphs, and 0.3 of the device, so that two engines fit beside one leaked one.
#: ``$GPU_ENGINE_KWARGS`` (a JSON object) overrides entries, for a dry run on another engine.
ENGINE_KWARGS: dict[str, Any] = {
    "dtype": "bfloat16",
    "max_model_len": 256,
    "enforce_eager": True,
    "gpu_memory_utilization": 0.3,
    **json.loads(os.environ.get("GPU_ENGINE_KWARGS", "{}")),
}

#: An engine counts as holding the device above this many GiB (0.3 of it, less its slack).
HELD_GIB = 0.25 * TOTAL_GIB
#: Memory is back when it is within this many GiB of the baseline.
SLACK_GIB = 1.0


def above_gib() -> float:
    """GiB used now above the session's baseline (all devices, all processes)."""
    return (used_bytes() - BASELINE_BYTES) / GIB


def seconds_until_back(timeout_s: float = 10.0) -> float | None:
    """Seconds until memory is within ``SLACK_GIB`` of the baseline (polled every 20 ms);
    ``None`` when it is still above after ``timeout_s``."""
    start = time.monotonic()
    while above_gib() > SLACK_GIB:
        if time.monotonic() - start > timeout_s:
            return None
        time.sleep(0.02)
    return time.monotonic() - start


def record(key: str, value: Any) -> None:
    """Store one figure under ``key`` in ``$GPU_PROBE_JSON`` (floats rounded to 3 places)."""
    path = os.environ["GPU_PROBE_JSON"]
    data: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path) as file:
            data = json.load(file)
    data[key] = round(value, 3) if isinstance(value, float) else value
    with open(path, "w") as file:
        json.dump(data, file, indent=1, sort_keys=True)


def read(key: str) -> Any:
    """A figure stored earlier by :func:`record` (``KeyError`` when absent)."""
    with open(os.environ["GPU_PROBE_JSON"]) as file:
        return json.load(file)[key]


def new_engine() -> Any:
    """A hand-managed ``vllm.LLM`` on the tiny model (the caller owns its teardown)."""
    from vllm import LLM

    return LLM(MODEL, **ENGINE_KWARGS)


def generate(llm: Any) -> int:
    """Greedy-generate up to 4 tokens for one prompt; returns how many came back (>= 1)."""
    from vllm import SamplingParams

    outputs = llm.generate(
        ["hello my name is"], SamplingParams(max_tokens=4, temperature=0.0), use_tqdm=False
    )
    count = len(outputs[0].outputs[0].token_ids)
    assert count >= 1, outputs
    return count

"""Fakes for the runtime tests: a memory reader under the test's control, a clock, the
conftest of a stand-in pytest-xdist worker, and the configuration a stand-in vLLM engine
resolves."""

from __future__ import annotations

from lint_gpu_tests.runtime.memory import GIB, DeviceMemory


class FakeMemoryReader:
    """Devices whose used bytes the test sets; every read is logged in ``events``.

    ``script`` (optional): successive used-bytes values per read of device 0, the last one
    repeating, to simulate memory coming back over time.
    """

    name = "fake"

    def __init__(
        self,
        used: list[int] | None = None,
        total: int = 80 * GIB,
        script: list[int] | None = None,
        events: list[str] | None = None,
    ) -> None:
        self.used = list(used if used is not None else [0])
        self.total = total
        self.script = list(script or [])
        self.events = events if events is not None else []
        self.reads = 0

    def device_count(self) -> int:
        return len(self.used)

    def read(self, index: int) -> DeviceMemory:
        self.reads += 1
        self.events.append("memory.read")
        if index == 0 and self.script:
            self.used[0] = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return DeviceMemory(index, self.used[index], self.total, f"fake {index}")


class FakeClock:
    """``clock``/``sleep`` pair: sleeping advances the clock; no real time passes."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


#: A ``conftest.py`` that makes a pytest session a stand-in pytest-xdist worker (``gw3``):
#: what the session sends back to the controller is written to ``$WORKEROUTPUT_JSON``.
XDIST_WORKER_CONFTEST = """
import json, os
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.workerinput = {"workerid": "gw3"}  # what pytest-xdist gives a worker
    config.workeroutput = {}

def pytest_unconfigure(config):
    with open(os.environ["WORKEROUTPUT_JSON"], "w") as f:
        json.dump(config.workeroutput, f)
"""

#: The body of a stand-in ``vllm.LLM.__init__(self, model, max_model_len, ...)`` (the text
#: of a stand-in ``vllm`` package, with ``N`` for ``types.SimpleNamespace``): the
#: configuration it resolves from its arguments, where the recorder reads a real engine's
#: (``llm_engine.vllm_config``).
STAND_IN_ENGINE_CONFIG = """\
        self.llm_engine = N(vllm_config=N(
            model_config=N(model=model, max_model_len=max_model_len, trust_remote_code=False,
                           dtype="float32", seed=0, enforce_eager=True, tokenizer=model),
            cache_config=N(block_size=16),
            scheduler_config=N(enable_chunked_prefill=None, max_num_batched_tokens=8),
            compilation_config=N(mode=0, cudagraph_capture_sizes=[])))
"""

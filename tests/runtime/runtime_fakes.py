"""Fakes for the runtime tests: a memory reader under the test's control."""

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

"""Memory readers, CUDA_VISIBLE_DEVICES mapping and the bounded waits (no GPU, no sleeping)."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest
from runtime_fakes import FakeClock, FakeMemoryReader

from lint_gpu_tests.runtime import memory
from lint_gpu_tests.runtime.memory import (
    GIB,
    GpuMemoryTimeoutError,
    NvmlMemoryReader,
    parse_visible_devices,
    wait_for_gpu_memory_to_clear,
    wait_for_memory_to_return,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", []),
        ("0", ["0"]),
        ("3, 1", ["3", "1"]),
        ("2,-1,0", ["2"]),  # CUDA stops at the first invalid entry
        ("1,,0", ["1"]),
        ("GPU-8f2c,0", ["GPU-8f2c", "0"]),
        ("MIG-abcd", ["MIG-abcd"]),
        ("1,bogus,0", ["1"]),
    ],
)
def test_parse_visible_devices(value: str | None, expected: list[str] | None) -> None:
    assert parse_visible_devices(value) == expected


class FakeNvml:
    """Enough of pynvml: four GPUs, device i uses i GiB of 100 GiB."""

    UUIDS = ["GPU-aaaa-0", "GPU-bbbb-1", "GPU-cccc-2", "GPU-dddd-3"]

    def __init__(self) -> None:
        self.initialised = False

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.UUIDS)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return self.UUIDS[handle].encode()

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        raise RuntimeError(f"NVML_ERROR_NOT_FOUND {uuid}")

    def nvmlDeviceGetName(self, handle: int) -> str:
        return "Fake GPU"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(used=handle * GIB, total=100 * GIB, free=(100 - handle) * GIB)


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


@pytest.mark.parametrize(
    ("visible", "physical"),
    [
        (None, [0, 1, 2, 3]),
        ("2,0", [2, 0]),
        ("GPU-cccc,1", [2, 1]),  # UUID prefixes, as CUDA accepts them
        ("3,7,1", [3]),  # an index past the last device ends the list
        ("GPU-,1", []),  # an ambiguous prefix ends it too
        ("", []),
    ],
)
def test_nvml_reader_maps_logical_to_physical(
    fake_nvml: FakeNvml,
    monkeypatch: pytest.MonkeyPatch,
    visible: str | None,
    physical: list[int],
) -> None:
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    reader = NvmlMemoryReader()
    assert fake_nvml.initialised
    assert reader.device_count() == len(physical)
    readings = [reader.read(i) for i in range(reader.device_count())]
    assert [r.index for r in readings] == list(range(len(physical)))
    assert [r.used_bytes // GIB for r in readings] == physical
    assert all(f"physical {p}" in r.label for r, p in zip(readings, physical, strict=True))


def test_default_reader_is_none_without_any_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("pynvml", "amdsmi", "torch"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import name` fail
    assert memory.default_memory_reader(refresh=True) is None
    memory.default_memory_reader(refresh=True)


def test_default_reader_prefers_nvml(fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    reader = memory.default_memory_reader(refresh=True)
    assert isinstance(reader, NvmlMemoryReader)
    assert reader.device_count() == 4


@pytest.fixture(autouse=True)
def _forget_cached_reader() -> Any:
    yield
    memory._default_reader = None


def test_wait_returns_at_once_when_clear() -> None:
    clock = FakeClock()
    reader = FakeMemoryReader(used=[GIB // 2, GIB // 4])
    readings = wait_for_gpu_memory_to_clear(
        devices=[0, 1], threshold_bytes=GIB, reader=reader, clock=clock, sleep=clock.sleep
    )
    assert [r.used_bytes for r in readings] == [GIB // 2, GIB // 4]
    assert clock.sleeps == []


def test_wait_polls_until_memory_comes_back() -> None:
    clock = FakeClock()
    reader = FakeMemoryReader(script=[40 * GIB, 40 * GIB, 12 * GIB, 2 * GIB])
    readings = wait_for_gpu_memory_to_clear(
        devices=[0],
        threshold_ratio=0.05,
        poll_interval_s=0.5,
        reader=reader,
        clock=clock,
        sleep=clock.sleep,
    )
    assert readings[0].used_bytes == 2 * GIB
    assert clock.sleeps == [0.5, 0.5, 0.5]


def test_wait_needs_the_condition_to_hold_for_stable_duration() -> None:
    clock = FakeClock()
    # dips below, goes back up, then stays down
    reader = FakeMemoryReader(script=[0, 9 * GIB, 0, 0, 0, 0])
    wait_for_gpu_memory_to_clear(
        devices=[0],
        threshold_bytes=GIB,
        poll_interval_s=1.0,
        stable_duration_s=2.0,
        reader=reader,
        clock=clock,
        sleep=clock.sleep,
    )
    assert reader.reads == 5  # 0 | 9 (reset) | 0, 0, 0: held from t=2 to t=4
    assert clock.now == 4.0


def test_timeout_error_names_every_device() -> None:
    clock = FakeClock()
    reader = FakeMemoryReader(used=[75 * GIB, GIB // 2], total=140 * GIB)
    with pytest.raises(GpuMemoryTimeoutError) as info:
        wait_for_gpu_memory_to_clear(
            devices=None,
            threshold_bytes=GIB,
            timeout_s=10,
            poll_interval_s=2,
            reader=reader,
            clock=clock,
            sleep=clock.sleep,
        )
    message = str(info.value)
    assert "within 10 s" in message
    assert "used <= 1.00 GiB" in message
    assert "device 0 (fake 0): 75.00/140.00 GiB used" in message
    assert "device 1 (fake 1): 0.50/140.00 GiB used" in message
    assert [r.index for r in info.value.readings] == [0, 1]
    assert isinstance(info.value, TimeoutError)
    assert clock.now == 10


def test_wait_needs_a_threshold() -> None:
    with pytest.raises(ValueError, match="threshold"):
        wait_for_gpu_memory_to_clear(devices=[0], reader=FakeMemoryReader())


def test_wait_without_reader_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "default_memory_reader", lambda **_: None)
    with pytest.raises(RuntimeError, match="nvidia-ml-py"):
        wait_for_gpu_memory_to_clear(devices=[0], threshold_bytes=0)


def test_wait_for_memory_to_return_compares_each_device_to_its_baseline() -> None:
    clock = FakeClock()
    reader = FakeMemoryReader(used=[10 * GIB, 30 * GIB])
    baseline = memory.read_all(reader)
    reader.used = [10 * GIB + GIB // 2, 50 * GIB]
    with pytest.raises(GpuMemoryTimeoutError, match=r"device 1 \(fake 1\): 50.00/80.00"):
        wait_for_memory_to_return(
            baseline, timeout_s=1, reader=reader, clock=clock, sleep=clock.sleep
        )
    reader.used = [10 * GIB + GIB // 2, 30 * GIB + GIB]
    wait_for_memory_to_return(baseline, timeout_s=1, reader=reader, clock=clock, sleep=clock.sleep)


def test_amdsmi_reader_converts_mib_and_honours_hip_visible_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = SimpleNamespace(
        amdsmi_init=lambda: None,
        amdsmi_get_processor_handles=lambda: ["h0", "h1", "h2"],
        amdsmi_get_gpu_vram_usage=lambda h: {"vram_used": 1024 * int(h[1]), "vram_total": 196608},
    )
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "2,1")
    reader = memory.AmdSmiMemoryReader()
    assert reader.device_count() == 2
    first = reader.read(0)
    assert (first.used_bytes, first.total_bytes, first.label) == (2 * GIB, 192 * GIB, "physical 2")


def test_torch_fallback_only_when_the_backend_is_already_initialised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("pynvml", "amdsmi"):
        monkeypatch.setitem(sys.modules, name, None)
    initialised = [False]
    cuda = SimpleNamespace(
        is_initialized=lambda: initialised[0],
        device_count=lambda: 1,
        mem_get_info=lambda i: (30 * GIB, 80 * GIB),
    )
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    assert memory.default_memory_reader(refresh=True) is None  # would create a context
    initialised[0] = True
    # the cached "none" is looked at again once CUDA is initialised (a parent that has CUDA
    # and no nvidia-ml-py reads with torch.cuda.mem_get_info, every process counted)
    reader = memory.default_memory_reader()
    assert isinstance(reader, memory.TorchMemoryReader)
    assert reader.read(0).used_bytes == 50 * GIB


# -- slack relative to the device; the first CUDA context of this process ----------------
H200_TOTAL = int(140.40 * GIB)  # NVML's total of an H200 (docs/gpu-runtime.md)


def test_slack_is_relative_to_the_device() -> None:
    assert memory.slack_for(H200_TOTAL) == int(0.01 * H200_TOTAL)  # 1.40 GiB
    assert memory.slack_for(80 * GIB) == GIB  # the floor: 0.80 GiB < 1 GiB
    assert memory.slack_for(H200_TOTAL, slack_bytes=GIB, slack_ratio=0) == GIB
    clock = FakeClock()
    reader = FakeMemoryReader(used=[GIB // 2], total=H200_TOTAL)
    baseline = memory.read_all(reader)
    reader.used = [GIB // 2 + int(1.3 * GIB)]  # within 1.40 GiB, beyond 1 GiB
    wait_for_memory_to_return(baseline, timeout_s=1, reader=reader, clock=clock, sleep=clock.sleep)
    with pytest.raises(GpuMemoryTimeoutError, match=r"used <= baseline \+ 1.00 GiB\)"):
        wait_for_memory_to_return(
            baseline, slack_ratio=0, timeout_s=1, reader=reader, clock=clock, sleep=clock.sleep
        )
    reader.used = [GIB // 2 + int(1.5 * GIB)]  # beyond 1.40 GiB
    with pytest.raises(GpuMemoryTimeoutError, match=r"max\(0.25 GiB, 1.0% of the device\)"):
        wait_for_memory_to_return(
            baseline,
            slack_bytes=GIB // 4,
            timeout_s=1,
            reader=reader,
            clock=clock,
            sleep=clock.sleep,
        )


def _fake_cuda_torch(monkeypatch: pytest.MonkeyPatch, reserved: int) -> list[bool]:
    initialised = [False]
    cuda = SimpleNamespace(
        is_initialized=lambda: initialised[0], memory_reserved=lambda i: reserved
    )
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    return initialised


@pytest.mark.parametrize("context_gib", [0.65, 1.6])  # H200; "over 1 GiB" elsewhere
def test_first_cuda_context_of_this_process_joins_the_baseline(
    monkeypatch: pytest.MonkeyPatch, context_gib: float
) -> None:
    initialised = _fake_cuda_torch(monkeypatch, reserved=GIB // 4)
    clock = FakeClock()
    base = GIB // 2
    after = base + int(context_gib * GIB) + GIB // 4 + GIB // 2  # + reserved + 0.5 GiB noise
    reader = FakeMemoryReader(used=[base], total=80 * GIB, script=[base + 42 * GIB, after])
    baseline = [memory.DeviceMemory(0, base, 80 * GIB, "fake 0")]
    allowance = memory.first_context_allowance(cuda_at_baseline=False)
    initialised[0] = True  # the engine's life created this process's first context
    readings = wait_for_memory_to_return(
        baseline,
        slack_ratio=0,
        context_allowance=allowance,
        timeout_s=10,
        reader=reader,
        clock=clock,
        sleep=clock.sleep,
    )
    assert readings[0].used_bytes == after
    # without it (or with CUDA already there at the baseline) the wait cries wolf
    for other in (None, memory.first_context_allowance(cuda_at_baseline=True)):
        with pytest.raises(GpuMemoryTimeoutError):
            wait_for_memory_to_return(
                baseline,
                slack_ratio=0,
                context_allowance=other,
                timeout_s=10,
                reader=FakeMemoryReader(used=[after], total=80 * GIB),
                clock=clock,
                sleep=clock.sleep,
            )


def test_first_context_allowance_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    initialised = _fake_cuda_torch(monkeypatch, reserved=0)
    initialised[0] = True
    clock = FakeClock()
    held = 40 * GIB  # an engine still alive is no context
    reader = FakeMemoryReader(used=[held], total=H200_TOTAL)
    baseline = [memory.DeviceMemory(0, 0, H200_TOTAL, "fake 0")]
    with pytest.raises(GpuMemoryTimeoutError, match=r"first CUDA context \(device 0: 2.81 GiB\)"):
        wait_for_memory_to_return(
            baseline,
            context_allowance=memory.first_context_allowance(cuda_at_baseline=False),
            timeout_s=10,
            reader=reader,
            clock=clock,
            sleep=clock.sleep,
        )
    assert memory.first_context_max_bytes(80 * GIB) == 2 * GIB


@pytest.mark.parametrize(
    ("torch_version", "env", "expected"),
    [
        ("2.5.1+rocm6.2", {}, "spawn"),
        ("2.7.0+xpu", {}, "spawn"),
        ("2.7.0+cu126", {}, "fork"),
        (None, {"ROCM_PATH": "/opt/rocm"}, "spawn"),
        (None, {}, "fork"),
    ],
)
def test_default_start_method_without_importing_torch(
    monkeypatch: pytest.MonkeyPatch,
    torch_version: str | None,
    env: dict[str, str],
    expected: str,
) -> None:
    import importlib.metadata
    import importlib.util

    from lint_gpu_tests.runtime import _platform

    def version(name: str) -> str:
        if torch_version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return torch_version

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    for key in ("ROCM_PATH", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "ONEAPI_ROOT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert _platform.default_start_method() == expected
    assert "torch" not in sys.modules

"""Device-memory readers and the bounded wait for GPU memory to clear.

Facts this module relies on:

* NVML (``import pynvml``, shipped by the ``nvidia-ml-py`` package) reports memory per
  *physical* GPU, for every process on the machine, without creating a CUDA context.
  ``nvmlDeviceGetMemoryInfo(handle)`` returns ``used`` and ``total`` in bytes.
* ``amdsmi`` (ROCm) reports ``vram_used`` / ``vram_total`` in MiB from
  ``amdsmi_get_gpu_vram_usage(handle)``; handles come in physical order.
* ``torch.<device>.mem_get_info(i)`` returns ``(free, total)`` bytes for the *logical*
  device ``i`` but creates a context on it (hundreds of MiB, and a CUDA context in a
  process that later forks breaks the child), so it is used only as a fallback and only
  when the backend is already initialised in this process.
* ``CUDA_VISIBLE_DEVICES`` holds physical indices or UUIDs (``GPU-...``, ``MIG-...``, also
  unique prefixes); CUDA stops reading the list at the first invalid entry. Logical index
  ``i`` is the ``i``-th entry.

Nothing here imports torch, pynvml or amdsmi at import time.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "GIB",
    "AmdSmiMemoryReader",
    "DEFAULT_SLACK_RATIO",
    "ContextAllowance",
    "DeviceMemory",
    "GpuMemoryLeakWarning",
    "GpuMemoryTimeoutError",
    "MemoryReader",
    "NvmlMemoryReader",
    "TorchMemoryReader",
    "default_memory_reader",
    "first_context_allowance",
    "first_context_max_bytes",
    "slack_for",
    "read_baseline",
    "parse_visible_devices",
    "read_all",
    "wait_for_gpu_memory_to_clear",
    "wait_for_memory_to_return",
]

logger = logging.getLogger(__name__)

GIB: int = 1 << 30
"""Bytes in one GiB (2**30)."""

DEFAULT_SLACK_RATIO: float = 0.01
"""Default slack of the memory waits as a fraction of the device's total memory, when that
is more than the byte floor (1 GiB): 1.40 GiB of a 140.4 GiB H200, 1 GiB of an 80 GB card."""

FIRST_CONTEXT_MAX_BYTES: int = 2 * GIB
FIRST_CONTEXT_MAX_RATIO: float = 0.02
"""The most a first CUDA context is granted: max(2 GiB, 2% of the device), 2.81 GiB of an
H200, where one measured 0.6-0.7 GiB (see :func:`first_context_max_bytes`)."""


@dataclass(frozen=True)
class DeviceMemory:
    """One reading of one device.

    Attributes:
        index: logical device index (as the process sees it, after ``CUDA_VISIBLE_DEVICES``).
        used_bytes: memory in use on the device by every process, in bytes.
        total_bytes: device memory size, in bytes.
        label: how the reader names the physical device (e.g. ``"physical 3, NVIDIA H200"``).
    """

    index: int
    used_bytes: int
    total_bytes: int
    label: str = ""

    @property
    def used_gib(self) -> float:
        """Used memory in GiB."""
        return self.used_bytes / GIB

    @property
    def total_gib(self) -> float:
        """Device memory size in GiB."""
        return self.total_bytes / GIB

    def describe(self) -> str:
        """``"device 0 (physical 0, NVIDIA H200): 75.20/139.80 GiB used"``."""
        label = f" ({self.label})" if self.label else ""
        return f"device {self.index}{label}: {self.used_gib:.2f}/{self.total_gib:.2f} GiB used"


@runtime_checkable
class MemoryReader(Protocol):
    """Reads device memory. Implement it to plug in another backend or a fake in tests.

    ``device_count()`` returns how many logical devices this process sees;
    ``read(index)`` returns a :class:`DeviceMemory` for logical device ``index``
    and may raise any exception if the device cannot be read.
    """

    name: str

    def device_count(self) -> int: ...

    def read(self, index: int) -> DeviceMemory: ...


class GpuMemoryLeakWarning(RuntimeWarning):
    """Device memory was not back within the slack of its baseline after a teardown
    (:class:`~lint_gpu_tests.runtime.runner.VllmRunner` exit, or an isolated test's end)."""


class GpuMemoryTimeoutError(TimeoutError):
    """Device memory did not come down to the threshold before the timeout.

    Attributes:
        readings: the last reading of every device waited on.
        timeout_s: the timeout, in seconds.
        condition: the threshold, in words (e.g. ``"used <= 1.00 GiB"``).
    """

    def __init__(self, readings: Sequence[DeviceMemory], timeout_s: float, condition: str) -> None:
        self.readings: tuple[DeviceMemory, ...] = tuple(readings)
        self.timeout_s = timeout_s
        self.condition = condition
        detail = "; ".join(r.describe() for r in self.readings) or "no devices"
        super().__init__(f"GPU memory did not clear within {timeout_s:g} s ({condition}): {detail}")


def parse_visible_devices(value: str | None) -> list[str] | None:
    """Split a ``CUDA_VISIBLE_DEVICES``-style value into its entries.

    Args:
        value: the variable's value; ``None`` when it is unset.

    Returns:
        ``None`` when unset (every device visible), else the entries in logical order,
        stripped, cut at the first entry CUDA would reject (an empty or negative entry,
        or one that is neither an integer nor a ``GPU-``/``MIG-`` UUID). ``""`` gives ``[]``.
    """
    if value is None:
        return None
    entries: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            break
        if entry.lstrip("-").isdigit():
            if int(entry) < 0:
                break
            entries.append(str(int(entry)))
        elif entry.startswith(("GPU-", "MIG-")):
            entries.append(entry)
        else:
            break
    return entries


class NvmlMemoryReader:
    """NVIDIA reader through NVML (``pynvml`` from ``nvidia-ml-py``).

    Honours ``CUDA_VISIBLE_DEVICES`` (read at construction): logical index ``i`` maps to
    the ``i``-th entry, an integer physical index or a (prefix of a) ``GPU-``/``MIG-`` UUID.

    Raises:
        ImportError: ``pynvml`` is not installed.
        pynvml.NVMLError: NVML cannot be initialised (no driver).
    """

    name = "nvml"

    def __init__(self, visible_devices: str | None = None) -> None:
        self._nvml: Any = importlib.import_module("pynvml")
        self._nvml.nvmlInit()
        if visible_devices is None:
            visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
        self._handles: list[tuple[Any, str]] = self._resolve(parse_visible_devices(visible_devices))

    def _resolve(self, entries: list[str] | None) -> list[tuple[Any, str]]:
        nvml = self._nvml
        count = int(nvml.nvmlDeviceGetCount())
        every = [(nvml.nvmlDeviceGetHandleByIndex(i), f"physical {i}") for i in range(count)]
        if entries is None:
            return every
        uuids: list[str] = []
        for handle, _ in every:
            uuid = nvml.nvmlDeviceGetUUID(handle)
            uuids.append(uuid.decode() if isinstance(uuid, bytes) else str(uuid))
        handles: list[tuple[Any, str]] = []
        for entry in entries:
            if entry.isdigit():
                if int(entry) >= count:
                    break
                handles.append(every[int(entry)])
                continue
            matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(entry)]
            if len(matches) == 1:
                handles.append(every[matches[0]])
                continue
            try:  # a full MIG UUID
                handles.append((nvml.nvmlDeviceGetHandleByUUID(entry), entry))
            except Exception:  # CUDA ignores the rest of the list too
                break
        return handles

    def device_count(self) -> int:
        """Logical devices visible to this process."""
        return len(self._handles)

    def read(self, index: int) -> DeviceMemory:
        """Used/total bytes of logical device ``index`` (all processes counted)."""
        handle, label = self._handles[index]
        info = self._nvml.nvmlDeviceGetMemoryInfo(handle)
        name = self._nvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)
        return DeviceMemory(index, int(info.used), int(info.total), f"{label}, {name}")


class AmdSmiMemoryReader:
    """AMD reader through ``amdsmi`` (ROCm).

    Honours ``HIP_VISIBLE_DEVICES``, else ``CUDA_VISIBLE_DEVICES`` (integer entries only).

    Raises:
        ImportError: ``amdsmi`` is not installed.
    """

    name = "amdsmi"

    def __init__(self) -> None:
        amdsmi: Any = importlib.import_module("amdsmi")
        self._amdsmi = amdsmi
        amdsmi.amdsmi_init()
        every = list(amdsmi.amdsmi_get_processor_handles())
        value = os.environ.get("HIP_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
        entries = parse_visible_devices(value)
        if entries is None:
            self._handles = [(h, f"physical {i}") for i, h in enumerate(every)]
        else:
            self._handles = []
            for entry in entries:
                if not entry.isdigit() or int(entry) >= len(every):
                    break
                self._handles.append((every[int(entry)], f"physical {entry}"))

    def device_count(self) -> int:
        """Logical devices visible to this process."""
        return len(self._handles)

    def read(self, index: int) -> DeviceMemory:
        """Used/total bytes of logical device ``index`` (amdsmi reports MiB)."""
        handle, label = self._handles[index]
        info = self._amdsmi.amdsmi_get_gpu_vram_usage(handle)
        mib = 1 << 20
        used, total = int(info["vram_used"]) * mib, int(info["vram_total"]) * mib
        return DeviceMemory(index, used, total, label)


class TorchMemoryReader:
    """Fallback reader through ``torch.<device_type>.mem_get_info``.

    Indices are already logical. Counts every process's memory, like NVML.

    Args:
        device_type: ``"cuda"``, ``"xpu"``, ``"npu"``, ... (an attribute of ``torch``).
    """

    def __init__(self, device_type: str = "cuda") -> None:
        torch: Any = importlib.import_module("torch")
        self.name = f"torch.{device_type}"
        self._backend: Any = getattr(torch, device_type)

    def device_count(self) -> int:
        """Logical devices visible to this process."""
        return int(self._backend.device_count())

    def read(self, index: int) -> DeviceMemory:
        """Used/total bytes of logical device ``index``."""
        free, total = self._backend.mem_get_info(index)
        return DeviceMemory(index, int(total) - int(free), int(total), self.name)


_default_reader: tuple[int, MemoryReader | None] | None = None


def _initialised_torch_backend() -> str | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    for device_type in ("cuda", "xpu", "npu", "mlu", "hpu"):
        backend = getattr(torch, device_type, None)
        is_initialized = getattr(backend, "is_initialized", None)
        try:
            if callable(is_initialized) and is_initialized():
                return device_type
        except Exception:  # a broken backend is just not used
            continue
    return None


def default_memory_reader(*, refresh: bool = False) -> MemoryReader | None:
    """The best reader available in this process, or ``None`` when none is.

    Order: NVML (``nvidia-ml-py``) when it finds a device; ``amdsmi`` when it finds one;
    ``torch.<device>.mem_get_info`` only when torch is already imported and that backend
    already initialised (so that reading memory never creates a context by itself): so
    without nvidia-ml-py, a process that has initialised CUDA (e.g. the parent of spawned
    isolated tests) reads with ``torch.cuda.mem_get_info``, which counts every process on
    the device, like NVML. The answer is cached per process id (a cached "none" is looked
    at again once a torch backend is initialised); ``refresh=True`` looks again.
    """
    global _default_reader
    pid = os.getpid()
    if not refresh and _default_reader is not None and _default_reader[0] == pid:
        cached = _default_reader[1]
        # none was found: look again once a torch backend is initialised (it reads then)
        if cached is not None or _initialised_torch_backend() is None:
            return cached
    reader: MemoryReader | None = None
    for make in (NvmlMemoryReader, AmdSmiMemoryReader):
        try:
            candidate: MemoryReader = make()
        except Exception as exc:  # missing library, no driver, no device
            logger.debug("memory reader %s unavailable: %r", make.__name__, exc)
            continue
        if candidate.device_count() > 0:
            reader = candidate
            break
    if reader is None:
        device_type = _initialised_torch_backend()
        if device_type is not None:
            reader = TorchMemoryReader(device_type)
    _default_reader = (pid, reader)
    return reader


def read_all(reader: MemoryReader, devices: Sequence[int] | None = None) -> list[DeviceMemory]:
    """Read ``devices`` (logical indices; ``None``: every visible device) with ``reader``."""
    indices = range(reader.device_count()) if devices is None else devices
    return [reader.read(i) for i in indices]


def read_baseline(reader: MemoryReader | None = None) -> list[DeviceMemory] | None:
    """Every visible device's reading, or ``None`` when memory cannot be read here
    (no reader available, or reading failed). Never raises."""
    try:
        if reader is None:
            reader = default_memory_reader()
        return None if reader is None else read_all(reader)
    except Exception as exc:
        logger.debug("cannot read device memory: %r", exc)
        return None


def wait_for_gpu_memory_to_clear(
    *,
    devices: Sequence[int] | None,
    threshold_bytes: int | None = None,
    threshold_ratio: float | None = None,
    timeout_s: float = 120.0,
    poll_interval_s: float = 0.5,
    stable_duration_s: float = 0.0,
    reader: MemoryReader | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[DeviceMemory]:
    """Block until every device's used memory is at or below the threshold.

    Same contract as vLLM's ``tests/utils.py`` helper of the same name, plus a settle time.

    Args:
        devices: logical device indices (after ``CUDA_VISIBLE_DEVICES``); ``None`` means
            every device the reader sees.
        threshold_bytes: clear when ``used <= threshold_bytes`` (bytes, all processes).
        threshold_ratio: clear when ``used / total <= threshold_ratio`` (0.0 to 1.0).
            Give one or both (both: both must hold).
        timeout_s: give up after this many seconds.
        poll_interval_s: seconds between readings.
        stable_duration_s: the condition must hold on consecutive readings spanning at
            least this many seconds (0: the first reading that holds is enough).
        reader: a :class:`MemoryReader`; default :func:`default_memory_reader`.
        clock, sleep: time sources, injectable for tests (seconds).

    Returns:
        The last reading of each device.

    Raises:
        ValueError: neither threshold given.
        RuntimeError: no reader is available (no NVML, amdsmi or initialised torch device).
        GpuMemoryTimeoutError: still above the threshold after ``timeout_s``; its message
            names each device's used/total GiB.
    """
    if threshold_bytes is None and threshold_ratio is None:
        raise ValueError("give threshold_bytes or threshold_ratio")
    conditions: list[str] = []
    if threshold_bytes is not None:
        conditions.append(f"used <= {threshold_bytes / GIB:.2f} GiB")
    if threshold_ratio is not None:
        conditions.append(f"used/total <= {threshold_ratio:.2f}")

    def is_clear(m: DeviceMemory) -> bool:
        if threshold_bytes is not None and m.used_bytes > threshold_bytes:
            return False
        if threshold_ratio is not None and m.total_bytes > 0:
            return m.used_bytes / m.total_bytes <= threshold_ratio
        return True

    return _wait(
        reader,
        devices,
        is_clear,
        " and ".join(conditions),
        timeout_s=timeout_s,
        poll_interval_s=poll_interval_s,
        stable_duration_s=stable_duration_s,
        clock=clock,
        sleep=sleep,
    )


def slack_for(
    total_bytes: int, slack_bytes: int = GIB, slack_ratio: float = DEFAULT_SLACK_RATIO
) -> int:
    """How far above its baseline a device of ``total_bytes`` may stay: the larger of
    ``slack_bytes`` and ``slack_ratio`` of the device (bytes)."""
    return max(int(slack_bytes), int(slack_ratio * total_bytes))


def _describe_slack(slack_bytes: int, slack_ratio: float) -> str:
    if slack_ratio <= 0:
        return f"{slack_bytes / GIB:.2f} GiB"
    return f"max({slack_bytes / GIB:.2f} GiB, {slack_ratio:.1%} of the device)"


ContextAllowance = Callable[[Sequence[DeviceMemory], Sequence[DeviceMemory]], Mapping[int, int]]
"""``(readings, baseline) -> {device index: bytes}``: memory a device may keep above its
baseline + slack because this process itself created a CUDA context after the baseline was
read (see :func:`first_context_allowance`)."""


def _torch_reserved_bytes(index: int) -> int:
    """Bytes torch's caching allocator holds on CUDA device ``index`` in this process (0 when
    torch is not imported or CUDA not initialised in it)."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            return int(cuda.memory_reserved(index))
    except Exception:
        pass
    return 0


def first_context_max_bytes(total_bytes: int) -> int:
    """The most :func:`first_context_allowance` grants one device: the larger of
    :data:`FIRST_CONTEXT_MAX_BYTES` and :data:`FIRST_CONTEXT_MAX_RATIO` of the device (a first
    context took 0.6-0.7 GiB on an H200, over 1 GiB on other drivers and devices)."""
    return max(FIRST_CONTEXT_MAX_BYTES, int(FIRST_CONTEXT_MAX_RATIO * total_bytes))


def first_context_allowance(cuda_at_baseline: bool) -> ContextAllowance:
    """The allowance for this process's first CUDA context, as ``--gpu-leak-report`` takes it.

    A process that had no CUDA context when the baseline was read and has one now (torch
    initialised it, or any library through the driver) keeps that context's memory until it
    exits; it is no leak. Asked once the readings stop coming down, it grants each device
    its growth over the baseline less torch's reserved bytes on it, at most
    :func:`first_context_max_bytes`. Grants nothing when ``cuda_at_baseline`` is true or
    CUDA is still not initialised here.
    """

    def allowance(
        readings: Sequence[DeviceMemory], baseline: Sequence[DeviceMemory]
    ) -> Mapping[int, int]:
        if cuda_at_baseline:
            return {}
        from ._cuda import cuda_initialised_reason

        if cuda_initialised_reason() is None:
            return {}
        before = {m.index: m.used_bytes for m in baseline}
        granted: dict[int, int] = {}
        for reading in readings:
            growth = reading.used_bytes - before.get(reading.index, reading.used_bytes)
            context = growth - _torch_reserved_bytes(reading.index)
            granted[reading.index] = max(
                0, min(context, first_context_max_bytes(reading.total_bytes))
            )
        return granted

    return allowance


def wait_for_memory_to_return(
    baseline: Sequence[DeviceMemory],
    *,
    slack_bytes: int = GIB,
    slack_ratio: float = DEFAULT_SLACK_RATIO,
    context_allowance: ContextAllowance | None = None,
    timeout_s: float = 60.0,
    poll_interval_s: float = 0.25,
    stable_duration_s: float = 0.0,
    reader: MemoryReader | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[DeviceMemory]:
    """Block until every device is back within its slack of its own ``baseline``.

    Args:
        baseline: earlier readings (from :func:`read_all`), one per device to watch.
        slack_bytes: how far above its baseline a device may stay, in bytes, at least
            (default 1 GiB).
        slack_ratio: ... or this fraction of the device's total memory, when larger
            (default :data:`DEFAULT_SLACK_RATIO`, 1%: 1.40 GiB of a 140.4 GiB H200); 0 keeps
            the slack at ``slack_bytes``. See :func:`slack_for`.
        context_allowance: asked once, at the first reading that is not clear and did not
            come down from the one before (the dead processes' memory is back by then: the
            driver freed it within 0.12 s on an H200); what it returns per device is added
            to that device's limit (e.g. :func:`first_context_allowance`).
        timeout_s, poll_interval_s, stable_duration_s, reader, clock, sleep: as for
            :func:`wait_for_gpu_memory_to_clear`.

    Returns:
        The last reading of each device.

    Raises:
        RuntimeError: no reader is available.
        GpuMemoryTimeoutError: a device is still above its limit after ``timeout_s``.
    """
    limits = {
        m.index: m.used_bytes + slack_for(m.total_bytes, slack_bytes, slack_ratio) for m in baseline
    }
    granted: dict[int, int] = {}
    previous: list[int | None] = [None]
    asked = [context_allowance is None]

    def is_clear(m: DeviceMemory) -> bool:
        return m.used_bytes <= limits[m.index] + granted.get(m.index, 0)

    def observe(readings: list[DeviceMemory]) -> None:
        if asked[0] or all(is_clear(m) for m in readings):
            return
        total = sum(m.used_bytes for m in readings)
        if previous[0] is not None and total >= previous[0] and context_allowance is not None:
            asked[0] = True
            granted.update(context_allowance(readings, baseline))
            if any(granted.values()):
                logger.info("first CUDA context of this process, not waited for: %s", _granted())
        previous[0] = total

    def _granted() -> str:
        return ", ".join(
            f"device {index}: {size / GIB:.2f} GiB" for index, size in granted.items() if size
        )

    def condition() -> str:
        text = f"used <= baseline + {_describe_slack(slack_bytes, slack_ratio)}"
        if any(granted.values()):
            text += f" + this process's first CUDA context ({_granted()})"
        return text

    return _wait(
        reader,
        list(limits),
        is_clear,
        condition,
        timeout_s=timeout_s,
        poll_interval_s=poll_interval_s,
        stable_duration_s=stable_duration_s,
        clock=clock,
        sleep=sleep,
        observe=observe,
    )


def _wait(
    reader: MemoryReader | None,
    devices: Sequence[int] | None,
    is_clear: Callable[[DeviceMemory], bool],
    condition: str | Callable[[], str],
    *,
    timeout_s: float,
    poll_interval_s: float,
    stable_duration_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    observe: Callable[[list[DeviceMemory]], None] | None = None,
) -> list[DeviceMemory]:
    if reader is None:
        reader = default_memory_reader()
    if reader is None:
        raise RuntimeError(
            "no GPU memory reader: install nvidia-ml-py (NVIDIA) or amdsmi (ROCm), "
            "or initialise the torch device first"
        )
    start = clock()
    clear_since: float | None = None
    while True:
        readings = read_all(reader, devices)
        now = clock()
        if observe is not None:
            observe(readings)
        if all(is_clear(m) for m in readings):
            if clear_since is None:
                clear_since = now
            if now - clear_since >= stable_duration_s:
                logger.debug("GPU memory clear after %.2f s", now - start)
                return readings
        else:
            clear_since = None
        if now - start >= timeout_s:
            text = condition if isinstance(condition, str) else condition()
            raise GpuMemoryTimeoutError(readings, timeout_s, text)
        sleep(poll_interval_s)

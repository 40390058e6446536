"""Whether this process has initialised CUDA, found without importing torch or initialising
anything.

Facts this relies on (docs/gpu-runtime.md, section (f): measured on an NVIDIA H200, driver
580.159.04, torch 2.11.0+cu130, 2026-12-02):

* importing a CUDA build of torch maps ``libcuda.so`` into the process *without*
  initialising CUDA, so "the driver library is mapped" alone is no signal;
* with ``libcuda.so`` mapped, the driver's own ``cuDeviceGetCount`` answers
  ``CUDA_ERROR_NOT_INITIALIZED`` (3) before ``cuInit`` and ``CUDA_SUCCESS`` (0) after it,
  whoever called ``cuInit`` (torch, a CUDA library, a profiler);
* a child forked after ``cuInit`` cannot use CUDA: torch's first CUDA call there raises
  "CUDA driver initialization failed" (``cuInit`` by the driver only) or "Cannot
  re-initialize CUDA in forked subprocess" (``torch.cuda.init()``).

The driver library is opened with ``RTLD_NOLOAD``: ``dlopen`` returns the copy already
mapped and never loads one, so a process without CUDA stays without it. Linux only
(``/proc/self/maps``); elsewhere only torch is asked.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys

__all__ = [
    "CUDA_ERROR_NOT_INITIALIZED",
    "CUDA_INIT_FAILURES",
    "cuda_initialised_reason",
    "driver_initialised_reason",
    "mapped_driver_libraries",
]

CUDA_SUCCESS = 0
CUDA_ERROR_NOT_INITIALIZED = 3
"""``CUresult`` values (CUDA driver API, ``cuda.h``)."""

_DRIVER_NAME = re.compile(r"libcuda\.so(\.\d+)*")

CUDA_INIT_FAILURES: tuple[str, ...] = (
    "CUDA driver initialization failed",  # torch, parent initialised through the driver
    "Cannot re-initialize CUDA in forked subprocess",  # torch, parent initialised by torch
    "CUDA error: initialization error",  # cudaErrorInitializationError as torch words it
    "CUDA_ERROR_NOT_INITIALIZED",
)
"""Text of a child's failure that means it could not initialise CUDA (the first two were
read off forked children on the H200, docs/gpu-runtime.md section (f))."""


def mapped_driver_libraries(maps_path: str = "/proc/self/maps") -> list[str]:
    """Paths of the CUDA driver library (``libcuda.so``, ``libcuda.so.1``,
    ``libcuda.so.580.159.04``) mapped into this process, read from ``maps_path``; ``[]``
    where the file cannot be read (not Linux)."""
    try:
        with open(maps_path) as file:
            text = file.read()
    except OSError:
        return []
    paths: list[str] = []
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        path = fields[5].strip()
        if _DRIVER_NAME.fullmatch(os.path.basename(path)) and path not in paths:
            paths.append(path)
    return paths


def _device_count_result(path: str) -> tuple[int, int] | None:
    """``(CUresult, count)`` of ``cuDeviceGetCount`` in the already-mapped library at
    ``path``; ``None`` when it is not mapped (any more) or has no such function."""
    noload = getattr(os, "RTLD_NOLOAD", 0)
    if not noload:
        return None  # without RTLD_NOLOAD, opening it could load the driver
    try:
        library = ctypes.CDLL(path, mode=noload | os.RTLD_LAZY)
        function = library.cuDeviceGetCount
    except (OSError, AttributeError):
        return None
    count = ctypes.c_int(0)
    function.argtypes = [ctypes.POINTER(ctypes.c_int)]
    function.restype = ctypes.c_int
    return int(function(ctypes.byref(count))), int(count.value)


def driver_initialised_reason(maps_path: str = "/proc/self/maps") -> str | None:
    """Why this process counts as driver-initialised (``cuInit`` has run), or ``None``.

    Asks ``cuDeviceGetCount`` of each mapped ``libcuda.so``: ``CUDA_SUCCESS`` means
    ``cuInit`` ran; ``CUDA_ERROR_NOT_INITIALIZED`` (the answer after a mere ``import torch``)
    or any other error means it did not. Never loads the library, never initialises CUDA.
    """
    for path in mapped_driver_libraries(maps_path):
        answer = _device_count_result(path)
        if answer is not None and answer[0] == CUDA_SUCCESS:
            return (
                f"the CUDA driver is initialised in this process ({os.path.basename(path)} "
                f"is mapped and cuDeviceGetCount succeeds: {answer[1]} device(s); cuInit ran, "
                "through a CUDA library or a profiler if not through torch)"
            )
    return None


def _torch_reason() -> str | None:
    """Asks torch only when it is already imported (never imports it)."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    for probe, reason in (
        ("is_initialized", "torch.cuda.is_initialized() is True in this process"),
        ("_is_in_bad_fork", "torch.cuda._is_in_bad_fork() is True in this process"),
    ):
        function = getattr(cuda, probe, None)
        try:
            if callable(function) and function():
                return reason
        except Exception:  # a broken torch counts as not initialised
            continue
    return None


def cuda_initialised_reason() -> str | None:
    """Why CUDA counts as initialised in this process (so a forked child could not use it),
    or ``None``: torch's own answer when torch is imported, else the driver's
    (:func:`driver_initialised_reason`)."""
    return _torch_reason() or driver_initialised_reason()

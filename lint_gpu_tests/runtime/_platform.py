"""Which accelerator platform this process is on, found without importing torch.

Used to choose the default start method of process isolation: vLLM's tests use
``spawn`` on ROCm and XPU (their runtimes do not survive ``fork`` after initialisation)
and ``fork`` elsewhere.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from typing import Literal

__all__ = ["Platform", "detect_platform", "default_start_method"]

Platform = Literal["cuda", "rocm", "xpu", "other"]


def _from_torch(torch: object) -> Platform | None:
    version = getattr(torch, "version", None)
    if getattr(version, "hip", None):
        return "rocm"
    if getattr(version, "cuda", None):
        return "cuda"
    xpu = getattr(torch, "xpu", None)
    is_available = getattr(xpu, "is_available", None)
    try:
        if callable(is_available) and is_available():
            return "xpu"
    except Exception:  # a broken backend counts as absent
        pass
    return None


def detect_platform() -> Platform:
    """Guess the platform, cheapest evidence first.

    1. torch, if it is already imported (``torch.version.hip``, ``torch.version.cuda``,
       ``torch.xpu.is_available()``);
    2. the installed torch's version tag, read from package metadata without importing it
       (``2.5.1+rocm6.2``, ``2.7.0+xpu``, ``2.7.0+cu126``);
    3. environment hints: ``ROCM_PATH``/``HIP_VISIBLE_DEVICES`` or an importable ``amdsmi``
       mean ROCm; ``ZE_AFFINITY_MASK``/``ONEAPI_ROOT`` mean XPU.

    Returns ``"other"`` when nothing points anywhere.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        found = _from_torch(torch)
        if found is not None:
            return found
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    local = version.partition("+")[2]
    if local.startswith("rocm"):
        return "rocm"
    if local.startswith("xpu"):
        return "xpu"
    if local.startswith("cu"):
        return "cuda"
    if "ROCM_PATH" in os.environ or "HIP_VISIBLE_DEVICES" in os.environ:
        return "rocm"
    if "ZE_AFFINITY_MASK" in os.environ or "ONEAPI_ROOT" in os.environ:
        return "xpu"
    if importlib.util.find_spec("amdsmi") is not None:
        return "rocm"
    return "other"


def default_start_method() -> Literal["fork", "spawn"]:
    """``"spawn"`` on ROCm and XPU, and where ``fork`` does not exist; ``"fork"`` elsewhere."""
    if not hasattr(os, "fork"):
        return "spawn"
    return "spawn" if detect_platform() in ("rocm", "xpu") else "fork"

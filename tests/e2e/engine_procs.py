"""Engine processes of this process tree, read with psutil: the e2e suite's ground truth.

vLLM 0.32's CPU engine names its children with setproctitle: ``VLLM::EngineCore`` and
``VLLM::Worker`` (read off ``ps`` on a running engine). A zombie has already exited and
holds no memory, so it is not counted.
"""

from __future__ import annotations

import os
import time

import psutil

ENGINE_PREFIX = "VLLM::"


def engine_processes(root_pid: int | None = None) -> list[psutil.Process]:
    """Live descendants of ``root_pid`` (default: this process) named ``VLLM::*``."""
    try:
        root = psutil.Process(root_pid or os.getpid())
        children = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    alive = []
    for child in children:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            if child.name().startswith(ENGINE_PREFIX) or any(
                part.startswith(ENGINE_PREFIX) for part in child.cmdline()[:1]
            ):
                alive.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return alive


def wait_until_no_engine_processes(timeout_s: float, root_pid: int | None = None) -> float:
    """Seconds until no engine process is left; raises AssertionError naming them."""
    start = time.monotonic()
    while True:
        left = engine_processes(root_pid)
        if not left:
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            names = ", ".join(f"{p.pid} {p.name()}" for p in left)
            raise AssertionError(f"engine processes still alive after {timeout_s} s: {names}")
        time.sleep(0.1)

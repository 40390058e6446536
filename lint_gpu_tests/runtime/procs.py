"""Engine processes of this process tree, read with psutil (imported on first use).

A vLLM V1 engine runs in child processes that name themselves with setproctitle:
``VLLM::EngineCore`` and ``VLLM::Worker`` on vLLM 0.32 (read off ``ps`` on a running CPU
engine; ``/proc/<pid>/comm`` keeps the first 15 characters, the command line the whole
title). A zombie has already exited and holds no memory, so it is never counted.

Used by :class:`~lint_gpu_tests.runtime.runner.VllmRunner` (which processes its engine
started, to kill those that outlive the shutdown grace) and by ``--gpu-leak-report``
(engine processes still alive after a test).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENGINE_PREFIX",
    "EngineProcess",
    "alive",
    "describe_processes",
    "engine_processes",
    "kill",
]

ENGINE_PREFIX = "VLLM::"
"""The process-title prefix vLLM gives its engine-core and worker processes."""


@dataclass(frozen=True)
class EngineProcess:
    """One live engine process.

    Attributes:
        pid: process id.
        name: its title (``"VLLM::EngineCore"``, ``"VLLM::Worker"``).
        rss_bytes: resident set size when read, in bytes.
        create_time: psutil's creation time (seconds since the epoch); with ``pid`` it
            identifies the process even after the pid is reused.
    """

    pid: int
    name: str
    rss_bytes: int
    create_time: float

    @property
    def key(self) -> tuple[int, float]:
        """``(pid, create_time)``: unique across pid reuse."""
        return (self.pid, self.create_time)

    def describe(self) -> str:
        """``"VLLM::EngineCore pid 1234, 0.61 GiB RSS"``."""
        return f"{self.name} pid {self.pid}, {self.rss_bytes / (1 << 30):.2f} GiB RSS"


def _engine_title(process: Any) -> str | None:
    """The process's engine title, or ``None`` when it is not an engine process."""
    name = str(process.name())
    if name.startswith(ENGINE_PREFIX):
        return name
    cmdline = process.cmdline()
    if cmdline and str(cmdline[0]).startswith(ENGINE_PREFIX):
        return str(cmdline[0]).split()[0]
    return None


def engine_processes(root_pid: int | None = None) -> list[EngineProcess]:
    """Live (not zombie) descendants of ``root_pid`` (default: this process) whose title
    starts with ``VLLM::``, oldest first.

    Returns ``[]`` when psutil is not installed or ``root_pid`` does not exist; a process
    that ends while it is being read is left out.
    """
    try:
        import psutil
    except ImportError:
        return []
    try:
        children = psutil.Process(root_pid or os.getpid()).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for child in children:
        try:
            with child.oneshot():
                if child.status() == psutil.STATUS_ZOMBIE:
                    continue
                title = _engine_title(child)
                if title is None:
                    continue
                found.append(
                    EngineProcess(child.pid, title, child.memory_info().rss, child.create_time())
                )
        except psutil.Error:
            continue
    return sorted(found, key=lambda p: (p.create_time, p.pid))


def alive(processes: list[EngineProcess]) -> list[EngineProcess]:
    """Those of ``processes`` still running and not zombies (the same pid *and* start time;
    found through psutil, so also after they were re-parented away from this process)."""
    try:
        import psutil
    except ImportError:
        return []
    left = []
    for process in processes:
        try:
            current = psutil.Process(process.pid)
            if current.create_time() != process.create_time:
                continue
            if current.status() != psutil.STATUS_ZOMBIE:
                left.append(process)
        except psutil.Error:
            continue
    return left


def kill(process: EngineProcess) -> bool:
    """SIGKILL ``process`` if it is still the same process; ``True`` when a signal was sent."""
    try:
        import psutil
    except ImportError:
        return False
    try:
        current = psutil.Process(process.pid)
        if current.create_time() != process.create_time:
            return False
        current.kill()
    except psutil.Error:
        return False
    return True


def describe_processes(processes: list[EngineProcess]) -> str:
    """``"VLLM::EngineCore pid 1234, 0.61 GiB RSS; VLLM::Worker pid 1240, 1.70 GiB RSS"``."""
    return "; ".join(p.describe() for p in processes)

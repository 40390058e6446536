"""Sessions side by side: within an engine budget (:func:`run_jobs`), or each on devices of
its own (:func:`run_on_devices`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Job:
    """One session to run: ``module`` of the ``variant`` tree.

    Attributes:
        module: ``/``-separated path of the module in the tree.
        variant: which tree (``before``, ``safe``, ...).
        tree: the tree it runs in.
        peak: engines it may have alive at once.
        cost: its expected seconds (its last recording's), to start the longest first.
        devices: the devices its engines take (:func:`run_on_devices`).
    """

    module: str
    variant: str
    tree: Path
    peak: int = 1
    cost: float = 100.0
    devices: int = 1


def run_jobs(jobs: list[Job], run: Callable[[Job], Any], *, workers: int,
             engine_budget: int) -> dict[Job, Any]:
    """Run ``jobs`` with ``run`` on ``workers`` threads (each a pytest process), never
    starting one whose ``peak`` would take the engines of the running jobs past
    ``engine_budget`` (a job whose peak alone exceeds it runs alone). The jobs of the highest
    peak go first, the longest of them first, so that the lighter jobs are left to run beside
    them (under a budget of 3, two jobs of peak 2 cannot run together, a 2 and a 1 can).
    ``run`` may return None to skip a job (a time limit reached): it is left out of the result.

    Returns:
        ``job -> run(job)``.

    Raises:
        Whatever ``run`` raised, after every started job has ended.
    """
    in_use = [0, 0]  # engines, jobs

    def claim(job: Job) -> int | None:
        if in_use[1] and in_use[0] + job.peak > engine_budget:
            return None
        in_use[0] += job.peak
        in_use[1] += 1
        return job.peak

    def release(job: Job, peak: int) -> None:
        in_use[0] -= peak
        in_use[1] -= 1

    pending = sorted(jobs, key=lambda j: (-j.peak, -j.cost))
    return _schedule(pending, lambda job, _: run(job), claim, release, workers)


def run_on_devices(jobs: list[Job], run: Callable[[Job, tuple[str, ...]], Any], *,
                   devices: Sequence[str], per_device: int = 1) -> dict[Job, Any]:
    """Run ``jobs`` with ``run(job, its devices)``, each on ``job.devices`` devices of its own
    (all of them for a job that needs more than there are): a device takes at most
    ``per_device`` jobs at once, and a job waits until enough devices have room. The jobs
    needing the most devices go first, the longest of them first; a lighter job may start
    beside them. Jobs are given the devices with the most room, in the order of ``devices``.
    ``run`` may return None to skip a job: it is left out of the result.

    Returns:
        ``job -> run(job, devices)``.

    Raises:
        ValueError: when ``devices`` is empty or ``per_device`` below 1.
        Whatever ``run`` raised, after every started job has ended.
    """
    if not devices or per_device < 1:
        raise ValueError("devices to schedule on and at least one session a device")
    room = dict.fromkeys(devices, per_device)

    def claim(job: Job) -> tuple[str, ...] | None:
        wanted = min(max(1, job.devices), len(devices))
        free = sorted((d for d in devices if room[d] > 0), key=lambda d: -room[d])
        if len(free) < wanted:
            return None
        given = tuple(sorted(free[:wanted], key=list(devices).index))
        for device in given:
            room[device] -= 1
        return given

    def release(job: Job, given: tuple[str, ...]) -> None:
        for device in given:
            room[device] += 1

    pending = sorted(jobs, key=lambda j: (-j.devices, -j.cost))
    return _schedule(pending, run, claim, release, len(devices) * per_device)


def _schedule(pending: list[Job], run: Callable[[Job, Any], Any],
              claim: Callable[[Job], Any], release: Callable[[Job, Any], None],
              workers: int) -> dict[Job, Any]:
    """Run ``pending`` (in order of preference) on ``workers`` threads: each thread takes the
    first job ``claim`` gives resources to (not None) and calls ``run(job, resources)``,
    then ``release(job, resources)``; a thread with no job it can claim waits for one to end.
    A job ``run`` returns None for is left out of the result; the first error ``run`` raised
    is raised once every started job has ended, and no job starts after it."""
    results: dict[Job, Any] = {}
    errors: list[BaseException] = []
    lock = threading.Condition()

    def take() -> tuple[Job, Any] | None:
        with lock:
            while True:
                if not pending or errors:
                    return None
                for job in pending:
                    got = claim(job)
                    if got is not None:
                        pending.remove(job)
                        return job, got
                lock.wait()

    def worker() -> None:
        while (taken := take()) is not None:
            job, got = taken
            try:
                result = run(job, got)
                if result is not None:
                    results[job] = result
            except BaseException as error:  # noqa: BLE001 - re-raised by the caller's thread
                errors.append(error)
            finally:
                with lock:
                    release(job, got)
                    lock.notify_all()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results

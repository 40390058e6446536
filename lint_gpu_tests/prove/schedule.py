"""Sessions side by side, within an engine budget."""

from __future__ import annotations

import threading
from collections.abc import Callable
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
    """

    module: str
    variant: str
    tree: Path
    peak: int = 1
    cost: float = 100.0


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
    pending = sorted(jobs, key=lambda j: (-j.peak, -j.cost))
    results: dict[Job, Any] = {}
    errors: list[BaseException] = []
    lock = threading.Condition()
    in_use = [0, 0]  # engines, jobs

    def take() -> Job | None:
        with lock:
            while True:
                if not pending or errors:
                    return None
                for job in pending:
                    if in_use[1] == 0 or in_use[0] + job.peak <= engine_budget:
                        pending.remove(job)
                        in_use[0] += job.peak
                        in_use[1] += 1
                        return job
                lock.wait()

    def worker() -> None:
        while (job := take()) is not None:
            try:
                result = run(job)
                if result is not None:
                    results[job] = result
            except BaseException as error:  # noqa: BLE001 - re-raised by the caller's thread
                errors.append(error)
            finally:
                with lock:
                    in_use[0] -= job.peak
                    in_use[1] -= 1
                    lock.notify_all()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results

"""``prove --executor ray``: the sessions run as tasks of a Ray cluster.

Each session is one Ray task asking for as many GPUs as the module's engines take (the same
count the local scheduler gives it, :func:`.devices.engine_devices`); Ray chooses the node
and the GPUs, and sets their visibility variable. The task gets the copy of the tree it runs
in as a tar archive (put in the object store once per copy), runs the session as a local run
does (:func:`.session.run_session`, in a temporary folder of its node) and returns the
recorder's records, the session's seconds, pytest's exit status, its log and the GPUs it ran
on. The driver writes the log and the record where a local run leaves them and judges the
modules exactly as it judges local sessions.

Ray is imported only here, and only when this executor is used (the ``ray`` extra).
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lint_gpu_tests.prove.devices import visible_options
from lint_gpu_tests.prove.schedule import Job
from lint_gpu_tests.prove.session import SessionResult, run_session

#: What a task returns: records, seconds, exit status, log text, the GPUs it ran on.
TaskResult = tuple[dict[str, dict[str, Any]], float, int, str, tuple[str, ...]]

#: ``extractall``'s filter where this Python has them: the archive is the driver's own copy,
#: links as links.
_TAR_FILTER: dict[str, Any] = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}


def ray_module() -> Any:
    """The ``ray`` module.

    Raises:
        ValueError: when Ray is not installed.
    """
    try:
        import ray
    except ImportError as error:
        raise ValueError("--executor ray needs Ray: pip install 'gpu-test-lint[ray]'") \
            from error
    return ray


def archive(tree: Path) -> bytes:
    """``tree``'s files as an uncompressed tar archive (links as links), names relative to
    it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(tree, arcname=".")
    return out.getvalue()


def run_task(tree_archive: bytes, module: str, pytest_args: Sequence[str], timeout_s: float,
             python_path: Sequence[str], deadline: float | None) -> TaskResult | None:
    """One session on a Ray worker (the body of the remote task): the tree unpacked into a
    temporary folder, ``module`` run there on the task's GPUs (:func:`.devices.
    visible_options`). None when it starts past ``deadline`` (``time.time()``).

    Returns:
        ``(records, seconds, exit status, log text, GPU ids)``.
    """
    if deadline is not None and time.time() > deadline:
        return None
    import ray

    gpus = tuple(str(g) for g in ray.get_gpu_ids())
    with tempfile.TemporaryDirectory(prefix="gpu-test-lint-prove-") as scratch:
        tree = Path(scratch, "tree")
        with tarfile.open(fileobj=io.BytesIO(tree_archive)) as tar:
            tar.extractall(tree, **_TAR_FILTER)
        ran = run_session(tree, module, pytest_args=[*visible_options(gpus), *pytest_args],
                          timeout_s=timeout_s, scratch=Path(scratch, "session"),
                          python_path=python_path)
        log = ran.log.read_text(encoding="utf-8", errors="replace")
    return ran.records, ran.seconds, ran.returncode, log, gpus


def run_on_ray(jobs: list[Job], finish: Callable[[Job, SessionResult, tuple[str, ...]], Any],
               *, folder: Callable[[Job], Path], address: str | None,
               pytest_args: Sequence[str], timeout_s: float, python_path: Sequence[str],
               deadline: float | None, alone: bool = False) -> dict[Job, Any]:
    """Run ``jobs`` as Ray tasks, each asking for ``job.devices`` GPUs (at most those of the
    cluster's largest node; none on a cluster without GPUs), the costliest first; with
    ``alone``, one at a time. Each task's log and record are written to ``folder(job)`` under
    the names a local session gives them, and ``finish(job, its SessionResult, its GPUs)`` is
    called on this thread as each task ends. Ray is started (``ray.init(address)``) unless it is
    already.

    Returns:
        ``job -> finish(...)``, without the jobs whose task started past ``deadline``.

    Raises:
        ValueError: when Ray is not installed.
        Whatever a task raised (``ray.exceptions.RayTaskError``).
    """
    ray = ray_module()
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    gpus = max((int(node["Resources"].get("GPU", 0)) for node in ray.nodes()
                if node["Alive"]), default=0)
    remote = ray.remote(num_cpus=1)(run_task)
    trees = {path: ray.put(archive(path)) for path in {job.tree for job in jobs}}
    pending = sorted(jobs, key=lambda j: (-j.devices, -j.cost))
    running: dict[Any, Job] = {}
    results: dict[Job, Any] = {}
    while pending or running:
        while pending and not (alone and running):
            job = pending.pop(0)
            need = min(max(1, job.devices), gpus)
            ref = remote.options(num_gpus=need).remote(
                trees[job.tree], job.module, list(pytest_args), timeout_s, list(python_path),
                deadline)
            running[ref] = job
        [ready], _ = ray.wait(list(running), num_returns=1)
        job = running.pop(ready)
        got: TaskResult | None = ray.get(ready)
        if got is None:
            continue
        records, seconds, returncode, log_text, given = got
        where = folder(job)
        where.mkdir(parents=True, exist_ok=True)
        slug = job.module.replace("/", "-")
        log = where / f".pytest-{slug}.log"
        log.write_text(log_text, encoding="utf-8")
        (where / f".record-{slug}.json").write_text(json.dumps(records), encoding="utf-8")
        results[job] = finish(job, SessionResult(records, seconds, returncode, log), given)
    return results

"""One session of ``prove``: one test module of one tree, run by pytest in its own process
with the recorder plugin (:mod:`lint_gpu_tests.runtime.recorder`).

This file's code is one of the recordings' inputs (:func:`~.store.runtime_digest`): what it
runs and how decides what the recorder sees. One module a session makes a recording depend on
that module alone (an engine another module leaked cannot reach it) and lets sessions run side
by side.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lint_gpu_tests.runtime.recorder import CHILD_ENV, RECORD_ENV, read_records

#: Wall-clock limit of one session in seconds by default, a guard against a hung engine.
SESSION_TIMEOUT_S = 900.0

#: pytest exit statuses after which a session's records are complete: all tests passed,
#: some failed, or none was collected (``-k`` selected none of the module's).
COMPLETE_EXIT_STATUSES = (0, 1, 5)

#: The session's own pytest options, before the user's: the recorder; no random order (a
#: test's start must see the same engines alive in both trees); no cache written into the tree.
PYTEST_OPTIONS = ("-p", "lint_gpu_tests.runtime.recorder", "-p", "no:randomly",
                  "-p", "no:cacheprovider", "-rA", "--tb=short")


@dataclass
class SessionResult:
    """What one session left.

    Attributes:
        records: the recorder's JSON, by test id (empty when pytest died before writing it).
        seconds: wall time of the pytest process, in seconds.
        returncode: pytest's exit status; -9 when it ran past its limit and was killed.
        log: path of the captured stdout/stderr.
    """

    records: dict[str, dict[str, Any]]
    seconds: float
    returncode: int
    log: Path

    @property
    def complete(self) -> bool:
        """True when pytest ended normally and wrote its records (none for status 5)."""
        return self.returncode in COMPLETE_EXIT_STATUSES and (
            bool(self.records) or self.returncode == 5)


def run_session(tree: Path, module: str, *, pytest_args: Sequence[str] = (),
                timeout_s: float = SESSION_TIMEOUT_S, scratch: Path | None = None,
                python_path: Sequence[str] = ()) -> SessionResult:
    """Run ``module`` of ``tree`` in one pytest process with the recorder.

    Args:
        tree: the folder pytest runs in.
        module: the module's path inside it, ``/``-separated (``isolate/test_x.py``).
        pytest_args: the user's pytest arguments, before the module.
        timeout_s: wall-clock limit in seconds; past it the process group is killed.
        scratch: where the record and log files go (default ``tree``), under names made from
            ``module`` (``.record-isolate-test_x.py.json``), so sessions can run side by side.
        python_path: folders put first on the session's ``PYTHONPATH``.

    Returns:
        The session's result.
    """
    slug = module.replace("/", "-")
    folder = scratch or tree
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / f".record-{slug}.json"
    log = folder / f".pytest-{slug}.log"
    for stale in (record, *folder.glob(f".record-{slug}.json.*")):
        stale.unlink(missing_ok=True)
    env = dict(os.environ)
    env.pop(CHILD_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*python_path, env.get("PYTHONPATH")]))
    env[RECORD_ENV] = str(record)
    cmd = [sys.executable, "-m", "pytest", *PYTEST_OPTIONS, *pytest_args, module]
    start = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        # Its own process group, so that a session past its limit is killed with the engine
        # processes it started.
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            returncode = -9
    seconds = time.monotonic() - start
    return SessionResult(read_records(str(record)), seconds, returncode, log)

"""One inner pytest session of the differential runs: one corpus module of one tree, with the
recorder plugin, in its own ``python -m pytest`` process.

This file is one of the recording's inputs (``recordings.HARNESS_FILES``): what it runs and
how decides what the recorder sees, so a change here re-runs every module. One module a
session makes a recording depend on that module alone (an engine another module leaked
cannot reach it) and lets two sessions run side by side.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

E2E_DIR = Path(__file__).resolve().parent

#: Wall-clock limit of one inner session in seconds, a guard against a hung engine: the
#: longest module session (``isolate/``, each test a spawned child importing vLLM) took
#: 140 s on a quiet 2-core machine and about twice that on a loaded one (docs/e2e.md).
SESSION_TIMEOUT_S = 900

#: pytest exit statuses after which a session's records are complete: all tests passed, or
#: some failed (the corpus's ``fails_before`` tests fail on purpose).
COMPLETE_EXIT_STATUSES = (0, 1)


@dataclass
class SessionResult:
    """What one inner session left.

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
        """True when pytest ended normally and wrote its records."""
        return self.returncode in COMPLETE_EXIT_STATUSES and bool(self.records)


def run_session(tree: Path, module: str, *, timeout_s: float = SESSION_TIMEOUT_S
                ) -> SessionResult:
    """Run ``module`` of ``tree`` in one pytest process with the recorder.

    Args:
        tree: a folder made by ``harness.copy_corpus`` (possibly fixed since).
        module: the module's path inside it, ``/``-separated (``isolate/test_x.py``).
        timeout_s: wall-clock limit in seconds; past it the process is killed.

    Returns:
        The session's result; its record and log files lie in ``tree`` under names made from
        ``module`` (``.record-isolate-test_x.py.json``), so sessions of one tree can run side
        by side.
    """
    slug = module.replace("/", "-")
    record = tree / f".record-{slug}.json"
    log = tree / f".pytest-{slug}.log"
    for stale in (record, Path(f"{record}.child")):
        stale.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(E2E_DIR), env.get("PYTHONPATH")]))
    env["GPU_TEST_LINT_RECORD"] = str(record)
    cmd = [sys.executable, "-m", "pytest", "-p", "recorder", "-p", "no:randomly",
           "-rA", "--tb=short", module]
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
    records = json.loads(record.read_text()) if record.exists() else {}
    return SessionResult(records, seconds, returncode, log)

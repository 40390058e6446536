"""Spawned isolated tests that leave a process behind or hang, each with a real engine.

Run by ``tests/gpu/test_gpu_isolation.py``. ``h1`` returns but leaves a non-daemon helper
process: the spawned interpreter's exit joins it forever (a runner without a limit on that join
would wait with it); ``h3`` hangs with its engine alive until its ``isolation_timeout``. Both
must fail naming what was left, and the next test must start on a clean device with no process
left.
"""

import multiprocessing
import os
import time

import psutil
import pytest
from gpu_probe import above_gib, generate, new_engine, record, seconds_until_back

from lint_gpu_tests.runtime import create_new_process_for_each_test

KEEP = []
LIMIT_S = 120


def _sleep_forever():
    while True:
        time.sleep(60)


def _engine_processes():
    found = []
    for process in psutil.process_iter(["pid", "name", "cmdline", "status"]):
        title = " ".join(process.info["cmdline"] or []) or process.info["name"] or ""
        if title.startswith("VLLM::") and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(f"{title} pid {process.info['pid']}")
    return found


def _alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _after(key, pid_keys):
    from gpu_probe import read

    record(f"{key}.next_test_start_s", time.time() - read(f"{key}.returned_at"))
    record(f"{key}.s_until_back", seconds_until_back())
    record(f"{key}.engine_processes_left", _engine_processes())
    record(f"{key}.alive_left", [read(k) for k in pid_keys if _alive(read(k))])


@create_new_process_for_each_test("spawn")
def test_h1_leaves_a_helper_behind():
    llm = new_engine()
    KEEP.append(llm)  # leaked on purpose
    record("h1.generated", generate(llm))
    record("h1.during_gib", above_gib())
    helper = multiprocessing.get_context("fork").Process(target=_sleep_forever, daemon=False)
    helper.start()
    record("h1.child_pid", os.getpid())
    record("h1.helper_pid", helper.pid)
    record("h1.returned_at", time.time())


def test_h2_after(at_setup):
    _after("h1", ["h1.child_pid", "h1.helper_pid"])


@pytest.mark.isolation_timeout(LIMIT_S)
@create_new_process_for_each_test("spawn")
def test_h3_hangs_with_its_engine():
    record("h3.started_at", time.time())
    llm = new_engine()
    KEEP.append(llm)
    record("h3.generated", generate(llm))
    record("h3.during_gib", above_gib())
    record("h3.child_pid", os.getpid())
    record("h3.engine_processes", _engine_processes())
    record("h3.returned_at", time.time())  # (not returned: from here it hangs)
    time.sleep(3600)


def test_h4_after(at_setup):
    from gpu_probe import read

    record("h3.limit_s", LIMIT_S)
    record("h3.test_took_s", time.time() - read("h3.started_at"))
    _after("h3", ["h3.child_pid"])

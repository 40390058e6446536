"""Process isolation with a real engine in the child: its exit frees the device.

Run by ``tests/gpu/test_gpu_isolation.py``. Engines are hand-managed and kept in a
module-level list on purpose: only the child's exit (and its process group's) frees them.
"""

import os
import time

import pytest
from gpu_probe import above_gib, generate, new_engine, read, record, seconds_until_back

from lint_gpu_tests.runtime import create_new_process_for_each_test

KEEP = []


def _hog(key):
    llm = new_engine()
    KEEP.append(llm)  # leaked on purpose
    record(f"{key}.generated", generate(llm))
    record(f"{key}.during_gib", above_gib())
    record(f"{key}.child_pid", os.getpid())
    record(f"{key}.child_done_at", time.time())
    return llm


def _after(key):
    record(f"{key}.child_done_to_next_test_s", time.time() - read(f"{key}.child_done_at"))
    record(f"{key}.s_until_back", seconds_until_back())
    record(f"{key}.parent_pid", os.getpid())


@create_new_process_for_each_test("fork", timeout_s=240)
def test_i1_fork_engine_in_child():
    _hog("i1")


def test_i2_after_fork(at_setup):
    _after("i1")


@create_new_process_for_each_test("spawn", timeout_s=240)
def test_i3_spawn_engine_in_child_fails():
    llm = _hog("i3")
    assert generate(llm) == 0, "the spawned child's failure"


def test_i4_after_spawn(at_setup):
    _after("i3")


@create_new_process_for_each_test("fork", timeout_s=240)
def test_i5_fork_skip_in_child():
    pytest.skip("skipped in the forked child")

"""``prove``'s reading of a session's log: which failing tests did not exercise the fix and
why (:mod:`lint_gpu_tests.prove.diagnose`), the verdict they give (inconclusive), and the
devices a module's engines take (:mod:`lint_gpu_tests.prove.devices`)."""

from __future__ import annotations

from typing import Any

from lint_gpu_tests.prove import Status, judge
from lint_gpu_tests.prove.devices import engine_devices
from lint_gpu_tests.prove.diagnose import not_exercised, sections

LOG = """\
============================= test session starts ==============================
collected 5 items

tests/test_m.py FFFEF                                                    [100%]

=================================== ERRORS ====================================
____________________ ERROR at setup of TestC.test_killed[1] ____________________
tests/test_m.py:30: in engine
    return LLM("m")
E   RuntimeError: Engine core initialization failed. See root cause above.
---------------------------- Captured stderr setup -----------------------------
ERROR Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.
=================================== FAILURES ===================================
__________________________________ test_own ___________________________________
tests/test_m.py:5: in test_own
    assert llm.generate(["a"]) == ["b"]
E   AssertionError: assert ['a'] == ['b']
_________________________________ test_profile _________________________________
tests/test_m.py:9: in test_profile
    llm = LLM("m")
../lib/lint_gpu_tests/runtime/recorder.py:151: in __init__
    orig_init(llm, *args, **kwargs)
vllm/worker.py:10: in determine_available_memory
    assert self.init_snapshot.free_memory > free_gpu_memory, (
E   AssertionError: Error in memory profiling. Initial free memory 10 GiB, current free 12 GiB.
__________________________________ test_oom ___________________________________
tests/test_m.py:13: in test_oom
    llm = LLM("m")
E   torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
_______________________________ test_recorder ________________________________
tests/test_m.py:17: in test_recorder
    llm = LLM("m")
../lib/lint_gpu_tests/runtime/recorder.py:152: in __init__
    on_engine(llm)
../lib/lint_gpu_tests/runtime/recorder.py:95: in resolved_config
    config = llm.llm_engine.vllm_config
E   AttributeError: 'LLM' object has no attribute 'llm_engine'
=========================== short test summary info ============================
FAILED tests/test_m.py::test_own - AssertionError: assert ['a'] == ['b']
FAILED tests/test_m.py::test_profile - AssertionError: Error in memory profiling. Initial...
FAILED tests/test_m.py::test_oom - torch.OutOfMemoryError: CUDA out of memory.
ERROR tests/test_m.py::TestC::test_killed[1] - RuntimeError: Engine core initialization...
FAILED tests/test_m.py::test_recorder - AttributeError: 'LLM' object has no attribute...
========================= 4 failed, 1 error in 9.12s ==========================
"""


def rec(outcome: str, engines: int = 0) -> dict[str, Any]:
    return {"outcome": outcome, "engines": [{"model": "m"}] * engines, "texts": [],
            "sampling": [], "leaked_at_start": 0}


RECORDS = {f"tests/test_m.py::{name}": rec(outcome) for name, outcome in (
    ("test_own", "failed"), ("test_profile", "failed"), ("test_oom", "failed"),
    ("TestC::test_killed[1]", "error"), ("test_recorder", "failed"), ("test_ok", "passed"))}


def test_each_failing_test_is_told_why_from_the_log() -> None:
    assert not_exercised(RECORDS, LOG) == {
        "tests/test_m.py::test_profile": "the start-up memory profile (another process "
                                         "changed the device's free memory)",
        "tests/test_m.py::test_oom": "out of memory",
        "tests/test_m.py::TestC::test_killed[1]": "a killed child process",
        "tests/test_m.py::test_recorder": "the recorder's own error",
    }


def test_sections_are_keyed_by_heading_and_summary_by_test_id() -> None:
    found = sections(LOG)
    assert sorted(found) == [
        "TestC.test_killed[1]", "test_oom", "test_own", "test_profile", "test_recorder",
        "tests/test_m.py::TestC::test_killed[1]", "tests/test_m.py::test_oom",
        "tests/test_m.py::test_own", "tests/test_m.py::test_profile",
        "tests/test_m.py::test_recorder"]
    assert found["tests/test_m.py::test_own"] == ["AssertionError: assert ['a'] == ['b']"]


def test_a_passing_test_is_never_blamed_on_the_machine() -> None:
    log = LOG.replace("FAILED tests/test_m.py::test_oom", "PASSED tests/test_m.py::test_oom")
    assert not_exercised({"tests/test_m.py::test_oom": rec("passed")}, log) == {}


def test_a_test_that_did_not_exercise_the_fix_makes_the_module_inconclusive() -> None:
    before = {"t.py::a": rec("failed"), "t.py::b": rec("passed", 1)}
    after = {"t.py::a": rec("passed", 1), "t.py::b": rec("passed", 1)}
    verdict = judge("t.py", before, after, not_exercised={"t.py::a": "before: out of memory"})
    assert (verdict.status, verdict.note, len(verdict.differences)) == (
        Status.INCONCLUSIVE, "1 test did not exercise the fix: t.py::a: before: out of memory",
        2)
    assert judge("t.py", before, after).status is Status.DIFFERS


def test_no_engine_in_either_run_where_the_original_builds_one_is_inconclusive() -> None:
    both_failed = {"t.py::a": rec("failed")}
    verdict = judge("t.py", both_failed, both_failed, expects_engines=True)
    assert (verdict.status, verdict.note, verdict.failed_in_both, verdict.engines) == (
        Status.INCONCLUSIVE, "no engine was built in either run, where the original builds one",
        ["t.py::a"], {"before": 0, "after": 0})
    assert judge("t.py", both_failed, both_failed).status is Status.SAME


def test_engine_devices_from_keyword_literals() -> None:
    source = """\
import vllm
from vllm import LLM

def test_a(vllm_runner, n):
    LLM("m", tensor_parallel_size=2, pipeline_parallel_size=2)
    vllm.LLM("m", tensor_parallel_size=n)
    with vllm_runner("m", tensor_parallel_size=2) as runner:
        pass
    print("LLM")
"""
    assert engine_devices(source) == [4, 1, 2]
    assert engine_devices("def f(:\n") == []
    assert engine_devices("x = 1\n") == []

"""GPU proof (marked ``gpu``; skipped unless NVML sees an NVIDIA GPU).

Each scenario runs its own pytest session in a subprocess against the stand-in ``vllm``
whose engine-core child process allocates ``GPU_TEST_HOLD_GIB`` (default 40) GiB with
torch and holds it. The inner tests read device memory with NVML (all processes counted)
and record what they saw in a JSON file; the outer test checks the figures:

(a) hand-managed engines (``del llm`` only; a fixture yielding the engine; a failing test
    whose traceback keeps the engine) leave the memory held when the next test starts;
(b) with ``VllmRunner`` (and the factory) memory is back within 1 GiB of the baseline
    within 10 s of the block's exit, also when the body fails;
(c) ``--gpu-leak-report`` names the test that leaked;
(d) process isolation (fork and spawn) frees everything when the child exits;
(e) with CUDA initialised in the parent at import, isolation spawns instead of forking
    (said once), and the children use CUDA.

Set ``GPU_RESULTS_DIR`` to keep the JSON figures (docs/gpu-runtime.md quotes them).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import plugin_args


def _nvidia_gpus() -> int:
    try:
        from lint_gpu_tests.runtime.memory import NvmlMemoryReader

        return NvmlMemoryReader().device_count()
    except Exception:
        return 0


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(_nvidia_gpus() == 0, reason="no NVIDIA GPU visible to NVML"),
    pytest.mark.usefixtures("fake_vllm"),
]

HOLD_GIB = float(os.environ.get("GPU_TEST_HOLD_GIB", "40"))
SLACK_GIB = 1.0

INNER_CONFTEST = """
import json, os, time
import pytest
from lint_gpu_tests.runtime.memory import GIB, NvmlMemoryReader, read_all

HOLD_GIB = float(os.environ.get("GPU_TEST_HOLD_GIB", "40"))
_READER = NvmlMemoryReader()

def used_gib():
    return sum(m.used_bytes for m in read_all(_READER)) / GIB

BASELINE = used_gib()

def record(key, value, overwrite=True):
    path = os.environ["GPU_RESULTS_JSON"]
    data = json.load(open(path)) if os.path.exists(path) else {}
    if key in data and not overwrite:
        return
    data[key] = round(value, 3) if isinstance(value, float) else value
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)

def read(key):
    return json.load(open(os.environ["GPU_RESULTS_JSON"]))[key]

def above():
    return used_gib() - BASELINE

def seconds_until_back(timeout_s=60.0):
    t0 = time.monotonic()
    while above() > 1.0:
        if time.monotonic() - t0 > timeout_s:
            return None
        time.sleep(0.02)
    return time.monotonic() - t0

record("baseline_gib", BASELINE, overwrite=False)  # a spawned child imports this again
record("hold_gib", HOLD_GIB)

@pytest.fixture
def at_setup(request):
    # what the next test's fixtures (e.g. a new engine) would find
    record(request.node.name + ".at_setup_gib", above())
"""

HAND_MANAGED = """
import gc, pytest, vllm
from conftest import HOLD_GIB, above, record, seconds_until_back

def test_a1_del_only():
    llm = vllm.LLM("fake/model", hold_gib=HOLD_GIB)
    record("del_only.during_gib", above())
    del llm

def test_a2_after_del_only(at_setup):
    gc.collect()  # what every hand-managed suite must remember to do
    record("del_only.seconds_after_gc_collect", seconds_until_back())

@pytest.fixture
def llm():
    yield vllm.LLM("fake/model", hold_gib=HOLD_GIB)

def test_a3_fixture_yields_engine(llm):
    record("fixture_yield.during_gib", above())

def test_a4_after_fixture_yield(at_setup):
    gc.collect()
    record("fixture_yield.seconds_after_gc_collect", seconds_until_back())

@pytest.mark.xfail(raises=AssertionError, strict=True)
def test_a5_fails_with_engine_alive():
    llm = vllm.LLM("fake/model", hold_gib=HOLD_GIB)
    record("failing_test.during_gib", above())
    assert llm.generate(["a"]) == ["b"]

def test_a6_after_failing_test(at_setup):
    gc.collect()
    record("failing_test.seconds_after_gc_collect", seconds_until_back())
"""

RUNNER = """
import time, weakref, pytest
from conftest import HOLD_GIB, above, record, seconds_until_back

def test_b1_runner(vllm_runner):
    with vllm_runner("fake/model", hold_gib=HOLD_GIB) as runner:
        llm = weakref.proxy(runner.llm)
        record("runner.during_gib", above())
        t0 = time.monotonic()
    record("runner.exit_s", time.monotonic() - t0)
    record("runner.after_exit_gib", above())
    record("runner.steps", [f"{s.name}:{s.status}" for s in runner.teardown_steps])

def test_b2_after_runner(at_setup):
    pass

@pytest.mark.xfail(raises=AssertionError, strict=True)
def test_b3_runner_body_fails(vllm_runner):
    with vllm_runner("fake/model", hold_gib=HOLD_GIB) as runner:
        llm = runner.llm  # a strong alias: the traceback will keep the engine object
        record("runner_fail.during_gib", above())
        assert llm.generate(["a"]) == ["b"]

def test_b4_after_failing_runner_test(at_setup):
    pass

def test_b5_factory_two_engines(vllm_runner_factory):
    half = HOLD_GIB / 2
    with vllm_runner_factory("a", hold_gib=half), vllm_runner_factory("b", hold_gib=half):
        record("factory.during_gib", above())
        t0 = time.monotonic()
    record("factory.exit_s", time.monotonic() - t0)
    record("factory.after_exit_gib", above())
"""

LEAK_REPORT = """
import vllm
from conftest import HOLD_GIB

CACHE = []

def test_c1_uses_runner(vllm_runner):
    with vllm_runner("fake/model", hold_gib=HOLD_GIB):
        pass

def test_c2_caches_engine_in_module():
    CACHE.append(vllm.LLM("fake/model", hold_gib=HOLD_GIB))  # a helper's engine cache

def test_c3_innocent():
    pass
"""

ISOLATION = """
import time
import vllm
from lint_gpu_tests.runtime import create_new_process_for_each_test
from conftest import GIB, HOLD_GIB, above, read, record, seconds_until_back

KEEP = []

def hog(method):
    import torch
    KEEP.append(vllm.LLM("fake/model", hold_gib=HOLD_GIB))  # leaked on purpose
    KEEP.append(torch.ones(10 * GIB, dtype=torch.uint8, device="cuda"))  # and this
    record(f"isolated_{method}.during_gib", above())
    record(f"isolated_{method}.child_done_at", time.time())

@create_new_process_for_each_test("fork")
def test_d1_fork():
    hog("fork")

def test_d2_after_fork(at_setup):
    done = read("isolated_fork.child_done_at")
    record("isolated_fork.s_child_done_to_next_test", time.time() - done)
    record("isolated_fork.seconds_until_back", seconds_until_back())

@create_new_process_for_each_test("spawn")
def test_d3_spawn():
    hog("spawn")

def test_d4_after_spawn(at_setup):
    done = read("isolated_spawn.child_done_at")
    record("isolated_spawn.s_child_done_to_next_test", time.time() - done)
    record("isolated_spawn.seconds_until_back", seconds_until_back())
"""


def _run_inner(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    source: str,
    *args: str,
) -> tuple[pytest.RunResult, dict[str, Any]]:
    results = pytester.path / f"{name}.json"
    monkeypatch.setenv("GPU_RESULTS_JSON", str(results))
    monkeypatch.setenv("GPU_TEST_HOLD_GIB", str(HOLD_GIB))
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(**{f"test_{name}": source})
    result = pytester.runpytest_subprocess(
        *plugin_args(), "-p", "no:cacheprovider", "-rA", *args, timeout=420
    )
    figures: dict[str, Any] = json.loads(results.read_text())
    keep = os.environ.get("GPU_RESULTS_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(results, Path(keep) / f"{name}.json")
        (Path(keep) / f"{name}.out.txt").write_text(result.stdout.str())
    print(json.dumps(figures, indent=1, sort_keys=True))
    return result, figures


def test_a_hand_managed_engines_stay_on_the_gpu(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, f = _run_inner(pytester, monkeypatch, "hand_managed", HAND_MANAGED)
    result.assert_outcomes(passed=5, xfailed=1)
    held = HOLD_GIB - SLACK_GIB
    for pattern, next_test in [
        ("del_only", "test_a2_after_del_only"),
        ("fixture_yield", "test_a4_after_fixture_yield"),
        ("failing_test", "test_a6_after_failing_test"),
    ]:
        assert f[f"{pattern}.during_gib"] >= held, pattern
        assert f[f"{next_test}.at_setup_gib"] >= held, pattern  # still held: the leak
        assert f[f"{pattern}.seconds_after_gc_collect"] is not None, pattern


def test_b_runner_gives_the_memory_back(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, f = _run_inner(pytester, monkeypatch, "runner", RUNNER)
    result.assert_outcomes(passed=4, xfailed=1)
    assert f["runner.during_gib"] >= HOLD_GIB - SLACK_GIB
    assert f["runner.after_exit_gib"] <= SLACK_GIB
    assert f["runner.exit_s"] < 10
    assert f["test_b2_after_runner.at_setup_gib"] <= SLACK_GIB
    assert f["runner_fail.during_gib"] >= HOLD_GIB - SLACK_GIB
    assert f["test_b4_after_failing_runner_test.at_setup_gib"] <= SLACK_GIB
    assert f["factory.during_gib"] >= HOLD_GIB - SLACK_GIB
    assert f["factory.after_exit_gib"] <= SLACK_GIB
    assert f["factory.exit_s"] < 10


def test_c_leak_report_names_the_leaking_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _ = _run_inner(
        pytester,
        monkeypatch,
        "leak_report",
        LEAK_REPORT,
        "--gpu-leak-report",
        "--gpu-leak-settle-s=2",
    )
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*GPU leak report*",
            "engine processes (VLLM::*, psutil): 1 of 3 tests left engine processes alive "
            "after their teardown and gc.collect():",
            "  test_leak_report.py::test_c2_caches_engine_in_module: VLLM::EngineCor pid *"
            "  <- leaked here",
            "device memory: 1 of 3 tests added more than 1.00 GiB to the memory above the "
            "baseline:",
            "  test_leak_report.py::test_c2_caches_engine_in_module: +*<- leaked here",
        ]
    )
    # named where it appeared, once per kind: not the runner's test, not the next one
    assert "test_c1_uses_runner:" not in out and "test_c3_innocent:" not in out
    assert out.count("<- leaked here") == 2


def test_d_isolation_frees_everything_on_exit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, f = _run_inner(pytester, monkeypatch, "isolation", ISOLATION)
    result.assert_outcomes(passed=4)
    for method, next_test in [("fork", "test_d2_after_fork"), ("spawn", "test_d4_after_spawn")]:
        assert f[f"isolated_{method}.during_gib"] >= HOLD_GIB + 10 - SLACK_GIB
        assert f[f"isolated_{method}.seconds_until_back"] is not None
        assert f[f"isolated_{method}.seconds_until_back"] < 10
        assert f[f"{next_test}.at_setup_gib"] <= SLACK_GIB


FORK_GUARD = """
import os
import warnings

import torch

CAPABILITY = torch.cuda.get_device_capability()  # initialises CUDA in this process, at import
PARENT_PID = os.getpid()  # evaluated again in a spawned child, inherited by a forked one

from lint_gpu_tests.runtime import create_new_process_for_each_test


def use_cuda():
    assert not torch.cuda._is_in_bad_fork()
    x = torch.ones(1 << 20, device="cuda")
    assert int(x.sum().item()) == 1 << 20
    assert PARENT_PID == os.getpid(), "forked: the module was not imported again"


@create_new_process_for_each_test("fork")
def test_e1_fork_asked_for_after_cuda_init():
    use_cuda()


@create_new_process_for_each_test()
def test_e2_default_method_after_cuda_init():
    use_cuda()


def test_e3_parent_holds_cuda():
    assert torch.cuda.is_initialized()
"""


def test_e_never_forks_after_cuda_is_initialised(pytester: pytest.Pytester) -> None:
    """Without the guard, a child forked after CUDA is initialised dies with "Cannot
    re-initialize CUDA in forked subprocess"."""
    pytester.makepyfile(test_fork_guard=FORK_GUARD)
    result = pytester.runpytest_subprocess(
        *plugin_args(), "-p", "no:cacheprovider", "-rA", "-W", "default", timeout=300
    )
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert (
        out.count(
            "ForkAfterCudaWarning: create_new_process_for_each_test: "
            "torch.cuda.is_initialized() is True in this process"
        )
        == 1
    )
    assert "Cannot re-initialize CUDA" not in out

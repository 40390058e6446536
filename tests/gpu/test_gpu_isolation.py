"""``create_new_process_for_each_test`` with a real engine in the child.

Suites ``suites/test_isolation.py`` (fork and spawn, each with an engine the child leaks on
purpose), ``suites/test_cuda_in_parent.py`` (CUDA initialised in the parent first, by torch),
``suites/test_driver_cuda.py`` (CUDA initialised in the parent through the driver only) and
``suites/test_hang.py`` (a spawned test that leaves a process behind, one that hangs).
"""

from __future__ import annotations

from pathlib import Path

from gpu_session import run_suite

SLACK_GIB = 1.0
CUDA_FORK_ERROR = "Cannot re-initialize CUDA in forked subprocess"


def test_fork_and_spawn_free_the_engine_with_the_child(tmp_path: Path, tiny_model: str) -> None:
    session = run_suite(tmp_path, "isolation", ["test_isolation.py"])
    f = session.figures
    assert session.outcomes() == {
        "test_i1_fork_engine_in_child": "passed",
        "test_i2_after_fork": "passed",
        "test_i3_spawn_engine_in_child_fails": "failed",
        "test_i4_after_spawn": "passed",
        "test_i5_fork_skip_in_child": "skipped",
    }, session.output
    held = 0.25 * f["total_gib"]
    for child, after in (("i1", "test_i2_after_fork"), ("i3", "test_i4_after_spawn")):
        assert f[f"{child}.during_gib"] >= held, child
        assert f[f"{child}.child_pid"] != f[f"{child}.parent_pid"], child
        assert f[f"{after}.at_setup_gib"] <= SLACK_GIB, child  # the next test starts clean
        assert f[f"{child}.s_until_back"] is not None, child
    # the spawned child's failure comes back with its traceback, pointing at the test
    assert "RemoteTraceback" in session.output
    assert "in isolated child process" in session.output and ", spawn)" in session.output
    assert 'assert generate(llm) == 0, "the spawned child\'s failure"' in session.output
    assert "AssertionError: the spawned child's failure" in session.output
    assert "skipped in the forked child" in session.output


class ForkedAfterCudaInit(AssertionError):
    """The isolated child was forked from a parent with CUDA initialised, and died of it."""


def test_default_isolation_after_cuda_init_in_parent(tmp_path: Path, tiny_model: str) -> None:
    session = run_suite(tmp_path, "cuda_in_parent", ["test_cuda_in_parent.py"])
    f = session.figures
    assert f["f.parent_cuda_initialised"] is True
    assert f["test_f2_after.at_setup_gib"] <= SLACK_GIB
    if f["test_f1_default_isolation_after_cuda_init.outcome"] == "failed":
        assert CUDA_FORK_ERROR in session.output, session.output
        raise ForkedAfterCudaInit(CUDA_FORK_ERROR)
    assert f["test_f1_default_isolation_after_cuda_init.outcome"] == "passed", session.output
    assert f["f1.during_gib"] >= 0.25 * f["total_gib"]


def test_default_isolation_after_cuda_init_through_the_driver(
    tmp_path: Path, tiny_model: str
) -> None:
    session = run_suite(tmp_path, "driver_cuda", ["test_driver_cuda.py"])
    f = session.figures
    assert f["d.libcuda_mapped_by_import_torch"], "import torch mapped no libcuda.so"
    assert f["d.reason_before_cuinit"] is None  # a mere import is not an initialisation
    assert f["d.cuinit"] == 0 and f["d.torch_initialised"] is False
    assert f["d.reason_after_cuinit"].startswith("the CUDA driver is initialised")
    assert f["test_d1_default_isolation_after_driver_init.outcome"] == "passed", session.output
    child = f["d1.child_pid"]
    assert child != f["d1.parent_pid"]
    assert f.get(f"d.imported_in.{child}") is True, "the child did not import the module: forked"
    assert session.output.count("ForkAfterCudaWarning: ") == 1, session.output
    assert "cuDeviceGetCount succeeds" in session.output
    assert f["d1.during_gib"] >= 0.25 * f["total_gib"]
    assert f["test_d2_after.at_setup_gib"] <= SLACK_GIB


def test_spawned_test_left_behind_or_hung_ends_naming_the_leftovers(
    tmp_path: Path, tiny_model: str
) -> None:
    session = run_suite(tmp_path, "hang", ["test_hang.py"])
    f = session.figures
    assert session.outcomes() == {
        "test_h1_leaves_a_helper_behind": "failed",
        "test_h2_after": "passed",
        "test_h3_hangs_with_its_engine": "failed",
        "test_h4_after": "passed",
    }, session.output
    out = session.output
    assert "IsolatedTestTimeoutError: isolated test (spawn): the test returned, but child" in out
    assert f"pid {f['h1.helper_pid']}" in out
    assert "ran past 120 s (limit from @pytest.mark.isolation_timeout" in out
    assert "VLLM::EngineCore" in out
    for key in ("h1", "h3"):
        assert f[f"{key}.during_gib"] >= 0.25 * f["total_gib"], key
        assert f[f"{key}.engine_processes_left"] == [], key
        assert f[f"{key}.alive_left"] == [], key
    assert f["test_h2_after.at_setup_gib"] <= SLACK_GIB
    assert f["test_h4_after.at_setup_gib"] <= SLACK_GIB

"""``create_new_process_for_each_test`` with a real engine in the child (issue 16).

Suites ``suites/test_isolation.py`` (fork and spawn, each with an engine the child leaks on
purpose) and ``suites/test_cuda_in_parent.py`` (CUDA initialised in the parent first).
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

"""``VllmRunner``, the ``vllm_runner`` fixture and the factory on a real engine.

Suite ``suites/test_runner.py``; one engine takes 0.3 of the device. Memory is read with
NVML, as GiB above the session's baseline; "back" is within 1 GiB of it.
"""

from __future__ import annotations

from pathlib import Path

from gpu_session import run_suite

SLACK_GIB = 1.0


def test_runner_fixture_and_factory_give_the_memory_back(tmp_path: Path, tiny_model: str) -> None:
    session = run_suite(tmp_path, "runner", ["test_runner.py"])
    f = session.figures
    assert session.returncode == 0, session.output
    assert set(session.outcomes().values()) == {"passed"}, session.output
    held = 0.25 * f["total_gib"]
    for key in ("r1", "r3"):
        assert f[f"{key}.during_gib"] >= held, key
        assert f[f"{key}.after_exit_gib"] <= SLACK_GIB, key
        assert f[f"{key}.back_s"] is not None and f[f"{key}.back_s"] <= 10, key
        assert f[f"{key}.generated"] >= 1, key
        assert "shutdown_engine_core:ok" in f[f"{key}.steps"], key
        assert not [s for s in f[f"{key}.steps"] if s.endswith(":failed")], key
    # the alias and the cycle outlived the block and the test; the memory did not
    assert f["r2.survivors"] == 1
    assert f["test_r2_after_survivors.at_setup_gib"] <= SLACK_GIB
    # the factory: two engines at once; the first exit waits for nothing
    assert f["r4.during_gib"] >= 2 * held
    assert f["r4.after_first_exit_gib"] >= held
    assert "wait_for_memory:skipped" in f["r4.first_steps"]
    assert f["r4.after_exit_gib"] <= SLACK_GIB
    assert f["r4.back_s"] is not None and f["r4.back_s"] <= 10
    assert f["test_r5_after_factory.at_setup_gib"] <= SLACK_GIB

"""What ``fix_source`` says it fixed: counted per code and message, repeats included; what
it removed of the rules not selected, which the run notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source, unselected_fixed

SOURCE = b'''from vllm import LLM


def helper():
    return LLM("m")


def test_a():
    llm = LLM("m")
    assert llm.generate(["x"])


def test_b():
    llm = LLM("m")
    assert llm.generate(["x"])
'''


def test_identical_messages_are_counted_one_by_one() -> None:
    outcome = fix_source(SOURCE, "tests/test_counts.py", Config())
    assert [(v.code, v.location.row) for v in outcome.fixed] == [("GPU001", 9), ("GPU001", 14)]
    assert [(v.code, v.location.row) for v in outcome.remaining] == [("GPU001", 7)]
    assert outcome.remaining[0].fix is not None
    assert outcome.remaining[0].fix.reason == (
        "`helper()` returns the engine it builds and is not called in this module: the fix "
        "makes it a context manager together with its callers in other modules, planned when "
        "a caller's hand cleanup of that engine (GPU003, GPU004) is checked in the same run, "
        "and none is")


UNFIXABLE_AFTER = b'''import threading

from vllm import LLM


def test_thread():
    llm = LLM("m")
    t = threading.Thread(target=llm.generate, args=(["x"],))
    t.start()
    t.join()


def test_returned():
    llm = LLM("m")
    return llm
'''


def test_a_fix_is_credited_to_the_violation_that_has_it() -> None:
    # Found by a first-time user: the same message twice, the first fixable (unsafe), the
    # second not: the fix was credited to the second, and JSON/SARIF edits followed it.
    outcome = fix_source(UNFIXABLE_AFTER, "tests/test_x.py", Config(), unsafe=True)
    assert [(v.code, v.location.row) for v in outcome.fixed] == [("GPU001", 7)]
    assert [(v.code, v.location.row) for v in outcome.remaining] == [("GPU001", 16)]


TOGETHER = b'''import gc

from vllm import LLM


def test_two():
    a = LLM("m")
    b = LLM("m")
    assert a.generate(["x"]) == b.generate(["x"])
    del a, b
    gc.collect()
'''


def test_a_message_quoting_lines_that_moved_is_not_fixed() -> None:
    # GPU007 has no fix; its message names the engines' lines, which the rewrite moves.
    outcome = fix_source(TOGETHER, "tests/test_x.py", Config(), unsafe=True)
    assert "GPU007" not in [v.code for v in outcome.fixed]
    assert "GPU007" in [v.code for v in outcome.remaining]


CLEANUP = b'''import gc

from vllm import LLM


def test_x():
    llm = LLM("m")
    llm.generate("hi")
    del llm
    gc.collect()
'''
CLEANUP_FIXED = b'''import weakref


def test_x(vllm_runner):
    with vllm_runner("m") as runner:
        llm = weakref.proxy(runner.llm)
        llm.generate("hi")
'''


def test_a_wrap_removes_unselected_cleanup_and_says_so() -> None:
    """``--select GPU001``: the with-block rewrite deletes the cleanup GPU004 reports, not
    selected, as it must (cleanup of the proxy after the block would fail); the cleanup
    is not counted as fixed, and :func:`unselected_fixed` names it."""
    config = Config(select=("GPU001",))
    outcome = fix_source(CLEANUP, "tests/test_x.py", config)
    assert outcome.new_source == CLEANUP_FIXED
    assert [(v.code, v.location.row) for v in outcome.fixed] == [("GPU001", 7)]
    assert outcome.remaining == []
    assert [(v.code, v.location.row, v.location.column, v.message) for v in unselected_fixed(
        CLEANUP, CLEANUP_FIXED, "tests/test_x.py", config)] == [
        ("GPU004", 9, 5, "Manual cleanup `del llm` in a function that owns an engine"),
        ("GPU004", 10, 5, "Manual cleanup `gc.collect()` in a function that owns an engine")]
    ignored = Config(per_file_ignores=(("test_*.py", ("GPU004",)),))
    assert [(v.code, v.location.row) for v in unselected_fixed(
        CLEANUP, CLEANUP_FIXED, "tests/test_x.py", ignored)] == [("GPU004", 9), ("GPU004", 10)]
    assert unselected_fixed(CLEANUP, CLEANUP_FIXED, "tests/test_x.py", Config()) == []


def test_the_cli_notes_the_unselected_violations_a_wrap_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from lint_gpu_tests.interfaces.cli import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "test_x.py").write_bytes(CLEANUP)
    note = ["  test_x.py:9:5: GPU004 Manual cleanup `del llm` in a function that owns an engine",
            "  test_x.py:10:5: GPU004 Manual cleanup `gc.collect()` in a function that owns an "
            "engine"]
    diff = CliRunner().invoke(cli, ["check", "--no-cache", "--select", "GPU001", "--diff",
                                    "test_x.py"])
    assert (diff.exit_code, diff.stderr.splitlines()) == (1, [
        "Would fix 1 violation.", "note: the fixes would also remove 2 violations not "
        "selected:", *note])
    fixed = CliRunner().invoke(cli, ["check", "--no-cache", "--select", "GPU001", "--fix",
                                     "test_x.py"])
    assert (fixed.exit_code, fixed.stdout.splitlines()) == (0, [
        "Found 1 violation (1 fixed, 0 remaining).",
        "note: the fixes also removed 2 violations not selected:", *note])
    assert (tmp_path / "test_x.py").read_bytes() == CLEANUP_FIXED
    (tmp_path / "test_x.py").write_bytes(CLEANUP)
    everything = CliRunner().invoke(cli, ["check", "--no-cache", "--fix", "test_x.py"])
    assert (everything.exit_code, everything.stdout) == (
        0, "Found 3 violations (3 fixed, 0 remaining).\n")

"""What ``fix_source`` says it fixed: counted per code and message, repeats included."""

from __future__ import annotations

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source

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
        "makes it a context manager together with its callers, and `--fix` rewrites one "
        "module at a time")


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

"""What ``fix_source`` says it fixed: counted per code and message, repeats included."""

from __future__ import annotations

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixloop import fix_source

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
        "the engine is returned to the caller, so it must outlive this function")

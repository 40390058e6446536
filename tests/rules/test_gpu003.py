"""GPU003 finalizer-shutdown: an engine torn down by a finalizer or a try/finally.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu003_finalizer_shutdown.py``) and
what else is particular to it. Elsewhere: its rewrites byte for byte in
``tests/fixtures/fix/`` (``addfinalizer_*``, ``atexit_register``, ``try_finally_*``).
"""

from __future__ import annotations

from rule_testing import example_tests, reports, rule_class

RULE = rule_class("GPU003")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


def test_shutdown_in_finally_is_gpu003_only() -> None:
    assert reports("""\
        import gc

        from vllm import LLM


        def test_try():
            llm = LLM("x")
            try:
                llm.generate(["a"])
            finally:
                llm.llm_engine.engine_core.shutdown()
                gc.collect()


        def test_finally_does_more(log):
            llm = LLM("x")
            try:
                llm.generate(["a"])
            finally:
                log.close()
                llm.llm_engine.engine_core.shutdown()
        """) == [(7, 11, "GPU001"), (8, 5, "GPU003"), (16, 11, "GPU001"), (21, 9, "GPU004")]

"""Precision of the rules (issue 12): names resolve per scope, functions run as their own
process are isolated, GPU004 is cleanup at teardown only, one statement gets one report,
and ``del`` of the runner inside its own with-block is GPU004 with a fix when that is safe.

Each case gives the exact ``(line, column, code)`` reports and, where a fix is involved,
its applicability, reason and the exact fixed source.
"""

from __future__ import annotations

import textwrap

import pytest

from lint_gpu_tests.config import Config, ConfigError, config_from_table
from lint_gpu_tests.engine import check_source
from lint_gpu_tests.fixloop import fix_source

PATH = "tests/test_x.py"


def found(source: str, config: Config | None = None,
          path: str = PATH) -> list[tuple[int, int, str]]:
    src = textwrap.dedent(source).encode()
    return [(v.location.row, v.location.column, v.code)
            for v in check_source(src, path, config or Config())]


def fixes(source: str, path: str = PATH) -> list[tuple[int, str, str, str]]:
    """``(line, code, applicability, reason)`` of every report."""
    src = textwrap.dedent(source).encode()
    return [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none",
             (v.fix.reason or "") if v.fix else "")
            for v in check_source(src, path, Config())]


# --------------------------------------------------------------------------- scopes

def test_local_binding_shadows_the_import() -> None:
    assert found("""\
        from mylib import LocalLLM
        from vllm import LLM


        def test_local():
            LLM = LocalLLM
            m = LLM("x")
            del m


        def test_real():
            m = LLM("x")
            del m
        """) == [(12, 9, "GPU001"), (13, 5, "GPU004")]


def test_parameters_loop_with_and_except_targets_shadow() -> None:
    assert found("""\
        import contextlib

        from vllm import LLM


        def test_param(LLM):
            assert LLM("x")


        def test_kwonly(*, LLM=None):
            assert LLM("x")


        def test_loop():
            for LLM in (str, int):
                assert LLM("x")


        def test_with():
            with contextlib.nullcontext(str) as LLM:
                assert LLM("x")


        def test_except():
            try:
                pass
            except Exception as LLM:
                assert LLM("x")


        def test_lambda():
            make = lambda LLM: LLM("x")
            assert make(str)
        """) == []


def test_comprehension_variable_is_its_own_scope() -> None:
    # The comprehension's variable shadows only inside it; the first iterable is
    # evaluated outside, and the engine built after it is vLLM's.
    assert found("""\
        from vllm import LLM


        def test_comp():
            names = [LLM for LLM in ("a", "b")]
            llm = LLM(names[0])
            assert llm.generate(["a"])
        """) == [(6, 11, "GPU001")]


def test_class_body_is_not_seen_from_its_methods() -> None:
    assert found("""\
        from vllm import LLM


        class TestGroup:
            LLM = str
            made = LLM("x")

            def test_m(self):
                assert LLM("x").generate(["a"])
        """) == [(9, 16, "GPU001")]


def test_global_and_nonlocal_follow_the_outer_binding() -> None:
    assert found("""\
        from vllm import LLM


        def test_global():
            global LLM
            assert LLM("x").generate(["a"])


        def test_nonlocal():
            LLM = str

            def inner():
                nonlocal LLM
                return LLM("x")

            def closure():
                return LLM("y")

            assert inner() and closure()


        def test_enclosing_import():
            from mylib import LLM

            def inner():
                return LLM("y")

            assert inner()
        """) == [(6, 12, "GPU001")]


def test_local_alias_and_local_import_are_followed() -> None:
    assert found("""\
        import mylib


        def test_alias():
            from vllm import LLM
            Engine = LLM
            assert Engine("x").generate(["a"])


        def test_import_as():
            import vllm as v
            assert v.LLM("x").generate(["a"])


        def test_rebound_twice(flag):
            Engine = mylib.Fake
            if flag:
                from vllm import LLM as Engine
            assert Engine("x")
        """) == [(7, 12, "GPU001"), (12, 12, "GPU001")]


def test_shadowed_os_is_not_os_environ() -> None:
    assert found("""\
        import os


        def test_env(os):
            os.environ["VLLM_X"] = "1"


        def test_real():
            os.environ["VLLM_X"] = "1"
        """) == [(9, 5, "GPU008")]


# --------------------------------------------------------------------------- processes

LAUNCHED = """\
    import functools
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import torch.multiprocessing as mp
    from vllm import LLM


    def run_a():
        llm = LLM("a")
        del llm


    def run_b(rank):
        LLM("b").generate(["x"])


    def run_c(x):
        return LLM("c").generate([x])


    def run_d():
        LLM("d").generate(["x"])


    def run_e(x):
        return LLM("e").generate([x])


    def run_f(x):
        return LLM("f").generate([x])


    def not_launched():
        LLM("g").generate(["x"])


    def test_launch():
        ctx = multiprocessing.get_context("spawn")
        child = ctx.Process(target=run_a)
        child.start()
        child.join()
        mp.spawn(run_b, nprocs=2)
        with ProcessPoolExecutor(1) as pool:
            pool.submit(run_c, "x").result()
        multiprocessing.Process(None, run_d).start()
        assert list(ProcessPoolExecutor().map(run_e, ["x"]))
        with multiprocessing.get_context("fork").Pool(1) as workers:
            workers.apply_async(functools.partial(run_f, "x")).get()
        not_launched()
    """


def test_process_targets_are_isolated() -> None:
    assert found(LAUNCHED) == [(35, 5, "GPU001")]


def test_process_launchers_configurable() -> None:
    config = config_from_table({"process-launchers": ["mylib.launch"]}, "t")
    reported = [(line, code) for line, _, code in found(LAUNCHED, config)]
    assert reported == [(10, "GPU001"), (11, "GPU004"), (15, "GPU001"), (19, "GPU001"),
                        (23, "GPU001"), (27, "GPU001"), (31, "GPU001"), (35, "GPU001")]
    assert found("""\
        from mylib import launch
        from vllm import LLM


        def child():
            LLM("a").generate(["x"])


        def test_launch():
            launch(child)
        """, config) == []


def test_process_launchers_must_be_qualified_names() -> None:
    with pytest.raises(ConfigError, match=r"t: `process-launchers`: `Process` is not a "
                                          r"qualified name"):
        config_from_table({"process-launchers": ["Process"]}, "t")
    with pytest.raises(ConfigError, match=r"`process-launchers` must be a list of strings"):
        config_from_table({"process-launchers": "multiprocessing.Process"}, "t")


def test_a_collected_test_used_as_a_target_is_still_checked() -> None:
    # pytest also runs test_child in its own process: it is not isolated.
    source = """\
        import multiprocessing

        from vllm import LLM


        def test_child():
            LLM("a").generate(["x"])


        def test_parent():
            multiprocessing.Process(target=test_child).start()
        """
    assert found(source) == [(7, 5, "GPU001")]
    assert found(source, path="tests/full_tests/spec_decode.py") == []


# --------------------------------------------------------------------------- teardown

def test_cleanup_between_uses_is_not_teardown() -> None:
    assert fixes("""\
        import gc
        import weakref

        import pytest
        import torch


        @pytest.fixture
        def llm(vllm_runner):
            with vllm_runner("m") as runner:
                yield weakref.proxy(runner.llm)


        def test_rounds(llm):
            llm.chat([])
            gc.collect()
            torch.cuda.empty_cache()
            llm.chat([])
            gc.collect()


        def test_loop(llm):
            for _ in range(2):
                llm.chat([])
                gc.collect()


        def test_proxy_alias(vllm_runner):
            with vllm_runner("m") as runner:
                engine = weakref.proxy(runner.llm)
                engine.generate([])
                gc.collect()
                engine.generate([])
            gc.collect()


        def test_before_any_engine(vllm_runner):
            gc.collect()
            with vllm_runner("m") as runner:
                assert runner.generate([])
        """) == [
        (19, "GPU004", "unsafe", "removing it changes when memory is freed within the test"),
        (34, "GPU004", "unsafe", "removing it changes when memory is freed within the test"),
    ]


def test_teardown_after_yield_and_loop_that_rebuilds() -> None:
    assert found("""\
        import gc

        import pytest
        from vllm import LLM


        @pytest.fixture
        def engine():
            e = LLM("x")
            yield e
            gc.collect()
            del e


        def test_loop_rebuild():
            for name in ["a", "b"]:
                llm = LLM(name)
                llm.generate([])
                del llm
                gc.collect()
        """) == [(9, 9, "GPU001"), (10, 11, "GPU002"), (11, 5, "GPU004"), (12, 5, "GPU004"),
                 (17, 15, "GPU001"), (19, 9, "GPU004"), (20, 9, "GPU004")]


# --------------------------------------------------------------------------- one report

def test_shutdown_in_finally_is_gpu003_only() -> None:
    assert found("""\
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


# --------------------------------------------------------------------------- del in own with

DEL_IN_BLOCK = """\
    from tests.conftest import VllmRunner


    def test_generate():
        with VllmRunner("m") as vllm_model:
            assert vllm_model.generate(["a"])
            del vllm_model
            print("done")


    def test_fixture(vllm_runner):
        with vllm_runner("m") as m:
            assert m.generate(["a"])
            del m


    def test_used_again(vllm_runner):
        with vllm_runner("m") as m:
            assert m.generate(["a"])
            del m
        m = None
        assert m is None


    def test_in_a_loop():
        with VllmRunner("m") as m:
            for _ in range(2):
                assert m.generate(["a"])
                del m


    def test_closure():
        with VllmRunner("m") as m:
            later = lambda: m.generate(["a"])
            del m
            later()


    def test_after_block(vllm_runner):
        with vllm_runner("m") as m:
            assert m.generate(["a"])
        del m
    """


def test_del_of_the_runner_in_its_own_block() -> None:
    assert fixes(DEL_IN_BLOCK) == [
        (7, "GPU004", "safe", ""),
        (14, "GPU004", "safe", ""),
        (20, "GPU004", "none", "`m` is used again after the `del` (line 21)"),
        (29, "GPU004", "none", "the `del` is in a loop inside the with-block: a later "
                               "iteration would fail on the deleted name"),
        (35, "GPU004", "none", "a closure captures the runner's name"),
        (42, "GPU004", "unsafe", "removing it changes when memory is freed within the test"),
    ]


def test_del_of_the_runner_fix_removes_it() -> None:
    source = textwrap.dedent(DEL_IN_BLOCK).encode()
    outcome = fix_source(source, PATH, Config())
    assert outcome.error is None
    assert outcome.new_source == source.replace(
        b"        del vllm_model\n", b"").replace(
        b'        assert m.generate(["a"])\n        del m\n\n\ndef test_used_again',
        b'        assert m.generate(["a"])\n\n\ndef test_used_again')
    assert [(v.location.row, v.code) for v in outcome.fixed] == [(7, "GPU004"),
                                                                  (14, "GPU004")]


def test_rewrite_keeps_a_cleanup_between_two_uses() -> None:
    source = textwrap.dedent("""\
        import gc

        from vllm import LLM


        def test_rounds():
            llm = LLM("m")
            first = llm.generate(["a"])
            gc.collect()
            second = llm.generate(["b"])
            gc.collect()
            assert first and second
        """).encode()
    assert [(v.location.row, v.code) for v in check_source(source, PATH, Config())] == [
        (7, "GPU001"), (11, "GPU004")]
    outcome = fix_source(source, PATH, Config())
    assert outcome.new_source == textwrap.dedent("""\
        import gc
        import weakref


        def test_rounds(vllm_runner):
            with vllm_runner("m") as runner:
                llm = weakref.proxy(runner.llm)
                first = llm.generate(["a"])
                gc.collect()
                second = llm.generate(["b"])
            assert first and second
        """).encode()

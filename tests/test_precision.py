"""Precision of the rules: names resolve per scope, and functions run as their own
process are isolated: what every rule reads as vLLM's engine.

Each case gives the exact ``(line, column, code)`` reports. What is particular to one rule is
in ``tests/rules/test_gpuNNN.py`` (GPU004's cleanup at teardown only and ``del`` of the runner
in its own block; GPU003's one report for a try/finally; GPU008's shadowed ``os``).
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from lint_gpu_tests.analysis.analysis import FunctionKind, ModuleAnalysis, is_test_module_path
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, ConfigError, config_from_table, is_test_module

PATH = "tests/test_x.py"


def found(source: str, config: Config | None = None,
          path: str = PATH) -> list[tuple[int, int, str]]:
    src = textwrap.dedent(source).encode()
    return [(v.location.row, v.location.column, v.code)
            for v in check_source(src, path, config or Config())]


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


def test_a_function_handed_to_a_launcher_helper_is_isolated() -> None:
    # A module-level function that hands a parameter (positional or keyword-only, never
    # rebound) to a launcher is a launcher helper: what a call passes there, directly or
    # through ``partial``, runs as its own process; other arguments and helpers do not.
    source = """\
        import functools
        import multiprocessing

        from vllm import LLM


        def in_child(label, fn, *args):
            multiprocessing.Process(target=fn, args=args).start()


        def in_pool(*, job):
            with multiprocessing.Pool(1) as pool:
                pool.apply(functools.partial(job))


        def rebound(fn):
            fn = functools.partial(fn, 1)
            multiprocessing.Process(target=fn).start()


        def run_a():
            LLM("a").generate(["x"])


        def run_b(n):
            LLM("b").generate(["x"])


        def run_c():
            LLM("c").generate(["x"])


        def run_d(n):
            LLM("d").generate(["x"])


        def test_launch():
            in_child("a", run_a)
            in_pool(job=functools.partial(run_b, 1))
            rebound(run_d)
            in_child(run_c, "c")
        """
    assert [line for line, _, _ in found(source)] == [30, 34]  # run_c, run_d


def test_a_test_pytest_forked_runs_in_a_child_is_isolated() -> None:
    # pytest-forked runs a marked test item (its function-scoped fixtures too) in a forked
    # child: marked on the test, on its class (decorator or ``pytestmark``) or by the
    # module's ``pytestmark``.
    marked = """\
        import pytest
        from vllm import LLM


        @pytest.mark.forked
        def test_a():
            LLM("a").generate(["x"])


        @pytest.mark.forked
        class TestB:
            def test_b(self):
                LLM("b").generate(["x"])


        class TestC:
            pytestmark = [pytest.mark.slow, pytest.mark.forked]

            def test_c(self):
                LLM("c").generate(["x"])


        class TestD:
            def test_d(self):
                LLM("d").generate(["x"])
        """
    assert [line for line, _, _ in found(marked)] == [25]  # test_d
    module_marked = """\
        import pytest
        from vllm import LLM

        pytestmark = pytest.mark.forked


        def test_e():
            LLM("e").generate(["x"])
        """
    assert found(module_marked) == []


def test_a_script_named_like_a_test_module_is_isolated_unless_pytest_finds_tests() -> None:
    script = """\
        from vllm import LLM

        ENGINE = LLM("top")


        def main():
            LLM("m").generate(["x"])


        if __name__ == "__main__":
            main()
        """
    assert [line for line, _, _ in found(script)] == [3]  # pytest imports it: the top level
    with_a_test = textwrap.dedent(script) + "\n\ndef test_x():\n    main()\n"
    assert [line for line, _, _ in found(with_a_test)] == [3, 7]


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


@pytest.mark.parametrize(("path", "expected"), [
    ("tests/test_x.py", True), ("x_test.py", True), ("test_.py", True),
    ("tests/conftest.py", False), ("tests/helpers.py", False), ("test_x.txt", False),
    ("test_x", False), ("tests/test_dir/helpers.py", False),
])
def test_a_test_module_is_what_pytest_collects_by_default(path: str, expected: bool) -> None:
    """The one definition of a test module by its name, which the rules (a helper's callers,
    process targets), GPU008's module level and ``prove`` read."""
    assert is_test_module(path) is expected
    assert is_test_module_path(path, Config()) is (expected or path.endswith("conftest.py"))


# --------------------------------------------------------------------------- tests

BASE_CLASS_TESTS = """\
    import pytest


    class _Base:
        def test_inherited(self, make_runner):
            with make_runner() as a, make_runner() as b:
                assert a and b

        def helper(self):
            return 1


    class _Mixin(_Base):
        def test_mixed(self):
            pass


    def _shared_test(self, make_runner):
        with make_runner() as a, make_runner() as b:
            assert a and b


    def _not_a_test(self, make_runner):
        with make_runner() as a, make_runner() as b:
            assert a and b


    class TestOne(_Mixin):
        test_shared = _shared_test
        helper_alias = _not_a_test


    class Unrelated:
        def test_not_run(self, make_runner):
            with make_runner() as a, make_runner() as b:
                assert a and b


    @pytest.fixture
    def make_runner(vllm_runner):
        def _make():
            return vllm_runner("m")

        return _make
    """


def test_tests_of_a_base_class_and_functions_a_test_class_binds() -> None:
    """pytest runs the ``test*`` methods a ``Test*`` class inherits from the module's classes
    (at any depth) and a module function the class binds to a ``test*`` name: those are
    tests (GPU007 counts the engines of the factory fixture they request); a base class no
    test class derives from, and a function bound to another name, are not."""
    text = textwrap.dedent(BASE_CLASS_TESTS)
    module = ModuleAnalysis.build(ast.parse(text), text, PATH, Config())
    assert sorted(f.name for f in module.functions if f.kind is FunctionKind.TEST) == [
        "_shared_test", "test_inherited", "test_mixed"]
    assert [(row, code) for row, _, code in found(BASE_CLASS_TESTS)] == [
        (6, "GPU007"), (19, "GPU007")]

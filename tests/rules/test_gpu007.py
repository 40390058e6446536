"""GPU007 engines-oversubscribe-device: engines alive at the same time ask for more than the
whole device.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu007_engines_oversubscribe_device/``),
which engines count as alive together, how their shares are read, where the report points and
what it says."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from rule_testing import example_tests, own_rules, rule_class

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, ConfigError, config_from_table

RULE = rule_class("GPU007")
PREFIX = "engines alive at once ask for more than the device: "
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


def gpu007(source: str, config: Config | None = None,
           path: str = "tests/test_x.py") -> list[tuple[int, int, str]]:
    """``(row, column, message)`` of every GPU007 report."""
    found = check_source(textwrap.dedent(source).encode(), path, config or Config())
    out = [(v.location.row, v.location.column, v.message) for v in found if v.code == "GPU007"]
    assert all(v.fix is None for v in found if v.code == "GPU007")
    return out


def test_nested_runners_with_default_share() -> None:
    assert gpu007("""\
        def test_x(vllm_runner):
            with vllm_runner("a") as a:
                with vllm_runner("b") as b:
                    assert a and b
        """) == [(3, 14, "2 " + PREFIX + "`vllm_runner(...)` line 2: 0.92 (default), "
                  "`vllm_runner(...)` line 3: 0.92 (default); sum 1.84 > 1.0")]


def test_group_sums_exactly_one_is_fine_and_a_third_tips_it_over() -> None:
    fits = """\
        def test_x(vllm_runner):
            with vllm_runner("a", gpu_memory_utilization=0.5) as a, \\
                    vllm_runner("b", gpu_memory_utilization=0.5) as b:
                assert a and b
        """
    assert gpu007(fits) == []
    over = """\
        def test_x(vllm_runner):
            with (
                vllm_runner("a", gpu_memory_utilization=0.4) as a,
                vllm_runner("b", gpu_memory_utilization=0.4) as b,
                vllm_runner("c", gpu_memory_utilization=0.4) as c,
            ):
                assert a and b and c
        """
    assert gpu007(over) == [(5, 9, "3 " + PREFIX + "`vllm_runner(...)` line 3: 0.4, "
                             "`vllm_runner(...)` line 4: 0.4, `vllm_runner(...)` line 5: 0.4; "
                             "sum 1.2 > 1.0")]


def test_exit_stack_keeps_runners_alive_to_its_end() -> None:
    assert [row for row, _, _ in gpu007("""\
        import contextlib


        def test_x(vllm_runner):
            with contextlib.ExitStack() as stack:
                a = stack.enter_context(vllm_runner("a"))
                b = stack.enter_context(vllm_runner("b"))
                assert a and b
            with vllm_runner("c") as c:
                assert c
        """)] == [7]


def test_bound_engines_die_at_del_shutdown_and_live_through_rebinding() -> None:
    source = """\
        from vllm import LLM


        def test_del():
            llm = LLM("a")
            llm.generate(["x"])
            del llm
            other = LLM("b")
            other.llm_engine.engine_core.shutdown()
            third = LLM("c")
            assert third


        def test_rebind():
            llm = LLM("a")
            llm = LLM("b")
            assert llm
        """
    assert [(row, col) for row, col, _ in gpu007(source)] == [(16, 11)]


def test_an_explicit_close_or_shutdown_ends_the_engine_in_a_finally_too() -> None:
    source = """\
        from vllm import LLM


        def test_close_in_finally():
            first = LLM("a")
            try:
                first.generate(["x"])
            finally:
                first.close()
            second = LLM("b")
            assert second


        def test_shutdown_in_finally():
            first = LLM("a")
            try:
                first.generate(["x"])
            finally:
                first.shutdown()
            second = LLM("b")
            assert second


        def test_closed_after_the_second_is_built():
            first = LLM("a")
            second = LLM("b")
            first.close()
            assert second
        """
    assert [(row, col) for row, col, _ in gpu007(source)] == [(26, 14)]


def test_a_shutdown_ends_a_runner_entered_in_a_with_or_an_exit_stack() -> None:
    """The explicit shutdowns GPU003/GPU004 recognise end an engine held by a runner too:
    ``runner.llm.shutdown()`` inside the runner's own block, and ``stack.close()`` of the
    ``ExitStack`` the runner was entered in (one not opened by a ``with``)."""
    source = """\
        import contextlib


        def test_shut_down_inside_its_block(vllm_runner):
            with vllm_runner("a") as first:
                first.generate_greedy(["x"], 4)
                first.llm.llm_engine.engine_core.shutdown()
                with vllm_runner("b") as second:
                    assert second


        def test_stack_closed(vllm_runner):
            stack = contextlib.ExitStack()
            a = stack.enter_context(vllm_runner("a"))
            try:
                a.generate_greedy(["x"], 4)
            finally:
                stack.close()
            with vllm_runner("b") as b:
                assert b


        def test_stack_left_open(vllm_runner):
            stack = contextlib.ExitStack()
            a = stack.enter_context(vllm_runner("a"))
            a.generate_greedy(["x"], 4)
            with vllm_runner("b") as b:
                assert b
            stack.close()
        """
    assert [(row, col) for row, col, _ in gpu007(source)] == [(27, 10)]


def test_unbound_engine_lives_for_its_statement() -> None:
    assert gpu007("""\
        from vllm import LLM


        def test_x():
            LLM("a").generate(["x"])
            LLM("b").generate(["y"])
        """) == []


def test_branches_of_an_if_never_run_together() -> None:
    assert gpu007("""\
        def test_x(vllm_runner, fp8):
            if fp8:
                with vllm_runner("a", quantization="fp8") as r:
                    assert r
            else:
                with vllm_runner("a") as r:
                    assert r
        """) == []


def test_unknown_shares_count_for_nothing() -> None:
    source = """\
        def test_x(vllm_runner, share, kwargs):
            with vllm_runner("a") as a, vllm_runner("b", gpu_memory_utilization=share) as b:
                assert a and b
            with vllm_runner("a") as a, vllm_runner("b", **kwargs) as b:
                assert a and b
            with vllm_runner("a", kv_cache_memory_bytes=1 << 30) as a, vllm_runner("b") as b:
                assert a and b
            with vllm_runner("a", gpu_memory_utilization=0.6) as a, \\
                    vllm_runner("b", **kwargs) as b, \\
                    vllm_runner("c", gpu_memory_utilization=0.6) as c:
                assert a and b and c
        """
    assert gpu007(source) == [(10, 13, "3 " + PREFIX + "`vllm_runner(...)` line 8: 0.6, "
                               "`vllm_runner(...)` line 9: unknown, `vllm_runner(...)` line 10: "
                               "0.6; sum 1.2 > 1.0")]


def test_module_constant_read_unless_a_local_hides_it() -> None:
    source = """\
        SHARE = 0.6


        def test_constant(vllm_runner):
            with vllm_runner("a", gpu_memory_utilization=SHARE) as a:
                with vllm_runner("b", gpu_memory_utilization=SHARE) as b:
                    assert a and b


        def test_hidden(vllm_runner, SHARE):
            with vllm_runner("a", gpu_memory_utilization=SHARE) as a:
                with vllm_runner("b", gpu_memory_utilization=SHARE) as b:
                    assert a and b
        """
    assert [row for row, _, _ in gpu007(source)] == [6]


def test_engine_fixture_from_module_and_from_conftest() -> None:
    source = """\
        import weakref

        import pytest


        @pytest.fixture
        def llm(vllm_runner):
            with vllm_runner("a") as runner:
                yield weakref.proxy(runner.llm)


        @pytest.fixture
        def small(vllm_runner):
            with vllm_runner("a", gpu_memory_utilization=0.6) as runner:
                yield weakref.proxy(runner.llm)


        def test_both_fixtures(llm, small):
            assert llm and small


        def test_fixture_and_built(small, vllm_runner):
            with vllm_runner("b", gpu_memory_utilization=0.3) as other:
                assert small and other
        """
    assert gpu007(source) == [(18, 29, "2 " + PREFIX + "fixture `llm`: 0.92 (default), "
                               "fixture `small`: 0.6; sum 1.52 > 1.0")]


def test_factory_fixture_keeps_every_engine_it_built() -> None:
    source = """\
        import pytest
        from vllm import LLM


        @pytest.fixture
        def make_llm():
            def make(**kwargs):
                return LLM("a", **kwargs)
            yield make


        def test_two(make_llm):
            first = make_llm(gpu_memory_utilization=0.5)
            second = make_llm()
            assert first and second
        """
    assert gpu007(source) == [(14, 14, "2 " + PREFIX + "`make_llm(...)` line 13: 0.5, "
                               "`make_llm(...)` line 14: 0.92 (default); sum 1.42 > 1.0")]


def test_a_factory_fixture_keeping_none_hands_each_engine_to_its_caller() -> None:
    """A factory fixture that keeps none of its engines: each lives in the name its caller
    binds it to, until its ``del`` or shutdown, as one the caller built; a factory that
    registers its engines keeps each until the test ends."""
    source = """\
        import pytest
        from vllm import LLM


        @pytest.fixture
        def make_llm():
            def _make(**kw):
                return LLM("m", **kw)
            return _make


        @pytest.fixture
        def make_kept(request):
            def _make(**kw):
                llm = LLM("m", **kw)
                request.addfinalizer(llm.llm_engine.engine_core.shutdown)
                return llm
            return _make


        def test_one_after_the_other(make_llm):
            a = make_llm(seed=0)
            a.generate(["x"])
            del a
            b = make_llm(seed=1)
            b.generate(["x"])


        def test_kept(make_kept):
            a = make_kept(seed=0)
            del a
            b = make_kept(seed=1)
            assert b
        """
    assert gpu007(source) == [(32, 9, "2 " + PREFIX + "`make_kept(...)` line 30: 0.92 "
                               "(default), `make_kept(...)` line 32: 0.92 (default); sum 1.84 "
                               "> 1.0")]


def test_a_factory_fixture_returning_a_runner() -> None:
    """The factory a fixture hands out returns a runner its caller enters: each entered
    runner is an engine alive for its with-statement."""
    source = """\
        import pytest


        @pytest.fixture
        def make_runner(vllm_runner):
            def _make(**kw):
                return vllm_runner("m", gpu_memory_utilization=0.6, **kw)
            return _make


        def test_pair(make_runner):
            with make_runner() as a, make_runner() as b:
                assert a and b
        """
    assert gpu007(source) == [(12, 30, "2 " + PREFIX + "`make_runner(...)` line 12: 0.6, "
                               "`make_runner(...)` line 12: 0.6; sum 1.2 > 1.0")]


def test_a_helper_returning_the_call_of_the_factory_it_is_given() -> None:
    """A module function that returns the call of the factory it is handed builds one
    engine a call, as the factory does; one whose returned call sets its own share is not
    read (its share is the function's, not the call's)."""
    source = """\
        import pytest


        @pytest.fixture
        def make_runner(vllm_runner):
            def _make(chunked, **kw):
                return vllm_runner("m", enable_chunked_prefill=chunked, **kw)
            return _make


        def _chunked(make, chunked, tokens):
            if chunked:
                return make(chunked, max_num_batched_tokens=tokens)
            return make(chunked)


        def _small(make):
            return make(False, gpu_memory_utilization=0.3)


        def test_pair(make_runner):
            with _chunked(make_runner, False, 64) as a, _chunked(
                    make=make_runner, chunked=True, tokens=64) as b:
                assert a and b


        def test_small_pair(make_runner):
            with _small(make_runner) as a, _small(make_runner) as b:
                assert a and b
        """
    assert gpu007(source) == [(22, 49, "2 " + PREFIX + "`_chunked(...)` line 22: 0.92 "
                               "(default), `_chunked(...)` line 22: 0.92 (default); sum 1.84 "
                               "> 1.0")]


def test_a_runner_built_in_a_guarding_try_lives_for_the_with_after_it() -> None:
    """``try: first = vllm_runner(...)`` (its handlers skip) then ``with first:``: the
    runner lives until that with-statement ends, so a runner entered after it is not
    alive with it, and one entered inside it is."""
    source = """\
        import pytest


        def test_after(vllm_runner):
            try:
                first = vllm_runner("m", gpu_memory_utilization=0.6)
            except Exception as e:
                pytest.skip(str(e))
            with first:
                first.llm.generate("a")
            with vllm_runner("m", gpu_memory_utilization=0.6) as second:
                second.llm.generate("a")


        def test_inside(vllm_runner):
            try:
                first = vllm_runner("m", gpu_memory_utilization=0.6)
            except Exception as e:
                pytest.skip(str(e))
            with first:
                with vllm_runner("m", gpu_memory_utilization=0.6) as second:
                    second.llm.generate("a")
        """
    assert gpu007(source) == [(21, 14, "2 " + PREFIX + "`vllm_runner(...)` line 17: 0.6, "
                               "`vllm_runner(...)` line 21: 0.6; sum 1.2 > 1.0")]


def test_fixtures_named_by_their_decorator() -> None:
    """``@pytest.fixture(name=...)``: the test requests the fixture by that name, and its
    engine's share is the one its function builds (a factory fixture's too)."""
    source = """\
        import pytest
        from vllm import LLM


        @pytest.fixture(name="llm")
        def _llm():
            engine = LLM("a", gpu_memory_utilization=0.6)
            yield engine


        @pytest.fixture(name="make_llm")
        def _make_llm():
            def make(**kwargs):
                return LLM("a", **kwargs)
            yield make


        def test_two(llm, make_llm):
            other = make_llm(gpu_memory_utilization=0.5)
            assert llm and other
        """
    assert gpu007(source) == [(19, 13, "2 " + PREFIX + "fixture `llm`: 0.6, "
                               "`make_llm(...)` line 19: 0.5; sum 1.1 > 1.0")]


def test_construction_expected_to_fail_and_main_guard_do_not_count() -> None:
    assert gpu007("""\
        import pytest
        from vllm import LLM


        def test_x(vllm_runner):
            with vllm_runner("a") as a:
                with pytest.raises(ValueError):
                    LLM("a", gpu_memory_utilization=2.0)


        if __name__ == "__main__":
            one = LLM("a")
            two = LLM("b")
        """) == []


def test_engine_memory_share_option() -> None:
    source = """\
        def test_x(vllm_runner):
            with vllm_runner("a") as a, vllm_runner("b") as b:
                assert a and b
        """
    assert gpu007(source, config_from_table({"engine-memory-share": 0.5}, "t")) == []
    assert [row for row, _, _ in gpu007(
        source, config_from_table({"engine-memory-share": 0.6}, "t"))] == [2]
    assert Config().engine_memory_share == 0.92


@pytest.mark.parametrize("value", [0, 1.5, "0.5", True])
def test_engine_memory_share_must_be_a_fraction(value: object) -> None:
    with pytest.raises(ConfigError, match="`engine-memory-share` must be a number in"):
        config_from_table({"engine-memory-share": value}, "pyproject.toml")


def test_bundled_runner_factory() -> None:
    source = """\
        def test_factory(vllm_runner_factory):
            first = vllm_runner_factory("a")
            with vllm_runner_factory("b", gpu_memory_utilization=0.05) as b:
                assert first and b
            with vllm_runner_factory("c") as c:
                assert c


        def test_sequential(vllm_runner_factory):
            with vllm_runner_factory("a") as a:
                assert a
            with vllm_runner_factory("b") as b:
                assert b
        """
    assert gpu007(source) == [(5, 10, "2 " + PREFIX + "`vllm_runner_factory(...)` line 2: "
                               "0.92 (default), `vllm_runner_factory(...)` line 5: 0.92 "
                               "(default); sum 1.84 > 1.0")]


def test_comprehension_over_a_known_length_counts_each_element() -> None:
    # Found by a first-time user: engines built in a comprehension were not counted.
    assert gpu007("""\
        from vllm import LLM

        MODELS = ["a", "b"]


        def test_constant():
            llms = [LLM(model=m) for m in MODELS]
            assert llms


        def test_range():
            llms = {k: LLM("a", gpu_memory_utilization=0.4) for k in range(3)}
            assert llms


        def test_three_fit():
            llms = [LLM(m, gpu_memory_utilization=0.3) for m in ("a", "b", "c")]
            assert llms
        """) == [
        (7, 13, "2 " + PREFIX + "`LLM(...)` line 7 (#1): 0.92 (default), `LLM(...)` line 7 "
         "(#2): 0.92 (default); sum 1.84 > 1.0"),
        (12, 16, "3 " + PREFIX + "`LLM(...)` line 12 (#1): 0.4, `LLM(...)` line 12 (#2): "
         "0.4, `LLM(...)` line 12 (#3): 0.4; sum 1.2 > 1.0"),
    ]


def test_comprehension_of_unknown_length_counts_once() -> None:
    # As an engine built in a loop: one engine, here alone and under 1.0.
    assert gpu007("""\
        from vllm import LLM


        def test_x(models):
            llms = [LLM(m, gpu_memory_utilization=0.6) for m in models]
            kept = [LLM(m, gpu_memory_utilization=0.6) for m in ("a", "b") if m]
            assert llms and kept
        """) == [(6, 13, "2 " + PREFIX + "`LLM(...)` line 5: 0.6, `LLM(...)` line 6: 0.6; "
                  "sum 1.2 > 1.0")]


def test_group_lives_until_deleted_or_shut_down_in_a_loop() -> None:
    assert gpu007("""\
        from vllm import LLM

        MODELS = ["a", "b"]


        def test_shut_down_first():
            llms = [LLM(m, gpu_memory_utilization=0.5) for m in MODELS]
            for llm in llms:
                llm.shutdown()
            other = LLM("c", gpu_memory_utilization=0.6)
            assert other


        def test_deleted_after():
            llms = [LLM(m, gpu_memory_utilization=0.5) for m in MODELS]
            other = LLM("c", gpu_memory_utilization=0.6)
            del llms
            assert other
        """) == [(16, 13, "3 " + PREFIX + "`LLM(...)` line 15 (#1): 0.5, `LLM(...)` line 15 "
                  "(#2): 0.5, `LLM(...)` line 16: 0.6; sum 1.6 > 1.0")]


def test_fixed_group_counts_the_same() -> None:
    # The group fix's form: the bundled factory entered on an ExitStack, per element.
    assert gpu007("""\
        import contextlib
        import weakref

        MODELS = ["a", "b"]


        def test_x(vllm_runner_factory, vllm_runner):
            with contextlib.ExitStack() as stack:
                llms = [weakref.proxy(stack.enter_context(vllm_runner_factory(m)).llm)
                        for m in MODELS]
                assert llms
            with vllm_runner("c", gpu_memory_utilization=0.6) as runner:
                assert runner
        """) == [(9, 51, "2 " + PREFIX + "`vllm_runner_factory(...)` line 9 (#1): 0.92 "
                  "(default), `vllm_runner_factory(...)` line 9 (#2): 0.92 (default); "
                  "sum 1.84 > 1.0")]


def test_fixed_group_of_target_vllm_counts_the_same() -> None:
    assert gpu007("""\
        import contextlib
        import weakref


        def test_x(vllm_runner):
            with contextlib.ExitStack() as stack:
                llms = [weakref.proxy(stack.enter_context(vllm_runner("a", seed=s)).llm)
                        for s in (0, 1)]
                assert llms
        """) == [(7, 51, "2 " + PREFIX + "`vllm_runner(...)` line 7 (#1): 0.92 "
                  "(default), `vllm_runner(...)` line 7 (#2): 0.92 (default); "
                  "sum 1.84 > 1.0")]


def test_an_engine_built_in_the_return_or_yield_is_the_fixtures() -> None:
    """``return LLM(...)`` / ``yield LLM(...)``: the engine is alive where the fixture hands
    it out (before, it was found only once ``--fix`` had given it a name)."""
    source = """\
        import pytest
        from vllm import LLM


        @pytest.fixture
        def returned():
            return LLM("a", gpu_memory_utilization=0.3)


        @pytest.fixture
        def yielded():
            yield LLM("a", gpu_memory_utilization=0.3)


        @pytest.fixture
        def freed_first():
            engine = LLM("a")
            del engine
            yield LLM("b", gpu_memory_utilization=0.5)


        def test_both(returned, yielded, freed_first):
            assert returned and yielded and freed_first
        """
    assert gpu007(source) == [(22, 34, "3 " + PREFIX + "fixture `returned`: 0.3, fixture "
                               "`yielded`: 0.3, fixture `freed_first`: 0.5; sum 1.1 > 1.0")]


CONFTEST_FACTORIES = """\
import pytest
from vllm import LLM


@pytest.fixture
def make_llm():
    def _make(**kwargs):
        return LLM("m", **kwargs)

    return _make


@pytest.fixture
def make_runner(vllm_runner):
    def _make(eager, **kwargs):
        return vllm_runner("m", enforce_eager=eager, **kwargs)

    return _make


@pytest.fixture
def make_small(vllm_runner):
    def _make():
        return vllm_runner("m", gpu_memory_utilization=0.4)

    return _make
"""


def test_factory_fixtures_of_a_conftest(tmp_path: Path) -> None:
    """A conftest's fixture handing out a function that builds an engine or returns a
    runner: each call in a test is one more engine, with the call's share, else the one the
    factory's engine or runner call writes, else the default. An engine the factory keeps
    none of lives in the caller's name; a runner for its with-statement. A fixture of the
    module of the same name hides the conftest's."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST_FACTORIES)
    test = tmp_path / "tests" / "test_x.py"
    test.write_text(textwrap.dedent("""\
        def test_engines(make_llm):
            a = make_llm()
            b = make_llm()
            assert a is not b


        def test_one_after_the_other(make_llm):
            a = make_llm()
            del a
            b = make_llm(gpu_memory_utilization=0.5)
            assert b


        def test_runners(make_runner):
            with make_runner(False) as a:
                with make_runner(True, gpu_memory_utilization=0.3) as b:
                    assert a and b


        def test_small_ones_fit(make_small):
            with make_small() as a, make_small() as b:
                assert a and b


        def test_small_ones_and_a_third(make_small, make_runner):
            with make_small() as a, make_small() as b, make_runner(True) as c:
                assert a and b and c
        """))
    found = check_paths([str(test)], own_rules(), cache=False).violations
    assert [(v.location.row, v.location.column, v.message) for v in found
            if v.code == "GPU007"] == [
        (3, 9, "2 " + PREFIX + "`make_llm(...)` line 2: 0.92 (default), `make_llm(...)` "
         "line 3: 0.92 (default); sum 1.84 > 1.0"),
        (16, 14, "2 " + PREFIX + "`make_runner(...)` line 15: 0.92 (default), "
         "`make_runner(...)` line 16: 0.3; sum 1.22 > 1.0"),
        (26, 48, "3 " + PREFIX + "`make_small(...)` line 26: 0.4, `make_small(...)` line 26: "
         "0.4, `make_runner(...)` line 26: 0.92 (default); sum 1.72 > 1.0")]
    test.write_text(textwrap.dedent("""\
        import pytest


        @pytest.fixture
        def make_llm():
            return lambda: None


        def test_engines(make_llm):
            a = make_llm()
            b = make_llm()
            assert a is not b
        """))
    assert [v.code for v in check_paths([str(test)], own_rules(), cache=False).violations
            if v.code == "GPU007"] == []


def test_spread_keywords_whose_keys_are_known() -> None:
    """``**kwargs`` hides the share unless every key it can hold is known and none is the
    share: a dict display, a name bound only to displays and not changed in place, a call
    of a module function returning only displays."""
    source = """\
        EXTRA = {"enforce_eager": True}


        def _processor_kwargs(model):
            if model == "a":
                return {"mm_processor_kwargs": {"size": 1}}
            return {}


        def test_display(vllm_runner):
            with vllm_runner("a", **{"seed": 1}) as a, vllm_runner("b", **EXTRA) as b:
                assert a and b


        def test_helper(vllm_runner, model):
            kwargs = _processor_kwargs(model)
            with vllm_runner("a", **kwargs) as a, vllm_runner("b", **kwargs) as b:
                assert a and b


        def test_changed_in_place(vllm_runner):
            kwargs = {"seed": 1}
            kwargs["gpu_memory_utilization"] = 0.3
            with vllm_runner("a", **kwargs) as a, vllm_runner("b", **kwargs) as b:
                assert a and b


        def test_share_among_the_keys(vllm_runner, kwargs):
            opts = {"gpu_memory_utilization": 0.3}
            with vllm_runner("a", **opts) as a, vllm_runner("b", **kwargs) as b:
                assert a and b
        """
    assert [(row, col) for row, col, _ in gpu007(source)] == [(11, 48), (17, 43)]


def test_fixtures_requested_through_usefixtures() -> None:
    """A fixture named in ``@pytest.mark.usefixtures(...)`` on the test or its class is alive
    throughout the test, as one it takes as a parameter."""
    source = """\
        import pytest
        from vllm import LLM


        @pytest.fixture
        def big():
            engine = LLM("m", gpu_memory_utilization=0.9)
            yield engine


        @pytest.mark.usefixtures("big")
        def test_marked(vllm_runner):
            with vllm_runner("m", gpu_memory_utilization=0.3) as runner:
                assert runner


        @pytest.mark.usefixtures("big", "other")
        class TestMarked:
            def test_method(self, vllm_runner):
                with vllm_runner("m", gpu_memory_utilization=0.3) as runner:
                    assert runner

            def test_small(self, vllm_runner):
                with vllm_runner("m", gpu_memory_utilization=0.1) as runner:
                    assert runner
        """
    assert gpu007(source) == [
        (13, 10, "2 " + PREFIX + "fixture `big`: 0.9, `vllm_runner(...)` line 13: 0.3; "
         "sum 1.2 > 1.0"),
        (20, 14, "2 " + PREFIX + "fixture `big`: 0.9, `vllm_runner(...)` line 20: 0.3; "
         "sum 1.2 > 1.0")]

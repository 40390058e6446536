"""GPU007 engines-oversubscribe-device: engines alive at the same time whose
``gpu_memory_utilization`` shares add up past the whole device. Each engine's live range:
:mod:`.lives`."""

from __future__ import annotations

import math
from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import hit_at
from lint_gpu_tests.rules.gpu007_engines_oversubscribe_device.lives import (
    EPSILON,
    RUNNER_FACTORY_FIXTURE,
    EngineLife,
    EngineLives,
    exclusive,
)


class EnginesOversubscribeDevice(Rule):
    """Flags engines alive together whose memory shares add up past 1.0."""

    code = "GPU007"
    name = "engines-oversubscribe-device"
    summary = "Engines alive at the same time ask for more than the whole device"
    message = "{count} engines alive at once ask for more than the device: {terms}; sum " \
              "{total:g} > 1.0"
    what_it_does = (
        "Checks for engines alive at the same time in one function: nested runners, "
        "runners in one `with` group or one `ExitStack`, several `LLM(...)` bound in one "
        "scope before the earlier ones are deleted, shut down or closed (`del llm`, "
        "`llm.shutdown()`, `llm.llm_engine.engine_core.shutdown()`, `engine.close()`, in "
        "a `finally` too: the explicit shutdowns GPU003 and GPU004 recognise end an "
        "engine's life as `del` of its last reference does; for a runner, "
        "`runner.llm.shutdown()` inside its own block and `stack.close()` of the "
        "`ExitStack` it was entered in), engine fixtures the test "
        "requests (as parameters or through `@pytest.mark.usefixtures` on it or its "
        "class) together with engines it builds, engines built through a factory "
        "fixture of the module or of a conftest (one that hands out a function building "
        "an engine or returning a runner; the bundled `vllm_runner_factory` included), "
        "and engines it gets from a "
        "helper of another module of the tree that builds and returns one (the call's "
        "share, else the one the helper writes, else the default). Each engine asks for its "
        "`gpu_memory_utilization` share of the device (`engine-memory-share`, vLLM's "
        "0.92, when the call does not set it); when the shares add up past 1.0 the rule "
        "reports the engine that tips the sum over. "
        "Literal values and module constants are read; a share known only at run time "
        "(a variable, `**kwargs`, `kv_cache_memory_bytes`, a fixture from a conftest) "
        "counts for nothing, so it is reported only when the known shares alone pass 1.0; "
        "`**kwargs` whose keys are all known and leave the share out does not hide it (a "
        "dict display, a name bound only to one and never changed in place, a call of a "
        "module function returning only such displays). "
        "Tests are those pytest runs: `test*` functions, and `test*` methods of `Test*` "
        "classes and of the module's classes they derive from, and module functions a "
        "test class binds to a `test*` name (`test_multi = _multi_image_test`). "
        "Engines in different branches of an `if` never count together. An engine built "
        "as the element of a comprehension counts once per element when the comprehension "
        "runs over a literal, a module constant or `range()` of literals with no `if` "
        "(`[LLM(m, gpu_memory_utilization=0.4) for m in (\"a\", \"b\", \"c\")]` is "
        "three engines, alive until the list is deleted, rebound or shut down in a loop); "
        "over a value known only at run time it counts as one engine, as an engine built "
        "in a loop does. A module function that returns the call of the factory fixture "
        "it is handed (`_chunked(make_runner, ...)`) builds one engine a call, as the "
        "factory does; a runner built in a `try` that skips the test when the build fails "
        "and entered by `with runner:` right after it lives until that block ends. The "
        "rule adds shares of one device: engines pinned to different devices "
        "(`CUDA_VISIBLE_DEVICES`, a plugin's device group) are reported all the same; "
        "`# noqa: GPU007` keeps such a test."
    )
    why_bad = (
        "`gpu_memory_utilization` is the fraction of the whole device one engine reserves "
        "for weights, activations and KV cache, and it is a per-instance limit: vLLM does "
        "not look at other engines. Two engines with the default 0.92 ask for 1.84 of the "
        "device; the second one fails at start-up with too little free memory, or, with a "
        "cache sized from the leftover, runs with a KV cache too small for the test. Give "
        "each engine alive at the same time a share such that the sum stays at or under 1.0, "
        "or use them one after the other."
    )
    options = ("engine-memory-share", "engine-classes", "runner-fixture", "runner-classes")
    references = ("vLLM vllm/config/cache.py: `gpu_memory_utilization` (default 0.92), a "
                  "per-instance limit",)
    INVALID = (
        Example(
            title="Two nested runners with the default share each",
            source='''\
def test_compare(vllm_runner):
    with vllm_runner("facebook/opt-125m") as base:
        with vllm_runner("facebook/opt-125m", quantization="fp8") as quant:  # error: GPU007
            assert base.generate_greedy(["hi"], 4) == quant.generate_greedy(["hi"], 4)
''',
        ),
        Example(
            title="Engines bound in one scope, a with-group, and a module constant",
            source='''\
from vllm import LLM

SHARE = 0.6


def test_two_llms():
    first = LLM("facebook/opt-125m", gpu_memory_utilization=SHARE)  # error: GPU001
    second = LLM("facebook/opt-125m", gpu_memory_utilization=0.5)  # error: GPU001, GPU007
    assert first.generate(["a"]) and second.generate(["b"])


def test_group(vllm_runner):
    with vllm_runner("a", gpu_memory_utilization=0.7) as a, vllm_runner("b") as b:  # error: GPU007
        assert a and b
''',
        ),
        Example(
            title="An engine fixture plus an engine built in the test",
            source='''\
import weakref

import pytest


@pytest.fixture
def llm(vllm_runner):
    with vllm_runner("facebook/opt-125m", gpu_memory_utilization=0.8) as runner:
        yield weakref.proxy(runner.llm)


def test_against_fixture(llm, vllm_runner):
    with vllm_runner("facebook/opt-125m", gpu_memory_utilization=0.4) as other:  # error: GPU007
        assert llm.generate(["x"]) and other.generate_greedy(["x"], 4)
''',
        ),
        Example(
            title="Two engines from a helper of another module",
            source='''\
import tests.utils as u


def test_compare():
    base = u.setup_engine("facebook/opt-125m")  # error: GPU001
    tuned = u.setup_engine("facebook/opt-125m-tuned")  # error: GPU001, GPU007
    assert base.generate(["a"]) == tuned.generate(["a"])
''',
            modules=(("tests/__init__.py", ""), ("tests/utils.py", '''\
from vllm import LLM


def setup_engine(model):
    return LLM(model, gpu_memory_utilization=0.6)
''')),
        ),
        Example(
            title="Runners from a conftest's factory fixture, entered together",
            source='''\
def test_compare(make_runner):
    with make_runner(eager=False) as graph, make_runner(eager=True) as eager:  # error: GPU007
        assert graph.generate_greedy(["a"], 4) == eager.generate_greedy(["a"], 4)
''',
            modules=(("tests/conftest.py", '''\
import pytest


@pytest.fixture
def make_runner(vllm_runner):
    def _make(eager, **kwargs):
        return vllm_runner("facebook/opt-125m", enforce_eager=eager, **kwargs)

    return _make
'''),),
        ),
    )
    VALID = (
        Example(
            title="Three runners at 0.3 each fit; engines used one after the other",
            source='''\
def test_three(vllm_runner):
    with (
        vllm_runner("a", gpu_memory_utilization=0.3) as a,
        vllm_runner("b", gpu_memory_utilization=0.3) as b,
        vllm_runner("c", gpu_memory_utilization=0.3) as c,
    ):
        assert a and b and c


def test_one_after_the_other(vllm_runner):
    with vllm_runner("facebook/opt-125m") as first:
        first.generate_greedy(["a"], 4)
    with vllm_runner("facebook/opt-125m") as second:
        second.generate_greedy(["b"], 4)
''',
        ),
        Example(
            title="Closing the `ExitStack` a runner was entered in ends its engine's life",
            source='''\
import contextlib


def test_one_after_the_other(vllm_runner):
    stack = contextlib.ExitStack()
    try:
        first = stack.enter_context(vllm_runner("facebook/opt-125m"))
        first.generate_greedy(["a"], 4)
    finally:
        stack.close()
    with vllm_runner("facebook/opt-125m") as second:
        assert second.generate_greedy(["b"], 4)
''',
        ),
        Example(
            title="A share known only at run time, and engines in different branches",
            source='''\
def test_unknown(vllm_runner, share, use_fp8):
    with vllm_runner("a") as a, vllm_runner("b", gpu_memory_utilization=share) as b:
        assert a and b
    if use_fp8:
        with vllm_runner("a", quantization="fp8") as r:
            assert r
    else:
        with vllm_runner("a") as r:
            assert r
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        if not (module.engines or module.runner_calls or RUNNER_FACTORY_FIXTURE in module.text
                or module.imported_helpers or module.conftest_factory_shares):
            return
        lives = EngineLives(module)
        for func in module.functions:
            if func.in_runner_class:
                continue
            yield from self._check_lives(lives.of(func))

    def _check_lives(self, found: list[EngineLife]) -> Iterator[Hit]:
        ordered = sorted(found, key=lambda life: life.start)
        for index, life in enumerate(ordered):
            alive = [other for other in ordered[:index]
                     if other.end >= life.start and not exclusive(other, life)]
            if not alive:
                continue
            before = math.fsum(other.share or 0.0 for other in alive)
            total = before + (life.share or 0.0)
            if total > 1.0 + EPSILON and before <= 1.0 + EPSILON:
                group = [*alive, life]
                yield hit_at(life.node, self.message.format(
                    count=len(group), terms=", ".join(g.term() for g in group),
                    total=round(total, 6)), None)

"""GPU001 engine-outside-runner: an engine built by hand instead of by the runner."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from lint_gpu_tests.analysis import ModuleAnalysis, dotted_name
from lint_gpu_tests.fixplan import WrapPlan, planner_for
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import hit_at, is_isolated


class EngineOutsideRunner(Rule):
    """Flags ``vllm.LLM(...)`` built in a test module outside the runner."""

    code = "GPU001"
    name = "engine-outside-runner"
    summary = "An engine built by hand instead of by the runner's with-statement"
    message = "Engine `{engine}(...)` built outside `with {runner}(...)`"
    fix_title = "Wrap in `with vllm_runner(...)`"
    what_it_does = (
        "Checks for engines (`vllm.LLM` however imported, or the classes in "
        "`engine-classes`) constructed in a test, fixture, helper function, helper class or "
        "at module level of a test module, instead of through the runner's with-statement."
    )
    why_bad = (
        "An engine owns a child process (EngineCore) holding the weights and KV cache on the "
        "GPU. Built by hand, that memory is released only when the garbage collector "
        "finalizes the engine client; pytest's fixture cache, tracebacks, local aliases and "
        "reference cycles delay that, and the next test starts on a full GPU (\"Available "
        "KV cache memory: -0.45 GiB\"). `with vllm_runner(...)` shuts the engine down at the "
        "end of the block, every time."
    )
    fix_safety = (
        "The fix wraps the engine's live range (construction to last use) in "
        "`with vllm_runner(...) as runner:`, binds the old name to `weakref.proxy(runner.llm)`, "
        "deletes the manual cleanup (GPU003, GPU004) and adds the `vllm_runner` parameter. "
        "Helpers, which cannot request fixtures, use the runner class. Keyword arguments are "
        "mapped (`model=` becomes the first argument, `tokenizer=` becomes `tokenizer_name=`); "
        "with `target = \"vllm\"` every default in which vLLM's runner differs from `LLM` is "
        "spelled out, so the engine is configured exactly as before (a falsy "
        "`compilation_config` such as `0` becomes `CompilationConfig(mode=0)`). An engine "
        "the fixture already hands out as `weakref.proxy(llm)` is not wrapped twice. The "
        "block covers every value that can reach the engine: aliases, containers, tuples, "
        "lazy generators, `functools.partial`, bound methods and closures, up to their last "
        "use. The fix is unsafe when the engine escapes the block (passed to a thread, "
        "captured by a closure, compared by identity, a value holding it passed to a call the "
        "analysis does not follow), when `compilation_config` is only known at run time, or "
        "when it lives in a module- or session-scoped fixture; there is no fix when it is "
        "returned, stored on `self`, in a parameter's container or a global, or used outside "
        "the block that builds it. Engines alive together in a list or dict the test builds "
        "(a comprehension, or a loop appending to it) get one `with contextlib.ExitStack() "
        "as stack:` over the container's live range, each element becoming "
        "`weakref.proxy(stack.enter_context(vllm_runner_factory(...)).llm)`: the factory "
        "fixture waits for device memory once, after the last runner exits (target `vllm`: "
        "`vllm_runner`); unsafe when an element is compared by identity. A name rebound to a "
        "new engine in each iteration of a loop or in each branch of an `if` gets one "
        "with-block per binding, inside the loop body or the branch. A factory fixture (a "
        "nested `def make(...)` that builds an engine, registers its shutdown and returns "
        "it) gets an unsafe fix: the fixture's body from the `def` on goes into "
        "`with contextlib.ExitStack() as stack:`, `make` enters a runner on the stack and "
        "returns its proxy, and `return make` becomes `yield make`; the test then holds a "
        "proxy, and the engines are torn down when the fixture's stack closes."
    )
    options = ("engine-classes", "runner-fixture", "runner-classes", "runner-attribute",
               "isolation-decorators", "target")
    references = ("vLLM tests/conftest.py: `VllmRunner` and the `vllm_runner` fixture",
                  "docs/gpu-runtime.md: memory held by hand-managed engines, measured on an H200")
    INVALID = (
        Example(
            title="A test builds the engine and cleans up by hand",
            source='''\
import gc

from vllm import LLM, SamplingParams


def test_greedy():
    llm = LLM("facebook/opt-125m", enforce_eager=True)  # error: GPU001
    outputs = llm.generate(["Hello"], SamplingParams(temperature=0))
    assert outputs[0].outputs[0].text
    del llm  # error: GPU004
    gc.collect()  # error: GPU004
''',
        ),
        Example(
            title="`import vllm` and an aliased import resolve to the same engine",
            source='''\
import vllm
from vllm.entrypoints.llm import LLM as Engine


def test_two_engines():
    first = vllm.LLM("facebook/opt-125m")  # error: GPU001
    first.generate(["a"])
    second = Engine(model="facebook/opt-125m")  # error: GPU001, GPU007
    second.generate(["b"])
''',
        ),
        Example(
            title="A helper function and module level of a test module",
            source='''\
from vllm import LLM

ENGINE = LLM("facebook/opt-125m")  # error: GPU001


def run(prompts):
    llm = LLM("facebook/opt-125m")  # error: GPU001
    outputs = llm.generate(prompts)
    return [o.outputs[0].text for o in outputs]


def test_run():
    assert run(["hi"])
''',
        ),
        Example(
            title="A wrapper class that builds an engine and never tears it down",
            source='''\
from vllm import LLM


class Generator:
    def __init__(self, model):
        self.llm = LLM(model)  # error: GPU001

    def run(self, prompts):
        return self.llm.generate(prompts)


def test_generator():
    assert Generator("facebook/opt-125m").run(["hi"])
''',
        ),
        Example(
            title="Engines alive together in a list; a name rebound in both branches",
            source='''\
from vllm import LLM


def test_three_at_once():
    llms = [LLM("facebook/opt-125m", gpu_memory_utilization=0.3) for _ in range(3)]  # error: GPU001
    assert all(llm.generate(["Hello"]) for llm in llms)


def test_by_branch(eager):
    if eager:
        llm = LLM("facebook/opt-125m", enforce_eager=True)  # error: GPU001
        assert llm.generate(["Hello"])
    else:
        llm = LLM("facebook/opt-125m")  # error: GPU001
        assert llm.generate(["Hello"])
''',
        ),
        Example(
            title="A factory fixture that builds, finalizes and returns engines",
            source='''\
import pytest
from vllm import LLM


@pytest.fixture
def make_llm(request):
    def make(model):
        llm = LLM(model, enforce_eager=True)  # error: GPU001
        request.addfinalizer(llm.llm_engine.engine_core.shutdown)  # error: GPU003
        return llm

    return make
''',
        ),
    )
    VALID = (
        Example(
            title="The managed form",
            source='''\
import weakref


def test_greedy(vllm_runner):
    with vllm_runner("facebook/opt-125m", enforce_eager=True) as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.generate(["Hello"])
''',
        ),
        Example(
            title="Engines alive together, each entered on one ExitStack (the group fix)",
            source='''\
import contextlib
import weakref


def test_three_at_once(vllm_runner_factory):
    with contextlib.ExitStack() as stack:
        llms = [weakref.proxy(stack.enter_context(vllm_runner_factory(
            "facebook/opt-125m", gpu_memory_utilization=0.3)).llm) for _ in range(3)]
        assert all(llm.generate(["Hello"]) for llm in llms)
''',
        ),
        Example(
            title="A script under tests/ (not a test module) is out of scope",
            path="tests/full_tests/generate.py",
            source='''\
import argparse

from vllm import LLM


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    llm = LLM(parser.parse_args().model)
    print(llm.generate(["hi"]))


if __name__ == "__main__":
    main()
''',
        ),
        Example(
            title="A construction expected to fail, not bound",
            source='''\
import pytest
from vllm import LLM


def test_bad_model():
    with pytest.raises(ValueError):
        LLM("no/such-model", max_model_len=-1)
''',
        ),
        Example(
            title="Process isolation frees everything at process exit",
            source='''\
from vllm import LLM

from tests.utils import create_new_process_for_each_test


@create_new_process_for_each_test()
def test_isolated():
    llm = LLM("facebook/opt-125m")
    assert llm.generate(["x"])
''',
        ),
        Example(
            title="A local class named LLM is not vLLM's; script code under the main guard",
            source='''\
class LLM:
    def __init__(self, name):
        self.name = name


def test_fake():
    assert LLM("x").name == "x"


if __name__ == "__main__":
    from vllm import LLM as Real

    Real("facebook/opt-125m")
''',
        ),
        Example(
            title="A project's own runner class builds the engine and tears it down",
            path="tests/conftest.py",
            source='''\
import pytest
from vllm import LLM


class VllmRunner:
    def __init__(self, model_name, **kwargs):
        self.llm = LLM(model_name, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.llm.llm_engine.engine_core.shutdown()
        del self.llm


@pytest.fixture
def vllm_runner():
    return VllmRunner
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        planner = planner_for(module)
        runner = module.config.runner_fixture
        for site in module.engines:
            if site.under_main_guard or site.in_runner_class or is_isolated(site.function):
                continue
            if site.in_raises and site.bound_name is None and isinstance(
                site.statement, ast.Expr
            ):
                continue
            plan = planner.engine_plan(site)
            fix = plan.fix_info() if isinstance(plan, WrapPlan) else plan
            engine = dotted_name(site.call.func) or "LLM"
            yield hit_at(site.call, self.message.format(engine=engine, runner=runner), fix)

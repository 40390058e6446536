"""GPU003 finalizer-shutdown: an engine torn down by a finalizer or try/finally."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import ModuleAnalysis, is_isolated
from lint_gpu_tests.fixplan.factories import FactoryPlan
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import FixKind
from lint_gpu_tests.parsing.syntax import names_in
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import (
    covering_fix,
    factory_fix,
    function_plans,
    hit_at,
    is_shutdown_try,
)


class FinalizerShutdown(Rule):
    """Flags hand-written engine teardown through finalizers and try/finally."""

    code = "GPU003"
    name = "finalizer-shutdown"
    summary = "An engine torn down by a finalizer or a try/finally"
    message = "Engine shut down by {how}; let `with {runner}(...)` tear it down"
    fix_title = "Remove the finalizer (part of the GPU001 rewrite)"
    fix_kinds = (FixKind.WITH_ANOTHER,)
    what_it_does = (
        "Checks for `request.addfinalizer(...)`, `atexit.register(...)` or "
        "`ExitStack.callback(...)` registering an engine's shutdown, and for a `try/finally` "
        "whose `finally` does nothing but shut an engine down and clean up after it (also "
        "when guarded: `if llm is not None: ...`), for an engine the function builds or gets "
        "from a factory helper (a module-level function that builds an engine and returns "
        "it) of the module or of another module of the tree, imported however: "
        "`from tests.utils import ...`, `from .utils import ...`, `import tests.utils as u`, "
        "a name re-exported one level deep, or from a method of its class (its own or "
        "inherited from a class of the module) that builds and returns one (`llm = "
        "self.build()`, fixed with the method as one unit, as GPU001 says). An engine "
        "from another module's helper is "
        "fixed with the helper and every call of it in the tree, as one unit planned after "
        "every file is checked; where one call cannot be rewritten, the helper is used "
        "other than by calls, or a module using it is not checked, the unit has no fix and "
        "the reason names that module and line."
    )
    why_bad = (
        "Each hand-written teardown covers one engine and one path: it runs late (atexit), "
        "misses steps (`torch._dynamo.reset()`, the distributed groups, the allocator cache) "
        "or keeps a reference to the engine alive in the finalizer itself. The runner's "
        "`__exit__` does the full teardown, in order, every time."
    )
    fix_safety = (
        "Removed as part of the GPU001 rewrite of the engine it shuts down, with the same "
        "safety (for an engine a factory helper of the module returns, the rewrite of the "
        "helper and all its calls); the `request` parameter is dropped when nothing else "
        "uses it. A finalizer "
        "for an engine the fix cannot rewrite has no fix."
    )
    INVALID = (
        Example(
            title="A finalizer registered on the fixture request",
            source='''\
import pytest
from vllm import LLM


@pytest.fixture
def llm(request):
    engine = LLM("facebook/opt-125m")  # error: GPU001
    request.addfinalizer(engine.llm_engine.engine_core.shutdown)  # error: GPU003
    yield engine  # error: GPU002
''',
        ),
        Example(
            title="try/finally that only tears the engine down",
            source='''\
from vllm import LLM


def test_generate():
    llm = LLM("facebook/opt-125m")  # error: GPU001
    try:  # error: GPU003
        assert llm.generate(["hi"])
    finally:
        llm.llm_engine.engine_core.shutdown()
''',
        ),
        Example(
            title="A guarded shutdown of an engine a factory helper returns",
            source='''\
from vllm import LLM


def build_llm(model):
    llm = LLM(model, enforce_eager=True)  # error: GPU001
    return llm


def test_generate():
    llm = None
    try:  # error: GPU003
        llm = build_llm("facebook/opt-125m")
        assert llm.generate(["hi"])
    finally:
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
''',
        ),
        Example(
            title="A shutdown of an engine that a method of a base class returns",
            source='''\
from vllm import LLM


class EngineTests:
    model = "facebook/opt-125m"

    def build(self):
        return LLM(self.model, enforce_eager=True)  # error: GPU001


class TestGenerate(EngineTests):
    def test_generate(self):
        llm = self.build()
        try:  # error: GPU003
            assert llm.generate(["hi"])
        finally:
            llm.llm_engine.engine_core.shutdown()
''',
        ),
        Example(
            title="A shutdown of an engine a helper of another module returns",
            source='''\
from .utils import build_llm


def test_generate():
    llm = build_llm("facebook/opt-125m")  # error: GPU001
    try:  # error: GPU003
        assert llm.generate(["hi"])
    finally:
        llm.llm_engine.engine_core.shutdown()
''',
            path="tests/entrypoints/test_generate.py",
            modules=(("tests/entrypoints/__init__.py", ""), ("tests/entrypoints/utils.py", '''\
from vllm import LLM


def build_llm(model):
    llm = LLM(model, enforce_eager=True)
    return llm
''')),
        ),
    )
    VALID = (
        Example(
            title="A finally that does other work too",
            source='''\
import weakref


def test_events(vllm_runner, subscriber):
    with vllm_runner("facebook/opt-125m") as runner:
        llm = weakref.proxy(runner.llm)
        try:
            assert llm.generate(["hi"])
        finally:
            subscriber.close()
''',
        ),
        Example(
            title="A finalizer that is not about an engine",
            source='''\
import pytest


@pytest.fixture
def workdir(request, tmp_path):
    request.addfinalizer(lambda: print("done"))
    return tmp_path
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        planner = planner_for(module)
        runner = module.config.runner_named
        for func in module.functions:
            if is_isolated(func) or func.in_runner_class:
                continue
            received = module.function_bindings(func).received
            engines = module.engine_names(func) | received
            if not engines:
                continue
            plans = function_plans(module, func)
            for node in module.nodes_of(func):
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and (
                    planner.finalizer_engine(node.value, engines)
                ):
                    call = node.value
                    how = f"`{ast.unparse(call.func)}(...)`"
                    plan: WrapPlan | FactoryPlan | None
                    plan, fix = covering_fix(plans, node.lineno, self.fix_title)
                    if plan is None and names_in(call) & received:
                        plan, fix = factory_fix(module, func, node.lineno, self.fix_title)
                    yield hit_at(call, self.message.format(how=how, runner=runner), fix, plan)
                elif isinstance(node, ast.Try) and is_shutdown_try(module, node, engines):
                    plan, fix = covering_fix(plans, node.lineno, self.fix_title,
                                             try_line=True)
                    if plan is None and any(names_in(s) & received for s in node.finalbody):
                        plan, fix = factory_fix(module, func, node.lineno, self.fix_title)
                    yield Hit(node.lineno, node.col_offset, node.lineno, node.col_offset + 3,
                              self.message.format(how="`try/finally`", runner=runner), fix,
                              plan.anchor if plan else None)

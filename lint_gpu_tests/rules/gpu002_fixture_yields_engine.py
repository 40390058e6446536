"""GPU002 fixture-yields-engine: a fixture hands out a strong reference to an engine."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import (
    Bindings,
    FunctionInfo,
    FunctionKind,
    ModuleAnalysis,
)
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.fixplan.proxy import proxy_plan
from lint_gpu_tests.ftypes import Applicability, FixInfo, FixKind
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import factory_fix, hit_at


class FixtureYieldsEngine(Rule):
    """Flags fixtures that yield or return an engine instead of a weak proxy of it."""

    code = "GPU002"
    name = "fixture-yields-engine"
    summary = "A fixture hands out the engine itself instead of a weak proxy"
    message = "Fixture `{fixture}` hands out the engine itself; yield `weakref.proxy(...)` of it"
    fix_title = "Yield `weakref.proxy(runner.llm)`"
    fix_kinds = (FixKind.PROXY_ENGINE_REFERENCE, FixKind.WITH_ANOTHER)
    what_it_does = (
        "Checks for fixtures that `yield` or `return` an engine, the runner's engine "
        "(`runner.llm`), or a name bound to either, instead of `weakref.proxy(...)` of it. "
        "An engine that a factory helper (of the module, a conftest or another module of "
        "the tree) builds and returns is an engine too."
    )
    why_bad = (
        "pytest keeps a fixture's value in its cache until the fixture's teardown has "
        "finished, and tests keep it in locals and tracebacks. A strong reference there keeps "
        "the engine object, and everything it holds, alive after the runner has shut it down. "
        "A `weakref.proxy` behaves like the engine for the test but lets it be freed."
    )
    fix_safety = (
        "Safe for a fixture that yields inside the runner's with-block: the value becomes "
        "`weakref.proxy(...)`. A name bound to `runner.llm` is rebound to the proxy instead. "
        "Returning the engine from inside the with-block is turned into a yield, which changes "
        "when the engine is torn down, so that fix is unsafe. An engine built by hand in the "
        "fixture is fixed together with GPU001. An engine that a factory helper builds is "
        "fixed with the helper's unit: the helper becomes a context manager that hands out "
        "a weak proxy, and the fixture yields what its with-statement binds."
    )
    INVALID = (
        Example(
            title="The runner's engine yielded as is",
            source='''\
import pytest


@pytest.fixture
def llm(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        yield runner.llm  # error: GPU002
''',
        ),
        Example(
            title="A fixture that builds and yields the engine",
            source='''\
import pytest
from vllm import LLM


@pytest.fixture
def llm():
    engine = LLM("facebook/opt-125m")  # error: GPU001
    yield engine  # error: GPU002
''',
        ),
        Example(
            title="A fixture that yields the engine a factory helper builds",
            source='''\
import pytest
from vllm import LLM


def build_llm():
    return LLM("facebook/opt-125m")  # error: GPU001


@pytest.fixture
def llm():
    engine = build_llm()
    yield engine  # error: GPU002
''',
        ),
    )
    VALID = (
        Example(
            title="A weak proxy",
            source='''\
import weakref

import pytest


@pytest.fixture
def llm(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        yield weakref.proxy(runner.llm)
''',
        ),
        Example(
            title="A fixture yielding the runner class or a runner is not an engine",
            source='''\
import pytest


@pytest.fixture
def runner_cls(vllm_runner):
    return vllm_runner
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        planner = planner_for(module)
        for func in module.functions:
            if func.kind is not FunctionKind.FIXTURE:
                continue
            names = module.function_bindings(func)
            for node in module.nodes_of(func):
                if not isinstance(node, (ast.Yield, ast.Return)) or node.value is None:
                    continue
                value = node.value
                kind = module.engine_expr_kind(value, func)
                if kind is None:
                    if _received(module, names, value):
                        yield self._received_hit(module, func, node.lineno, value)
                    continue
                fix: FixInfo
                plan: WrapPlan | FixInfo | None = None
                if kind == "engine":
                    fix = FixInfo.none(self.fix_title, "the engine is not built in this fixture")
                    for site in module.engines:
                        if site.function is func and (
                            site.call is value
                            or (isinstance(value, ast.Name) and site.bound_name is not None
                                and value.id in names.engines)
                        ):
                            plan = planner.engine_plan(site)
                            fix = plan.covered_fix(_yield_title(plan.title)) \
                                if isinstance(plan, WrapPlan) else \
                                dataclasses.replace(plan, title=_yield_title(plan.title))
                            break
                elif isinstance(value, ast.Name):
                    fix = FixInfo(Applicability.SAFE, f"Bind `{value.id}` to a weak proxy",
                                  kind=FixKind.PROXY_ENGINE_REFERENCE,
                                  plan=proxy_plan(module, value.lineno, yielded=True))
                elif isinstance(node, ast.Return):
                    fix = FixInfo(Applicability.UNSAFE, self.fix_title,
                                  "a `return` inside the runner's block becomes a `yield`, "
                                  "which changes when the engine is torn down",
                                  FixKind.PROXY_ENGINE_REFERENCE,
                                  proxy_plan(module, value.lineno, yielded=True))
                else:
                    fix = FixInfo(Applicability.SAFE, self.fix_title,
                                  kind=FixKind.PROXY_ENGINE_REFERENCE,
                                  plan=proxy_plan(module, value.lineno, yielded=True))
                if kind != "engine" and fix.applicability is Applicability.SAFE:
                    consumer = planner.consumer_problem(func)
                    if consumer is not None:
                        fix = dataclasses.replace(fix, applicability=Applicability.UNSAFE,
                                                  reason=consumer)
                yield hit_at(value, self.message.format(fixture=func.name), fix, plan)


    def _received_hit(self, module: ModuleAnalysis, func: FunctionInfo, line: int,
                      value: ast.expr) -> Hit:
        """The report of ``value``, the engine a factory helper built, yielded or returned
        by the fixture ``func`` at ``line``: the helper's fix unit makes the helper a
        context manager handing out a weak proxy, and this statement hands out that proxy
        (the unit's fix; none, with the unit's reason, where it has none)."""
        unit, fix = factory_fix(module, func, line, RECEIVED_TITLE, hands_out=True)
        return hit_at(value, self.message.format(fixture=func.name), fix, unit)

RECEIVED_TITLE = "Yield the weak proxy that the helper made a context manager hands out"


def _received(module: ModuleAnalysis, names: Bindings, value: ast.expr) -> bool:
    """True when ``value`` is an engine the fixture gets from a factory helper (of the
    module or of another module of the tree): a call of it, or a name bound to its result
    (a helper class's instance is not an engine)."""
    if isinstance(value, ast.Name):
        return value.id in names.received and value.id not in names.instances
    return module.factory_called(value) is not None


def _yield_title(title: str) -> str:
    """GPU002's title for the fix of the engine its fixture builds: what the fixture yields
    after it (``Yield a weak proxy of the engine of `with vllm_runner(...)` ``), not the
    engine fix's own title; a title of another form is kept."""
    prefix = "Wrap in "
    if not title.startswith(prefix):
        return title
    return f"Yield a weak proxy of the engine of {title[len(prefix):]}"

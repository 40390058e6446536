"""GPU004 manual-engine-cleanup: hand-written cleanup in a function that owns an engine."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace

from lint_gpu_tests.analysis.analysis import (
    FunctionInfo,
    FunctionKind,
    ImportedHelper,
    ModuleAnalysis,
    is_isolated,
    local_names,
    statement_block,
)
from lint_gpu_tests.analysis.env_mutations import TEARDOWN_OF
from lint_gpu_tests.fixplan.classes import ClassPlan, owner_classes
from lint_gpu_tests.fixplan.cleanup import ends_engine
from lint_gpu_tests.fixplan.factories import FactoryPlan
from lint_gpu_tests.fixplan.isolate import IsolatePlan
from lint_gpu_tests.fixplan.plan import CleanupPlan, PlanKind, WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.fixplan.stored import cleans, stored_targets
from lint_gpu_tests.fixplan.xunit import XunitPlan, xunit_plan_for_teardown
from lint_gpu_tests.ftypes import Applicability, FixInfo, FixKind
from lint_gpu_tests.parsing.prefilter import RUNNER_FACTORY_FIXTURE
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import dotted_name, head_name, last_name, names_in
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import (
    covering_fix,
    factory_fix,
    function_plans,
    hit_at,
    is_shutdown_try,
)


class ManualEngineCleanup(Rule):
    """Flags ``del llm``, ``gc.collect()``, ``empty_cache()`` ... next to an engine."""

    code = "GPU004"
    name = "manual-engine-cleanup"
    summary = "Manual cleanup in a function that owns an engine"
    message = "Manual cleanup `{what}` in a function that owns an engine"
    fix_title = "Remove the manual cleanup"
    fix_kinds = (FixKind.REMOVE_MANUAL_CLEANUP,)
    what_it_does = (
        "In a function that owns an engine (builds one, holds a runner, gets one from a "
        "factory helper (a module-level function that builds an engine and returns it: "
        "`llm = setup_engine(...)`, or returns it in a tuple the caller unpacks: `llm, params "
        "= setup_llm(...)`; fixed with the helper as one unit, as GPU001 says; not one whose "
        "decorator caches what it returns, "
        "`@functools.cache`, whose engine is the cache's) of the module or of another "
        "module of the tree "
        "(`from tests.utils import setup_engine`, `from .utils import ...`, `import "
        "tests.utils as u`, a name re-exported one level deep; the tree's engine helpers "
        "are summarised once per run), or from a method of its class (its own or inherited "
        "from a class of the module) that builds and returns one (`llm = "
        "self._make_llm(...)`, or called on a class of the module that has it: `llm = "
        "TestLora._make_llm(self)`, or on an instance of one: `factory = EngineFactory(); "
        "llm = factory.create()`; fixed with the method as one unit, as GPU001 says; "
        "a method of a class of another module of the tree, inherited (`class "
        "TestLora(EngineMixin)`) or called on an instance, has no fix), holds "
        "an instance of a helper class of another "
        "module whose methods store an engine on `self` (`helper = EngineHelper(...)`: its "
        "`del helper.llm` too), or receives the "
        "`vllm_runner` or `vllm_runner_factory` fixture or an engine fixture defined in the "
        "module or in a `conftest.py` pytest loads for it (or in a module its "
        "`pytest_plugins` names), or imported from another module of the tree "
        "(`from tests.fixtures import llm`, or `import *`), or calls the factory a fixture "
        "there hands out and keeps no engine of: `llm = make_llm(...)` after `def "
        "_make(**kw): return LLM(...)` and `return _make` in the fixture `make_llm`, "
        "removed by the unit of the fixture and its callers, in the module or, for a "
        "conftest's, across the tree (GPU001)), checks for "
        "`del <engine>` (a name the function binds to an engine, a runner or an alias of "
        "one; the `del` of a fixture parameter frees nothing, as pytest still holds the "
        "fixture's value, and is left alone), `gc.collect()`, "
        "`torch.cuda/npu/xpu/hpu/accelerator.empty_cache()`, "
        "`current_platform.empty_cache()`, `cleanup_dist_env_and_memory()`, "
        "`destroy_model_parallel()`, `destroy_distributed_environment()`, "
        "`wait_for_gpu_memory_to_clear(...)`, a direct `engine_core.shutdown()`, the "
        "proxy-then-delete idiom `llm = weakref.proxy(llm); del llm` (one report, at the "
        "assignment; at the `try` when it sits in `try: ... except UnboundLocalError: pass`, "
        "the guard for a construction that raised), under "
        "`target = \"vllm\"` the older `cleanup()` of vLLM's `tests/conftest.py` and "
        "`tests/utils.py`, and the names in `cleanup-functions` (a bare name by its name, a "
        "dotted one such as `pkg.mod.force_shutdown` however it is imported), a call of a "
        "cleanup helper of the module or of another module of the tree (a module-level "
        "function whose whole body is such cleanup of its parameters: `def _shutdown(llm): "
        "llm.shutdown(); del llm; gc.collect()`; `from tests.utils import cleanup`), and a "
        "call that hands an engine the function owns to a shutdown helper of the module or "
        "of the tree (a module-level function that calls `.shutdown()` on that parameter or "
        "an attribute of it, or hands it to another such helper, and does more: "
        "`force_engine_shutdown(llm)`; its removal is an unsafe fix, as the runner's "
        "teardown may not do the rest), at teardown: "
        "after the engine's last use in the "
        "function (or after a fixture's `yield`; the engine's own shutdown, such as "
        "`llm.shutdown()` in the `finally` of the `try` holding the call, is its cleanup, "
        "not a use). A cleanup call between two uses of the "
        "engine (measuring memory between rounds) or before any engine exists is not "
        "reported, nor are the statements of a `try/finally` that GPU003 reports (one "
        "statement, one report). `del m` of the runner inside its own `with ... as m:` "
        "block is reported too, for every runner class: `runner-classes`, and a class "
        "deriving from one in the module or in a `conftest.py` pytest loads for it (the "
        "data-parallel `DPVllmRunner(VllmRunner)` of vllm-ascend's conftest). Functions "
        "that run as their own process are skipped "
        "(`isolation-decorators`, `process-launchers`, a launcher helper of the tree: see "
        "GPU001). Also in the methods of a helper class "
        "that owns an engine (`self.llm = LLM(...)` in `__init__` or a method it calls): "
        "`del self.llm` and the same calls, in its `close()`, `__del__` or any other method, "
        "and `del` of an instance (`del tester`) or of its engine's attribute (`del "
        "tester.llm`) in the function that builds it. And in an "
        "xunit teardown (`teardown_class`, `tearDownClass`, `teardown_method`, `tearDown`, "
        "`teardown_module` ...) whose setup stores an engine on the class, the instance or a "
        "module global (`cls.llm = LLM(...)` in `setup_class`): `del cls.llm`, "
        "`cls.llm.shutdown()` and the same calls, fixed with the set-up's GPU001 where the "
        "set-up builds the engine itself (the teardown's cleanup becomes "
        "`cls._engine_stack.close()`, or for a module's global `_engine_stack.close()`), or "
        "with its factory helper's unit where the set-up gets the engine from one (the "
        "set-up enters the helper's call on the stack); no fix elsewhere, and the reason "
        "says where the engine is stored. And after the `yield` of a fixture that stores "
        "its engine on an attribute (`request.cls.llm = LLM(...)`): `del request.cls.llm`, "
        "its shutdown and the same calls, removed with the fixture's GPU001."
    )
    why_bad = (
        "`del llm` + `gc.collect()` was measured to leave 5.1 GiB free of 80 GiB while an "
        "explicit engine-core shutdown left 78.7 GiB: partial cleanup looks like it works and "
        "does not. It is also skipped when the test fails before it. The runner's teardown "
        "does all of these steps, in order, even on failure."
    )
    fix_safety = (
        "Removed as part of the GPU001 rewrite of the engine, with the same safety (for a "
        "helper class: the class becomes a context manager over the runner, a method made "
        "only of cleanup is deleted with its calls; unsafe; for an engine a factory helper "
        "of the module returns: the helper becomes a context manager over the runner and "
        "every call of it a `with` block, one fix with the helper's GPU001). In a "
        "function that already uses the runner, removing a leftover cleanup call is unsafe: "
        "it changes when memory is freed within the test. `del m` of the runner inside its "
        "own `with ... as m:` block frees nothing (the with-statement holds the runner until "
        "its `__exit__`): removing it is safe when nothing uses, binds or captures `m` after "
        "it and it is not in a loop inside the block; otherwise there is no fix. With "
        "`fix-strategy = \"isolate\"` the cleanup goes with the GPU001 fix that runs the test "
        "in a new process (the process exit frees everything), except cleanup that frees an "
        "engine before another one of the same test is built, which stays. Cleanup of an "
        "engine from a factory helper of another module goes with the fix of the helper "
        "and every call of it in the tree, one unit applied all or not at all, as safe as "
        "its least safe call's block; none when a call cannot be rewritten, the helper is "
        "used other than by calls or a module using it is not checked (the reason names "
        "the module and line). An engine held by a helper class of another module has no "
        "fix: its reason names the class and its module. Cleanup the rewrite keeps inside "
        "the new block (before a later use of what the engine handed on, a future of a "
        "thread) goes in the next pass, and is reported with that pass's fix: a cleanup "
        "call as an unsafe fix, `del` of a bare runner as its own block allows (no safer "
        "than the rewrite), `del` of an engine's name none (it deletes the block's proxy)."
    )
    options = ("cleanup-functions", "isolation-decorators", "process-launchers",
               "fix-strategy")
    INVALID = (
        Example(
            title="Leftover cleanup after the runner block",
            source='''\
import gc
import weakref

import torch


def test_chat(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.chat([{"role": "user", "content": "hi"}])
    gc.collect()  # error: GPU004
    torch.cuda.empty_cache()  # error: GPU004
''',
        ),
        Example(
            title="`del` of the runner inside its own with-block; a fixture's teardown",
            source='''\
import gc

import pytest
from tests.conftest import VllmRunner


def test_generate():
    with VllmRunner("facebook/opt-125m") as vllm_model:
        assert vllm_model.generate(["a"])
        del vllm_model  # error: GPU004


@pytest.fixture
def outputs(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        yield runner.llm.generate(["a"])
    gc.collect()  # error: GPU004
''',
        ),
        Example(
            title="Cleanup in the methods of a helper class that owns an engine",
            source='''\
import torch
from vllm import LLM
from vllm.distributed import cleanup_dist_env_and_memory


class Scorer:
    def __init__(self, model):
        self.llm = LLM(model)  # error: GPU001

    def score(self, prompt):
        return self.llm.generate([prompt])[0].outputs[0].cumulative_logprob

    def __del__(self):
        cleanup_dist_env_and_memory()  # error: GPU004
        torch.cuda.empty_cache()  # error: GPU004


def test_score():
    scorer = Scorer("facebook/opt-125m")
    assert scorer.score("hi") is not None
    del scorer  # error: GPU004
''',
        ),
        Example(
            title="Cleanup in a test that requests an engine fixture by its decorator's "
                  "`name=`",
            source='''\
import gc

import pytest
from vllm import LLM


@pytest.fixture(scope="module", name="llm")
def llm_fixture():
    yield LLM("facebook/opt-125m")  # error: GPU001, GPU002


def test_generate(llm):
    assert llm.generate(["hi"])
    gc.collect()  # error: GPU004
''',
        ),
        Example(
            title="Cleanup of an engine a factory helper of the module returns",
            source='''\
import gc

import vllm


def setup_engine(num_loras):
    return vllm.LLM("facebook/opt-125m", enable_lora=True, max_loras=num_loras)  # error: GPU001


def test_single_lora():
    llm = setup_engine(1)
    assert llm.generate(["hi"])
    del llm  # error: GPU004
    gc.collect()  # error: GPU004
''',
        ),
        Example(
            title="Cleanup of an engine a method of the test class returns",
            source='''\
import gc

from vllm import LLM


class TestLora:
    def _make_llm(self, num_loras):
        return LLM("facebook/opt-125m", enable_lora=True, max_loras=num_loras)  # error: GPU001

    def test_single_lora(self):
        llm = self._make_llm(1)
        assert llm.generate(["hi"])
        del llm  # error: GPU004
        gc.collect()  # error: GPU004
''',
        ),
        Example(
            title="Cleanup of an engine a helper of another module returns, or holds",
            source='''\
import gc

from tests.utils import EngineHelper, setup_engine


def test_single_lora():
    llm = setup_engine(1)  # error: GPU001
    assert llm.generate(["hi"])
    del llm  # error: GPU004
    gc.collect()  # error: GPU004


def test_scores():
    helper = EngineHelper("facebook/opt-125m")
    assert helper.llm.generate(["hi"])
    helper.llm.llm_engine.engine_core.shutdown()  # error: GPU004
    del helper.llm  # error: GPU004
''',
            path="tests/lora/test_lora.py",
            modules=(("tests/__init__.py", ""), ("tests/utils.py", '''\
from vllm import LLM


def setup_engine(num_loras):
    return LLM("facebook/opt-125m", enable_lora=True, max_loras=num_loras)


class EngineHelper:
    def __init__(self, model):
        self.llm = LLM(model)
''')),
        ),
        Example(
            title="An engine a helper returns in a tuple, cleaned up by the test",
            source='''\
import gc

from vllm import LLM, SamplingParams


def setup_llm(model):
    llm = LLM(model)  # error: GPU001
    return llm, SamplingParams(temperature=0.0)


def test_generate():
    llm, params = setup_llm("facebook/opt-125m")
    assert llm.generate(["a"], params)
    del llm  # error: GPU004
    gc.collect()  # error: GPU004
''',
        ),
        Example(
            title="A call of the module's own cleanup helper",
            source='''\
import gc

from vllm import LLM


def _shutdown(llm):
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()


def test_generate():
    llm = LLM("facebook/opt-125m")  # error: GPU001
    assert llm.generate(["a"])
    _shutdown(llm)  # error: GPU004
''',
        ),
        Example(
            title="A shutdown helper that does more than clean up (its call's removal is unsafe)",
            source='''\
import time

from vllm import LLM


def _stop_engine_core(engine_core):
    engine_core.shutdown()
    time.sleep(1.0)


def force_engine_shutdown(llm):
    _stop_engine_core(llm.llm_engine.engine_core)


def test_generate():
    llm = LLM("facebook/opt-125m")  # error: GPU001
    assert llm.generate(["a"])
    force_engine_shutdown(llm)  # error: GPU004
''',
        ),
        Example(
            title="An xunit teardown cleaning up the engine its setup stored on the class",
            source='''\
import gc

from vllm import LLM


class TestGenerate:
    @classmethod
    def setup_class(cls):
        cls.llm = LLM("facebook/opt-125m")  # error: GPU001

    @classmethod
    def teardown_class(cls):
        cls.llm.llm_engine.engine_core.shutdown()  # error: GPU004
        del cls.llm  # error: GPU004
        gc.collect()  # error: GPU004

    def test_generate(self):
        assert self.llm.generate(["a"])
''',
        ),
        Example(
            title="A fixture cleaning up the engine it stored on the test class",
            source='''\
import gc

import pytest
from vllm import LLM


class TestGenerate:
    @pytest.fixture(scope="class", autouse=True)
    def engine(self, request):
        request.cls.llm = LLM("facebook/opt-125m")  # error: GPU001
        yield
        del request.cls.llm  # error: GPU004
        gc.collect()  # error: GPU004

    def test_generate(self):
        assert self.llm.generate(["a"])
''',
        ),
        Example(
            title="A module's xunit teardown cleaning up the global its setup stored",
            source='''\
import gc

from vllm import LLM

llm = None


def setup_module():
    global llm
    llm = LLM("facebook/opt-125m")  # error: GPU001


def teardown_module():
    global llm
    del llm  # error: GPU004
    gc.collect()  # error: GPU004


def test_generate():
    assert llm.generate(["a"])
''',
        ),
    )
    VALID = (
        Example(
            title="A kernel test with no engine",
            source='''\
import torch


def test_matmul():
    a = torch.ones(4, 4)
    assert (a @ a).sum() == 64
    torch.cuda.empty_cache()
''',
        ),
        Example(
            title="Cleanup between two uses of the engine is not its teardown",
            source='''\
import gc
import weakref

import pytest
import torch


@pytest.fixture
def llm(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        yield weakref.proxy(runner.llm)


def test_memory_between_rounds(llm):
    first = llm.chat([{"role": "user", "content": "hi"}])
    gc.collect()
    torch.cuda.empty_cache()
    second = llm.chat([{"role": "user", "content": "hi"}])
    assert first and second


def test_rounds(llm):
    for _ in range(2):
        assert llm.generate(["a"])
        gc.collect()
''',
            path="tests/test_memory.py",
        ),
        Example(
            title="The definition of a shared cleanup helper",
            source='''\
import gc

import torch


def cleanup_dist_env_and_memory():
    gc.collect()
    torch.cuda.empty_cache()


def test_uses_helper():
    cleanup_dist_env_and_memory()
''',
        ),
        Example(
            title="An xunit teardown whose setup stores no engine",
            source='''\
import gc


class TestTokens:
    def setup_method(self):
        self.tokens = [1, 2, 3]

    def teardown_method(self):
        del self.tokens
        gc.collect()

    def test_tokens(self):
        assert self.tokens
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        # A helper class's own cleanup (even in the ``__init__`` that builds the engine) is
        # the class rewrite's to remove: its report wins.
        reported: set[int] = set()
        for hit in self._owner_class_hits(module):
            reported.add(hit.node_line)
            yield _removal(hit)
        for hit in self._function_hits(module):
            if hit.node_line not in reported:
                reported.add(hit.node_line)
                yield _removal(hit)
        for hit in self._xunit_hits(module):
            if hit.node_line not in reported:
                yield _removal(hit)

    def _xunit_hits(self, module: ModuleAnalysis) -> Iterator[Hit]:
        """Cleanup in an xunit teardown (``teardown_class``, ``tearDown``,
        ``teardown_module`` ...) of the engine its setup stored on the class, the instance
        or a module global (``cls.llm = LLM(...)`` in ``setup_class``): ``del cls.llm``,
        the engine's shutdown and the cleanup calls. The fix is the set-up's
        (:mod:`lint_gpu_tests.fixplan.xunit`), or its factory helper's unit where the engine
        comes from one; else the reason says where the engine is stored."""
        for setup in module.functions:
            if setup.name not in TEARDOWN_OF or setup.parent is not None:
                continue
            stored = _xunit_engines(module, setup)
            if not stored:
                continue
            for teardown in module.functions:
                if teardown.name != TEARDOWN_OF[setup.name] or teardown.parent is not None \
                        or teardown.owner_class is not setup.owner_class:
                    continue
                receiver = teardown.params[0] if teardown.params else None
                planned = xunit_plan_for_teardown(module, teardown)
                built_by_factory = any(module.factory_called(n) is not None
                                       for n in module.nodes_of(setup)
                                       if isinstance(n, ast.Call))
                for node in module.nodes_of(teardown):
                    what = _xunit_cleanup(module, node, receiver, stored)
                    if what is None:
                        continue
                    statement = module.statement_of(node)
                    spelled, line = next(iter(stored.values()))
                    if isinstance(planned, XunitPlan) and \
                            any(s is node and s.lineno in planned.remove_lines
                                for s in teardown.node.body):
                        yield hit_at(node, self.message.format(what=what),
                                     planned.covered_fix(self.fix_title), planned)
                        continue
                    if planned is None and built_by_factory:
                        # The factory's unit enters the call on the set-up's stack.
                        unit, fix = factory_fix(module, setup, statement.lineno,
                                                self.fix_title)
                        yield hit_at(node, self.message.format(what=what), fix, unit)
                        continue
                    reason = planned.reason if isinstance(planned, FixInfo) else (
                        f"the engine is stored on `{spelled}` by `{setup.name}()` (line "
                        f"{line}) and lives until `{teardown.name}()`: no fix rewrites "
                        "this xunit set-up and teardown (one whose set-up stores the engine "
                        "on its class or instance, or in a global it declares, built there "
                        "or by a factory helper, and whose teardown cleans it up, is fixed)")
                    yield hit_at(node, self.message.format(what=what),
                                 FixInfo.none(self.fix_title, reason))

    def _owner_class_hits(self, module: ModuleAnalysis) -> Iterator[Hit]:
        """Cleanup in the methods of a helper class that owns an engine (``del self.llm``,
        ``gc.collect()`` in its ``close()``), and of its instances in the functions that
        build them (``del tester``), which the class rewrite removes
        (:mod:`lint_gpu_tests.fixplan.classes`)."""
        for owner in owner_classes(module):
            plan = owner.plan
            if not isinstance(plan, ClassPlan):
                for stmt, what in (*owner.cleanup, *owner.deletes):
                    yield hit_at(stmt, self.message.format(what=what),
                                 FixInfo.none(self.fix_title, plan.reason))
                continue
            fix = plan.fix_info(self.fix_title)
            found = [*owner.cleanup, *owner.deletes]
            for use in plan.uses:
                for node in walk_breadth(module.tree):
                    if not (isinstance(node, ast.stmt) and node.lineno in use.remove_lines):
                        continue
                    if isinstance(node, ast.Delete):
                        if any(stmt is node for stmt, _ in owner.deletes):
                            continue
                        found.append((node, "del " + ", ".join(
                            t.id for t in node.targets if isinstance(t, ast.Name))))
                    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                            last_name(node.value.func) != "__exit__":
                        found.append((node, module.cleanup_call_kind(node.value) or (
                            ast.get_source_segment(module.text, node.value) or "cleanup")))
            for stmt, what in found:
                hit = hit_at(stmt, self.message.format(what=what), fix)
                yield replace(hit, depends_on=plan.anchor)

    def _function_hits(self, module: ModuleAnalysis) -> Iterator[Hit]:
        for func in module.functions:
            stored = stored_targets(module, func)  # attributes a fixture stores its engine on
            if is_isolated(func) or func.in_runner_class or not (
                    module.owns_engine(func) or RUNNER_FACTORY_FIXTURE in func.params
                    or stored):
                continue
            names = module.function_bindings(func)
            # A fixture storing a factory helper's engine gets it from the helper's unit.
            received = bool(names.received) or bool(stored) and any(
                module.factory_called(n) is not None for n in module.nodes_of(func))
            deletable = names.engines | names.runners | names.strong_aliases | names.received
            plans = function_plans(module, func)
            engines = module.engine_names(func) | names.received
            covered = {id(n) for node in module.nodes_of(func)
                       if engines and is_shutdown_try(module, node, engines)
                       for s in node.finalbody  # type: ignore[attr-defined]
                       for n in walk_breadth(s)}
            held: set[str] | None = None
            idioms, inside_idioms = _release_idioms(module, func, deletable)
            for node in module.nodes_of(func):
                what: str | None = None
                partial: str | None = None  # a shutdown helper's call: what it does more
                if id(node) in inside_idioms:
                    continue  # reported once, at the idiom's first statement
                if id(node) in idioms:
                    what = idioms[id(node)]
                elif isinstance(node, ast.Delete):
                    targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
                    if targets and any(t in deletable for t in targets):
                        what = f"del {', '.join(targets)}"
                    elif names.instances and (held_attrs := _instance_attributes(
                            node, names.instances)):
                        what = f"del {', '.join(held_attrs)}"
                    elif held_attrs := [spelled for t in node.targets
                                        if (spelled := dotted_name(t)) in stored]:
                        what = f"del {', '.join(held_attrs)}"
                elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                    what = module.cleanup_call_kind(node.value) or _engine_shutdown(
                        node.value, names.engines | names.received | names.strong_aliases)
                    func_of = node.value.func
                    if what is None and stored and isinstance(func_of, ast.Attribute) and \
                            func_of.attr in ("shutdown", "close") and not node.value.args \
                            and (on := dotted_name(func_of.value)) in stored:
                        what = f"{on}.{func_of.attr}()"
                    if what is None:
                        found = _shutdown_helper_call(module, func, node.value, deletable)
                        if found is not None:
                            what, others, partial = found
                if what is None or not isinstance(node, ast.stmt) or id(node) in covered:
                    continue
                if not isinstance(node, ast.Delete) and id(node) not in idioms:
                    if held is None:
                        held = _engine_holders(module, func, deletable)
                    if _engine_used_later(module, func, node, held):
                        # Between two uses: not the engine's teardown, unless the rewrite
                        # of the engine removes it all the same (``del llm; gc.collect()``
                        # before an assert on a value read from the engine): one statement
                        # the fix deletes, one report.
                        removed = _removed_between_uses(module, func, node, plans,
                                                        self.fix_title, received)
                        if removed is not None:
                            yield hit_at(node, self.message.format(what=what), removed[1],
                                         removed[0])
                        continue
                plan: WrapPlan | FactoryPlan | None = None
                fix: FixInfo
                if partial is not None:
                    blocked = _shutdown_call_kept(module, node, deletable, others)
                    yield hit_at(node, self.message.format(what=what), FixInfo(
                        Applicability.NONE if blocked else Applicability.UNSAFE,
                        self.fix_title, f"{partial}; {blocked}: no fix removes the call (the "
                        "engine's with-block keeps it, acting on the proxy)" if blocked else
                        f"{partial}: removing the call drops the rest (the engine's "
                        "with-block keeps it, acting on the proxy, unless this fix removes "
                        "it)"))
                    continue
                own_block = _own_with_targets(module, func, node)
                after_other = _after_other_finally_statement(module, node, deletable, stored)
                if own_block is not None:
                    fix = _del_in_own_block_fix(module, func, node, own_block, self.fix_title)
                elif plans or received:
                    plan, fix = _covering_fix(module, func, node, plans, self.fix_title,
                                              received)
                    if plan is None and after_other is not None and \
                            fix.applicability is Applicability.NONE:
                        fix = FixInfo.none(self.fix_title, after_other)
                    elif plan is None and fix.applicability is Applicability.NONE and \
                            _left_after_block(plans, node) and \
                            _removable_alone(module, node, deletable):
                        # What the next pass offers once the block is written (the call
                        # then follows a runner's block): reported now, so that the fix
                        # of every pass is on the violation it removes.
                        fix = FixInfo(Applicability.UNSAFE, self.fix_title,
                                      "removing it changes when memory is freed within the "
                                      "test")
                    elif plan is None and fix.applicability is Applicability.NONE and (
                            keeping := _kept_in_block(plans, node)) is not None:
                        fix = _next_pass_fix(module, func, node, keeping, deletable,
                                             self.fix_title) or fix
                elif after_other is not None:
                    fix = FixInfo.none(self.fix_title, after_other)
                elif _removable_alone(module, node, deletable):
                    fix = FixInfo(Applicability.UNSAFE, self.fix_title,
                                  "removing it changes when memory is freed within the test")
                else:
                    fix = FixInfo.none(self.fix_title, "not a statement of its own")
                yield hit_at(node, self.message.format(what=what), fix, plan)


def _shutdown_helper_call(module: ModuleAnalysis, func: FunctionInfo, call: ast.Call,
                          engines: set[str]) -> tuple[str, list[str], str] | None:
    """For a call of a shutdown helper (:meth:`ModuleAnalysis.shutdown_helper_call`) in
    ``func`` that hands it, where it shuts its parameter down, an engine of ``engines``
    (names bound to engines, runners and their strong aliases), an attribute of one
    (``runner.llm``) or a weak proxy of one (``llm = weakref.proxy(runner.llm)``, as the
    runner's block binds it): ``(the cleanup as reported, the other values the call gives
    it, what the helper does beyond cleanup)``; else ``None``."""
    found = module.shutdown_helper_call(call)
    if found is None:
        return None
    spelled, index, where = found
    if index >= len(call.args) or any(isinstance(a, ast.Starred) for a in call.args[:index]):
        return None
    name = head_name(call.args[index])
    if name is None or name not in engines and name not in _weak_proxies(module, func, engines):
        return None
    defined = f" ({where})" if where.startswith("line ") else f", defined in {where},"
    others = [ast.unparse(a) for i, a in enumerate([*call.args, *(k.value for k in
                                                                 call.keywords)])
              if i != index]
    return f"{spelled}()", others, (
        f"`{spelled}()`{defined} shuts down the engine it is given, and its body holds more "
        "than the cleanup the runner's teardown does")


def _left_after_block(plans: list[WrapPlan | FixInfo], node: ast.stmt) -> bool:
    """True when ``node``, a cleanup call, follows the block of one of ``plans`` (an
    engine's runner block, not a process isolation's) that leaves it where it is."""
    return isinstance(node, ast.Expr) and any(
        isinstance(p, WrapPlan) and not isinstance(p, IsolatePlan) and p.end_line < node.lineno
        and node.lineno not in p.remove_lines for p in plans)


def _kept_in_block(plans: list[WrapPlan | FixInfo], node: ast.stmt) -> WrapPlan | None:
    """The plan among ``plans`` (an engine's or a bare runner's block, not a process
    isolation's) whose with-block holds ``node``, a cleanup statement it keeps, or
    ``None``."""
    return next((p for p in plans if isinstance(p, WrapPlan) and not isinstance(
        p, IsolatePlan) and p.site_line < node.lineno <= p.end_line
        and node.lineno not in p.remove_lines), None)


def _next_pass_fix(module: ModuleAnalysis, func: FunctionInfo, node: ast.stmt,
                   keeping: WrapPlan, deletable: set[str], title: str) -> FixInfo | None:
    """The fix the next pass offers for ``node``, a cleanup statement that the rewrite of
    ``keeping`` keeps inside its block, once that block is written (reported now, so that
    the fix of every pass is on the violation it removes), or ``None`` where it offers
    none: a process-wide cleanup call (``gc.collect()``, ``torch.cuda.empty_cache()``: no
    argument, no local name) in a function that then uses the runner goes as an unsafe fix
    (:func:`_removable_alone`); ``del m`` of a bare runner the block then binds to ``m``
    goes as the runner's own block allows (:func:`_del_in_own_block_fix`), as safe as the
    rewrite that must come first. A ``del`` of an engine's name stays (the block binds
    that name to a proxy)."""
    if isinstance(node, ast.Expr):
        call = node.value
        if not (isinstance(call, ast.Call) and not call.args and not call.keywords
                and module.cleanup_call_kind(call) not in (None, "engine_core.shutdown()")
                and not names_in(call.func) & local_names(module, func)) or \
                not _removable_alone(module, node, deletable):
            return None  # an engine's own shutdown stays in the block, on its proxy
        return FixInfo(Applicability.UNSAFE, title,
                       "removing it changes when memory is freed within the test")
    if not (isinstance(node, ast.Delete) and keeping.kind is PlanKind.RUNNER
            and keeping.bound_name is not None and all(
                isinstance(t, ast.Name) and t.id == keeping.bound_name
                for t in node.targets)):
        return None
    site = next((s for s in module.nodes_of(func) if isinstance(s, ast.stmt)
                 and s.lineno == keeping.site_line and statement_block(module, s)
                 is not None), None)
    if site is None:
        return None
    own = _del_in_own_block_fix(module, func, node, module.parent(site), title)
    if own.applicability is not Applicability.SAFE:
        return None
    return own if keeping.applicability is Applicability.SAFE else FixInfo(
        Applicability.UNSAFE, title, keeping.reason)


def _shutdown_call_kept(module: ModuleAnalysis, node: ast.stmt, deletable: set[str],
                        others: list[str]) -> str | None:
    """Why no fix removes ``node``, a shutdown helper's call (:func:`_shutdown_helper_call`),
    even as an unsafe one: it gives the helper ``others`` beside the engine, which the rest
    of the helper may change (``shutdown_and_reset(llm, state)``: the test may read
    ``state``), or it is no statement of its own; else ``None``."""
    if others:
        given = ", ".join(f"`{o}`" for o in others)
        return f"the call also gives it {given}, which the rest of its body may change"
    if not _removable_alone(module, node, deletable):
        return "the call shares its line or is no statement of its own"
    return None


def _weak_proxies(module: ModuleAnalysis, func: FunctionInfo, engines: set[str]) -> set[str]:
    """The names ``func`` binds to ``weakref.proxy(x)`` of an engine of ``engines`` or an
    attribute of one (``llm = weakref.proxy(runner.llm)``)."""
    return {t.id for n in module.nodes_of(func)
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and module.qualified(n.value.func) == "weakref.proxy" and len(n.value.args) == 1
            and head_name(n.value.args[0]) in engines
            for t in n.targets if isinstance(t, ast.Name)}


def _removed_between_uses(module: ModuleAnalysis, func: FunctionInfo, node: ast.stmt,
                          plans: list[WrapPlan | FixInfo], title: str, received: bool
                          ) -> tuple[WrapPlan | FactoryPlan, FixInfo] | None:
    """The plan (and its fix) that deletes ``node``, a cleanup call of ``func`` before a later
    use of the engine (such a call is not reported unless the rewrite deletes it), or
    ``None`` when no plan deletes it (one that keeps it, as the isolate strategy's kept
    cleanup, does not)."""
    if not plans and not received:
        return None
    plan, fix = _covering_fix(module, func, node, plans, title, received)
    if plan is None or isinstance(plan, IsolatePlan) and node.lineno in plan.kept_lines:
        return None
    return plan, fix


def _covering_fix(module: ModuleAnalysis, func: FunctionInfo, node: ast.stmt,
                  plans: list[WrapPlan | FixInfo], title: str, received: bool = False
                  ) -> tuple[WrapPlan | FactoryPlan | None, FixInfo]:
    """:func:`covering_fix` for the cleanup statement ``node`` of ``func``, or for the first
    statement around it that a plan removes (``if llm is not None: del llm``); with
    ``received`` (``func`` gets an engine from a factory helper of the module) the factory
    unit's fix (:func:`factory_fix`) where no plan of ``func`` covers it."""

    def cover(line: int) -> tuple[WrapPlan | FactoryPlan | None, FixInfo]:
        found: tuple[WrapPlan | FactoryPlan | None, FixInfo] = covering_fix(plans, line, title)
        if found[0] is None and received:
            unit = factory_fix(module, func, line, title)
            if unit[0] is not None or not plans:
                return unit
        return found

    found = cover(node.lineno)
    current = module.parent(node)
    while found[0] is None and isinstance(current, ast.stmt) and current is not func.node:
        around = cover(current.lineno)
        if around[0] is not None:
            return around
        current = module.parent(current)
    return found


def _release_idioms(module: ModuleAnalysis, func: FunctionInfo, deletable: set[str]
                    ) -> tuple[dict[int, str], set[int]]:
    """The proxy-then-delete idioms of ``func`` (``llm = weakref.proxy(llm); del llm``,
    also in a ``try`` whose handlers only swallow ``UnboundLocalError``): the ids of their
    first statements (the assignment, or the ``try``) with what the report names, and the
    ids of the statements nested in them, which are not reported on their own."""
    planner = planner_for(module)
    first: dict[int, str] = {}
    nested: set[int] = set()
    for node in module.nodes_of(func):
        if id(node) in nested or not isinstance(node, (ast.Assign, ast.Try)):
            continue
        idiom = planner.release_idiom(node, deletable)
        if idiom is None:
            continue
        body = node.body if isinstance(node, ast.Try) else idiom
        first[id(node)] = "; ".join(ast.get_source_segment(module.text, s) or "" for s in body)
        for stmt in idiom:
            nested.update(id(n) for n in walk_breadth(stmt) if n is not node)
    return first, nested


def _engine_shutdown(call: ast.Call, engines: set[str]) -> str | None:
    """``llm.shutdown()`` of a name in ``engines`` (the engine's own shutdown), else
    ``None``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "shutdown" and \
            isinstance(func.value, ast.Name) and func.value.id in engines and not call.args:
        return f"{func.value.id}.shutdown()"
    return None


def _xunit_engines(module: ModuleAnalysis, setup: FunctionInfo) -> dict[str, tuple[str, int]]:
    """The engines an xunit setup stores where its teardown reaches them, by the attribute
    or global name: ``{"llm": ("cls.llm", 12)}`` for ``cls.llm = LLM(...)`` on line 12 of
    ``setup_class(cls)``; ``{"llm": ("llm", 10)}`` for ``global llm; llm = LLM(...)`` in
    ``setup_module()``. An engine is a construction or a factory helper's result (or the
    one at its place in a tuple helper's: ``cls.llm, cls.params = build_pair()``)."""
    # A class's set-up stores on its first parameter; a module's on the module object it
    # may take (``setup_module(module)``: ``module.llm``) or in a global it declares.
    receiver = setup.params[0] if setup.params else None
    declared = {name for n in module.nodes_of(setup) if isinstance(n, ast.Global)
                for name in n.names}
    found: dict[str, tuple[str, int]] = {}
    for node in module.nodes_of(setup):
        if not isinstance(node, ast.Assign):
            continue
        targets: list[ast.expr] = []
        if module.builds_engine(node.value) or module.factory_called(node.value):
            targets = node.targets
        elif (packed := module.tuple_helper_of(node.value)) is not None:
            # ``cls.llm, cls.params = build_pair()``: the engine at the helper's place
            targets = [t.elts[packed[1]] for t in node.targets
                       if isinstance(t, ast.Tuple) and packed[1] < len(t.elts)]
        for target in targets:
            if receiver is not None and isinstance(target, ast.Attribute) and \
                    isinstance(target.value, ast.Name) and target.value.id == receiver:
                found.setdefault(target.attr, (f"{receiver}.{target.attr}", node.lineno))
            elif isinstance(target, ast.Name) and target.id in declared:
                found.setdefault(target.id, (target.id, node.lineno))
    return found


def _xunit_cleanup(module: ModuleAnalysis, node: ast.AST, receiver: str | None,
                   stored: dict[str, tuple[str, int]]) -> str | None:
    """What ``node``, a statement of an xunit teardown, does by hand to the engines
    ``stored`` (:func:`_xunit_engines`): ``del cls.llm``, ``cls.llm.shutdown()``, a cleanup
    call (``gc.collect()``, ``engine_core.shutdown()`` ...); else ``None``."""

    def held(target: ast.expr) -> str | None:
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                receiver is not None and target.value.id == receiver and \
                target.attr in stored and "." in stored[target.attr][0]:
            return f"{receiver}.{target.attr}"
        if isinstance(target, ast.Name) and target.id in stored and \
                stored[target.id][0] == target.id:  # a global
            return target.id
        return None

    if isinstance(node, ast.Delete):
        targets = [name for t in node.targets if (name := held(t)) is not None]
        return f"del {', '.join(targets)}" if targets else None
    if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Call):
        return None
    call = node.value
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("shutdown", "close") and \
            (name := held(call.func.value)) is not None:
        return f"{name}.{call.func.attr}()"
    return module.cleanup_call_kind(call)


def _removal(hit: Hit) -> Hit:
    """``hit`` with its fix, if it has one, carrying the deletion of its statement. Where an
    engine's rewrite deletes the statement too (:attr:`Hit.depends_on`), that rewrite runs
    first and the deletion is not needed; it runs only when the rewrite changed nothing."""
    fix = hit.fix
    if fix is None or not fix.available:
        return hit
    return replace(hit, fix=replace(fix, kind=FixKind.REMOVE_MANUAL_CLEANUP,
                                    plan=CleanupPlan(hit.node_line)))


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
Position = tuple[int, int]


def _engine_holders(module: ModuleAnalysis, func: FunctionInfo, deletable: set[str]) -> set[str]:
    """Names in ``func`` that hold its engine: engines, runners and their aliases
    (``deletable``), the engine fixtures it receives, and names bound to one of these, to
    an attribute of one (``runner.llm``) or to a ``weakref.proxy`` of one."""
    held = set(deletable) | {p for p in func.params if p in module.engine_fixtures
                             or p == RUNNER_FACTORY_FIXTURE}
    assigns = [n for n in module.nodes_of(func) if isinstance(n, ast.Assign)
               and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
    for _ in range(2):
        for node in assigns:
            value: ast.AST = node.value
            if isinstance(value, ast.Call) and module.qualified(value.func) == \
                    "weakref.proxy" and value.args:
                value = value.args[0]
            while isinstance(value, ast.Attribute):
                value = value.value
            if isinstance(value, ast.Name) and value.id in held:
                held.add(node.targets[0].id)  # type: ignore[attr-defined]
    return held


def _engine_used_later(module: ModuleAnalysis, func: FunctionInfo, stmt: ast.stmt,
                       held: set[str]) -> bool:
    """True when a cleanup call ``stmt`` is not the teardown of ``func``'s engine (GPU004
    is cleanup after the engine's last use): it comes before a later use of the
    engine, or before any engine is held at all (no name of ``held`` before it, no engine
    fixture parameter). Later means in the order the code runs: the rest of the enclosing
    loop, the loop again from its start, then what follows it; a name of ``held`` read
    before it is bound again or deleted is a later use, except in a statement that only
    cleans the engine up (its ``shutdown()`` in a ``finally``: :func:`ends_engine`, or
    what GPU004 itself reports). In a fixture, everything after a ``yield`` is
    teardown."""
    start: Position = (stmt.lineno, stmt.col_offset)
    end: Position = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
    nodes = module.nodes_of(func)
    if func.kind is FunctionKind.FIXTURE and any(
            isinstance(n, (ast.Yield, ast.YieldFrom)) and (n.lineno, n.col_offset) < start
            for n in nodes):
        return False
    loop: ast.AST | None = None
    current = module.parent(stmt)
    while current is not None and current is not func.node:
        if isinstance(current, _LOOPS):
            loop = current
        current = module.parent(current)
    skipped = {id(n) for n in walk_breadth(loop.iter)} if isinstance(
        loop, (ast.For, ast.AsyncFor)) else set()
    # The engine's own shutdown (``llm.shutdown()`` in the ``finally``) is its cleanup, not
    # a use: a cleanup call before it is still after the engine's last use.
    planner = planner_for(module)
    skipped |= {id(n) for s in nodes if isinstance(s, ast.Expr) and s is not stmt and (
        ends_engine(module, s.value, held) or planner.is_cleanup_statement(s, held))
        for n in walk_breadth(s)}
    # ``del helper.llm`` of a helper class's instance is cleanup too, not a use.
    instances = module.function_bindings(func).instances
    if instances:
        skipped |= {id(n) for s in nodes if isinstance(s, ast.Delete) and s is not stmt
                    and _instance_attributes(s, instances) for n in walk_breadth(s)}
    events = sorted(((n.lineno, n.col_offset), n) for n in nodes
                    if isinstance(n, ast.Name) and n.id in held and id(n) not in skipped)
    if loop is None:
        order = [n for pos, n in events if pos >= end]
    else:
        first: Position = (loop.lineno, loop.col_offset)  # type: ignore[attr-defined]
        last: Position = (loop.end_lineno or 0, loop.end_col_offset or 0)  # type: ignore
        order = ([n for pos, n in events if end <= pos <= last]
                 + [n for pos, n in events if first <= pos < start]
                 + [n for pos, n in events if pos > last])
    built = [site.call for site in module.engines if site.function is func]
    built += [call.call for call in module.runner_calls if call.function is func]
    if loop is None and not held & set(func.params) and not any(
            pos < start for pos, _ in events) and not any(
            (node.lineno, node.col_offset) < start for node in built):
        return True  # before the engine exists: not its teardown either
    decided: set[str] = set()
    for name in order:
        if name.id in decided:
            continue
        if isinstance(name.ctx, ast.Load):
            return True
        decided.add(name.id)  # bound again or deleted: a new engine, or none
    return False


def _instance_attributes(node: ast.Delete, instances: dict[str, ImportedHelper]
                         ) -> list[str]:
    """The targets of ``node`` that are an engine attribute of a helper class's instance
    (``del helper.llm``), as written; empty when it deletes anything else."""
    found = [f"{t.value.id}.{t.attr}" for t in node.targets if isinstance(t, ast.Attribute)
             and isinstance(t.value, ast.Name) and t.value.id in instances
             and t.attr in instances[t.value.id].attributes]
    return found if len(found) == len(node.targets) else []


def _own_with_targets(module: ModuleAnalysis, func: FunctionInfo,
                      node: ast.stmt) -> ast.With | ast.AsyncWith | None:
    """For ``del m`` inside ``with vllm_runner(...) as m:`` (or ``VllmRunner``), the
    outermost such with-statement around it whose targets are all the ``del`` deletes;
    ``None`` for anything else."""
    if not isinstance(node, ast.Delete) or not all(
            isinstance(t, ast.Name) for t in node.targets):
        return None
    wanted = {t.id for t in node.targets}  # type: ignore[attr-defined]
    found: set[str] = set()
    outer: ast.With | ast.AsyncWith | None = None
    current = module.parent(node)
    while current is not None and current is not func.node:
        if isinstance(current, (ast.With, ast.AsyncWith)):
            for item in current.items:
                if isinstance(item.optional_vars, ast.Name) and \
                        item.optional_vars.id in wanted and \
                        module.is_runner_call(item.context_expr):
                    found.add(item.optional_vars.id)
                    outer = current
        current = module.parent(current)
    return outer if found == wanted else None


def _del_in_own_block_fix(module: ModuleAnalysis, func: FunctionInfo, node: ast.stmt,
                          block: ast.AST | None, title: str) -> FixInfo:
    """The fix of ``del m`` inside the runner's own with-block (``block``; or the statement
    whose body the block is to be written in): removing it is safe (the with-statement
    keeps the runner alive until its ``__exit__`` anyway) when nothing reads, binds or
    deletes ``m`` after it, no closure captures ``m``, and the ``del`` is a statement of
    its own, not in a loop inside the block; otherwise there is no fix."""
    targets = {t.id for t in node.targets}  # type: ignore[attr-defined]
    end: Position = (node.end_lineno or node.lineno, node.end_col_offset or 0)
    current = module.parent(node)
    while current is not None and current is not block:
        if isinstance(current, _LOOPS):
            return FixInfo.none(title, "the `del` is in a loop inside the with-block: a later "
                                   "iteration would fail on the deleted name")
        current = module.parent(current)
    for sub in walk_breadth(func.node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and \
                sub is not func.node and names_in(sub) & targets:
            return FixInfo.none(title, "a closure captures the runner's name")
        if isinstance(sub, ast.Name) and sub.id in targets and \
                (sub.lineno, sub.col_offset) >= end:
            again = "bound" if isinstance(sub.ctx, ast.Store) else \
                "deleted" if isinstance(sub.ctx, ast.Del) else "read"
            return FixInfo.none(title, f"`{sub.id}` is {again} again after the `del` (line "
                                   f"{sub.lineno})")
    if not _removable_alone(module, node, targets):
        return FixInfo.none(title, "not a statement of its own")
    return FixInfo(Applicability.SAFE, title)


def _after_other_finally_statement(module: ModuleAnalysis, node: ast.stmt,
                                   deletable: set[str], stored: set[str] | None = None
                                   ) -> str | None:
    """The reason a process-wide cleanup call (``gc.collect()``, ``empty_cache()``) of a
    ``finally`` stays, when an earlier statement of that ``finally`` is not the engine's
    cleanup (``reset_config()``, restoring a variable; the reason names the nearest such
    statement): the call also frees what that statement released, after the engine's
    teardown. The wrap plan keeps such a call where
    it is (only the cleanup that opens a ``finally`` goes with the rewrite), so the reason is
    the same before and after ``--fix``; ``None`` for any other statement. The cleanup of an
    engine a fixture stores on an attribute (``stored``: ``del request.cls.llm``) is the
    engine's."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)) or \
            names_in(node) & deletable:
        return None
    trying = module.parent(node)
    if not isinstance(trying, ast.Try) or not any(s is node for s in trying.finalbody):
        return None
    planner = planner_for(module)
    before = trying.finalbody[:next(i for i, s in enumerate(trying.finalbody) if s is node)]
    for earlier in reversed(before):
        if not planner.is_cleanup_statement(earlier, deletable) and \
                not any(cleans(module, earlier, on) for on in stored or ()):
            spelled = ast.get_source_segment(module.text, earlier) or ast.unparse(earlier)
            first = spelled.splitlines()[0].rstrip(":")
            return (f"it runs after `{first}` in the `finally`, which is not the engine's "
                    "cleanup: it also frees what that statement released, so removing it "
                    "changes when memory is freed")
    return None


def _removable_alone(module: ModuleAnalysis, node: ast.stmt, deletable: set[str]) -> bool:
    """True when the cleanup statement can be deleted by itself: a statement of a block, alone
    on its line, and (for ``del``) deleting nothing but engines, runners and their aliases."""
    planner = planner_for(module)
    if statement_block(module, node) is None or planner.shares_line(node) or \
            planner.on_header_line(node):
        return False
    return not isinstance(node, ast.Delete) or all(
        isinstance(t, ast.Name) and t.id in deletable for t in node.targets)

"""GPU001 engine-outside-runner: an engine built by hand instead of by the runner."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import (
    NESTED_SCOPES,
    EngineSite,
    ModuleAnalysis,
    is_isolated,
)
from lint_gpu_tests.fixplan.classes import ClassPlan, owner_class_of
from lint_gpu_tests.fixplan.factories import FactoryPlan, factory_title, factory_unit_of
from lint_gpu_tests.fixplan.factory_fixtures import conftest_fixture_of, fixture_unit_of
from lint_gpu_tests.fixplan.isolate import strategy_plan
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.xunit import XunitPlan, xunit_plan_of
from lint_gpu_tests.ftypes import CONFTEST_FACTORY, FixInfo, FixKind
from lint_gpu_tests.parsing.source import walk_nodes
from lint_gpu_tests.parsing.syntax import dotted_name, is_main_guard, is_raises_with, last_name
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import hit_at, imported_helper_reason


class EngineOutsideRunner(Rule):
    """Flags ``vllm.LLM(...)`` built in a test module outside the runner."""

    code = "GPU001"
    name = "engine-outside-runner"
    summary = "An engine built by hand instead of by the runner's with-statement"
    message = "Engine `{engine}(...)` built outside `with {runner}(...)`"
    fix_title = "Wrap in `with vllm_runner(...)`"
    fix_kinds = (FixKind.WRAP_ENGINE_IN_RUNNER, FixKind.ISOLATE_TEST_PROCESS,
                 FixKind.ENGINE_OWNER_CONTEXT_MANAGER, FixKind.FACTORY_CONTEXT_MANAGER,
                 FixKind.XUNIT_ENGINE_STACK)
    what_it_does = (
        "Checks for engines (`vllm.LLM` however imported, or the classes in "
        "`engine-classes`) constructed in a test, fixture, helper function, helper class or "
        "at module level of a test module, instead of through the runner's with-statement. "
        "A call, in a test, fixture, helper function or method or at module level, of a "
        "factory helper of another "
        "module of the tree that no rule looks at (not a test module, not a conftest.py, "
        "not under `test-roots`, defining no tests or fixtures: a `tests/utils.py` whose "
        "`make_llm()` returns `LLM(...)`) builds an engine as `LLM(...)` does and is "
        "reported at the call (`make_llm(...)`), with the same exemptions, and unless it is "
        "a `with` statement's context expression; a conftest's helper is reported in the "
        "conftest instead. "
        "Names resolve per scope, as in pyflakes: a parameter, local, class attribute or "
        "comprehension variable named like the engine class is not the engine, a local "
        "alias (`Engine = LLM`) is. A function that runs as its own process is skipped: "
        "a function of a module named like a test module that defines no test, `Test*` "
        "class, fixture or xunit function, runs as a script (`if __name__ == "
        "\"__main__\":`) and is imported by no module of its tree (its engines are built "
        "when it runs as a script, never in pytest's process; what its top level builds is "
        "reported), or "
        "decorated with one of `isolation-decorators` (a test also when pytest-forked's "
        "`@pytest.mark.forked` marks it, its class or the module's `pytestmark`), or the "
        "target of one of "
        "`process-launchers` (`multiprocessing.Process(target=f)`, `ctx.Process(target=f)`, "
        "`torch.multiprocessing.spawn(f, ...)`, `ProcessPoolExecutor().submit(f, ...)`), "
        "or handed to a launcher helper, a module-level function of the module or of "
        "another module of the tree that hands one of its parameters to such a call "
        "(`run_in_child(target, ...)`, found by itself: `process-launchers` need not name "
        "it)."
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
        "deletes the manual cleanup (GPU003, GPU004) and adds the `vllm_runner` parameter; "
        "cleanup between two uses of the engine (a shutdown before a use that must then "
        "fail), which GPU004 does not report, stays inside the block, on the proxy. A clock "
        "read (`time.time()`, `time.perf_counter()`, ...) after the last use and before the "
        "cleanup by hand stays inside the block too, so the time it measures leaves out the "
        "runner's teardown, as it left out the cleanup. A construction that is the whole "
        "body of a `try` whose handlers all leave (`except Exception as e: pytest.skip(...)`, "
        "`raise`, `return`, `continue`) stays there as `runner = vllm_runner(...)`, and "
        "`with runner:` right after the `try` holds the live range: the runner builds its "
        "engine when called and its `__enter__` only returns it, so the `try` guards the "
        "same build (GPU005 does not report a runner entered so). Helpers, which cannot request "
        "fixtures, use the runner class; with "
        "`target = \"vllm\"`, whose runner class lives in vLLM's tests/conftest.py, a helper "
        "instead gets `vllm_runner` as its first parameter and every call of it passes the "
        "fixture, which the calling test or fixture requests (unsafe for a public helper of a "
        "test module; no fix when a call is at module level or in another helper, or the "
        "helper is used other than by a call). Callers in other modules are never given "
        "the fixture with such a helper: a helper called only from other modules, or "
        "public outside a test module, has no fix, saying so (a factory helper, below, "
        "is the exception). Keyword arguments are "
        "kept in their order, with their comments: the bundled runner takes `model=` and "
        "`tokenizer=` as written; with `target = \"vllm\"` `model=` becomes the first argument "
        "(`model_name=` where it is not the first keyword), `tokenizer=` becomes "
        "`tokenizer_name=` and every default in which vLLM's runner differs from `LLM` is "
        "spelled out, so the engine is configured exactly as before (a falsy "
        "`compilation_config` such as `0` becomes `CompilationConfig(mode=0)`). Arguments "
        "that come in a mapping, model included (`LLM(**llm_kwargs)`, "
        "`LLM(**MODEL_CONFIGS[name])`), pass through unchanged to the bundled runner, which "
        "takes `model=`; with `target = \"vllm\"` the mapping goes through a "
        "`_runner_kwargs(mapping, <defaults>)` helper the fix adds to the module once (the "
        "model to `model_name`, the tokenizer to `tokenizer_name`, each differing default "
        "only for keys the mapping lacks): safe when the module shows every mapping it can be "
        "(a dict, a module constant or an entry of one, `parametrize` values), unsafe when it "
        "is only known at run time. There is no fix for a keyword the runner takes and "
        "`LLM` does not (`tokenizer_name=`, `model_name=`: `LLM` raises `TypeError`, the "
        "runner would build the engine), nor for `*args` that may hold more than the model "
        "(the runner takes only the model by position). An engine "
        "the fixture already hands out as `weakref.proxy(llm)` is not wrapped twice. The "
        "block covers every value that can reach the engine: aliases, containers, tuples, "
        "lazy generators, `functools.partial`, bound methods and closures, up to their last "
        "use. The fix is unsafe when the engine escapes the block (passed to a thread, "
        "captured by a closure, compared by identity: `is`, `id()`, `type()` or a test "
        "against `weakref.ProxyType`, a value holding it passed to a call the "
        "analysis does not follow; `isinstance(llm, LLM)` is no identity check, a proxy "
        "forwards `__class__`), when a cleanup the fix removes does more than the runner's "
        "teardown (`cleanup_dist_env_and_memory(shutdown_ray=True)`, or one in a `try` whose "
        "`except` may raise: the runner only warns when its cleanup fails), "
        "when `compilation_config` is only known at run time, or "
        "when it lives in a fixture whose scope is not a literal, or wider than a function's "
        "with `target = \"vllm\"` (vLLM's `vllm_runner` fixture must allow that scope). A "
        "class-, module-, package- or session-scoped fixture, which cannot request the "
        "function-scoped `vllm_runner`, enters the runner class itself (`with VllmRunner(...) "
        "as runner: yield weakref.proxy(runner.llm)`, `VllmRunner` imported from "
        "`lint_gpu_tests.runtime`): the engine lives as long as the fixture's scope, as "
        "before, and is shut down at the fixture's teardown, so that fix is safe when nothing "
        "else changes (`yield llm` and `del llm`, `return llm` with `request.addfinalizer`, or "
        "`return LLM(...)` alike). An engine an xunit set-up of a class builds and stores "
        "on the class or instance (`cls.llm = LLM(...)` in `setup_class`, `setUpClass`, "
        "`setup_method` or `setUp`), which the paired teardown cleans up by hand, is handed "
        "to the runner class there: the set-up opens `cls._engine_stack = "
        "contextlib.ExitStack()` and binds `cls.llm = weakref.proxy(cls._engine_stack"
        ".enter_context(VllmRunner(...)).llm)`, and the teardown's cleanup run becomes "
        "`cls._engine_stack.close()`, so the engine lives exactly as long as before (a "
        "class without that teardown, whose engine lived until the session ended, gets one "
        "after the set-up, unless it has a base whose teardown the new one could replace); "
        "safe "
        "unless the class compares the attribute by identity or hands it on (a proxy now), "
        "no fix when the set-up builds several engines or not as a statement of its own, the "
        "class rebinds the attribute, or the teardown's cleanup is not one run of statements "
        "(or reads the attribute after it). A module's set-up (`setup_module`, "
        "`setUpModule`, `setup_function`) storing the engine in a global it declares (or "
        "on the module object it takes, `module.llm`) is "
        "fixed the same way, on a global stack (`global llm, _engine_stack`; "
        "`_engine_stack.close()` in the teardown, which a module without one gets). An "
        "xunit set-up that gets its engine from a factory helper (`cls.llm = "
        "build_engine()`) is one caller of the helper's unit: it enters the call on the "
        "stack (`cls.llm = cls._engine_stack.enter_context(build_engine())`). A generator "
        "fixture that stores its engine on an attribute (`request.cls.llm`, "
        "`request.module.engine`, `request.instance.llm`, or `self.llm` in a fixture "
        "method) and cleans it up after its `yield` gets a with-block from the store "
        "through the `yield`, the attribute bound to the engine's proxy (`request.cls.llm = "
        "weakref.proxy(runner.llm)`), its cleanup run removed so that the runner's "
        "teardown runs where it began; a factory helper's engine stored so is one caller of "
        "the helper's unit (`with build_engine() as engine: request.cls.llm = engine`). "
        "There is no fix when it is "
        "returned, stored on `self` (helper classes, xunit set-ups and fixtures aside), in a "
        "parameter's container or "
        "a global (xunit set-ups aside), or used outside "
        "the block that builds it, and none for an engine class the runner does not build "
        "(`vllm_runner` builds `vllm.LLM` only; a project's own runner fixture is taken to build "
        "its classes outside `vllm`, not `AsyncLLM`). Where the project's own "
        "`vllm_runner` fixture hands out a runner whose `__init__` takes the model first "
        "under another name (`model_name`) and the call gives it by keyword or in a "
        "`**mapping` (the runner's call would raise `TypeError`), the fix enters the bundled "
        "`VllmRunner` class, which takes `LLM`'s arguments: unsafe, its teardown is not the "
        "project's runner's. A function that returns a value read "
        "from its engine (`return llm.llm_engine.vllm_config.scheduler_config.max_num_seqs`, "
        "`return [o.outputs[0].text for o in outputs]`) gets a block that takes in the "
        "`return`: the value is computed while the engine is alive, the block's exit shuts "
        "the engine down, then the function returns. That is safe when the value is plain "
        "data that cannot hold the engine (a literal, a comparison, `not`, arithmetic or an "
        "f-string of such values, `len()`, `str()`, `int()`, `float()`, `bool()`, `repr()`, "
        "a scalar field of a `*_config` such as `max_num_seqs`, a completion's `text`, "
        "`finish_reason`, `stop_reason` or `cumulative_logprob`, a name bound once to such a "
        "value, a container, list/set/dict comprehension or conditional of them) and unsafe "
        "otherwise, as the caller may get a value whose engine is shut down (the construction "
        "in the `return` statement itself has no fix). An engine built in a `with` (an "
        "`ExitStack` that enters `pytest.raises(...)` when the configuration is unsupported, a "
        "`pytest.raises`) gets its runner block inside that `with`, so a construction that "
        "raises still reaches `pytest.raises`; the cleanup right after that `with` (`del llm`, "
        "the proxy-then-delete idiom guarded by `except UnboundLocalError`, generic cleanup) "
        "goes with the rewrite. An engine built in a `try` (directly, or in such a `with` "
        "that is no runner) whose `finally` opens with its cleanup and then does other work "
        "loses that cleanup (`del llm`, `if llm is not None: del llm`, generic cleanup, up "
        "to the first other statement), and the `llm = None` that binds the name before the "
        "`try` for that `finally` goes too; the rest of the `finally` stays, and runs "
        "after the runner's teardown. A `try` the rewrite leaves with nothing to guard (its "
        "body was only cleanup, such as `cleanup_dist_env_and_memory()` whose errors an "
        "`except` swallows; no `finally`) goes with that cleanup, and a `try/finally` "
        "without `except` whose `finally` it empties gives way to its body. A construction "
        "statement that is the "
        "whole body of a `with` joins its header (`with a, vllm_runner(...):`, ruff's SIM117), "
        "in parentheses when too long for one line, except where the project declares a "
        "Python older than 3.9.\n\n"
        "A helper class that owns an engine (`self.llm = LLM(...)` in "
        "`__init__` or in a method it calls, or `self.llm = self._build_llm(config)` in "
        "`__init__` with the method returning `LLM(...)`: it then keeps the runner and "
        "returns the proxy) becomes a context manager: the engine is still "
        "built where it was, by `VllmRunner`, `self.llm` becomes `weakref.proxy` of the "
        "runner's engine, `__enter__`/`__exit__` enter and exit the runner, the methods that "
        "only clean up are deleted, and each `tester = Tester(...)` of the module becomes "
        "`with Tester(...) as tester:` over its live range. That fix is unsafe (the class's "
        "contract changes, and only this module's instances are entered); it has none when "
        "a method uses `self.llm` itself, an instance is not built as `name = Tester(...)` "
        "in a function (the reason names it), the class has bases or is not instantiated in "
        "the module. With `target = \"vllm\"` the class holds vLLM's own runner class, "
        "imported as vLLM's tests import it (`from tests.conftest import VllmRunner`), its "
        "differing defaults spelled out; no fix when the project's tests/conftest.py is "
        "missing or does not define `VllmRunner`, or the engine's arguments come in a "
        "mapping.\n\n"
        "Engines alive together in a list or dict the test builds "
        "(a comprehension, or a loop appending to it) get one `with contextlib.ExitStack() "
        "as stack:` over the container's live range, each element becoming "
        "`weakref.proxy(stack.enter_context(vllm_runner_factory(...)).llm)`: the factory "
        "fixture waits for device memory once, after the last runner exits (target `vllm`: "
        "`vllm_runner`); unsafe when an element is compared by identity. A loop over the "
        "container that only tears its engines down (`for llm in llms: llm.shutdown()`) "
        "goes with the rewrite, as the runners do it; a loop that does more stays in the "
        "block. A statement marked `# noqa: GPU004` (or a bare `# noqa`) is kept by the with-block "
        "rewrite, as an ordinary statement. A name rebound to a "
        "new engine in each iteration of a loop or in each branch of an `if` gets one "
        "with-block per binding, inside the loop body or the branch. A factory fixture (a "
        "nested `def make(...)` that builds an engine, registers its shutdown and returns "
        "it) gets an unsafe fix: the fixture's body from the `def` on goes into "
        "`with contextlib.ExitStack() as stack:`, `make` enters a runner on the stack and "
        "returns its proxy, and `return make` becomes `yield make`; the test then holds a "
        "proxy, and the engines are torn down when the fixture's stack closes. A factory "
        "fixture of a test module whose factory keeps none of its engines (`def _make(**kw): "
        "return LLM(...)`, `return _make`) is instead fixed with every call of it in the "
        "module's tests and fixtures, as one unit, as a factory helper is (below): the "
        "factory becomes a context manager over the runner class and each call "
        "(`llm = make_llm(...)`) a `with` block, the callers' cleanup removed; safe in a run "
        "over a tree in which no file imports the module, else unsafe; where a call cannot "
        "be rewritten the fixture keeps the `ExitStack` fix. A `conftest.py`'s such fixture "
        "is fixed with every call of it in the tree as one unit (a run's `--fix` or "
        "`--diff` rewrites the conftest and the modules it serves together): the calls in "
        "the tests and fixtures under the conftest's directory that pytest hands that "
        "fixture (no nearer conftest, nor the module, defines one of the name); no unit, "
        "and the `ExitStack` fix, where such a module uses the fixture other than by calls "
        "(a string request, a value handed on), is not checked by the run, or where a "
        "module outside the directory that a file of the tree imports requests a fixture "
        "of the name.\n\n"
        "A factory helper (a module-level function that builds an engine and returns it: "
        "`return LLM(...)`, or `llm = LLM(...)`, uses of its attributes, `return llm`) is "
        "fixed together with every call of it in the module, as one fix reported on the "
        "helper's GPU001 and on each GPU003/GPU004 it removes: the helper gets "
        "`@contextlib.contextmanager` (its return annotation goes) and builds the engine in "
        "`with VllmRunner(...) as runner:` (with `target = \"vllm\"`, `with vllm_runner(...)`, "
        "the fixture its first parameter, passed by every call and requested by every "
        "caller), yielding `weakref.proxy(runner.llm)`; each `llm = setup_engine(...)` "
        "becomes `with setup_engine(...) as llm:` over the engine's live range, planned as "
        "an engine the caller builds itself (cleanup and a shutdown `try/finally` go; a "
        "guarded shutdown after `llm = None` too). A helper that returns its engine in a "
        "tuple with other values (`llm = LLM(...)` ... `return llm, params`, or `return "
        "LLM(...), params`, the engine once in the tuple and no starred value) is fixed the "
        "same way: it yields the tuple with the engine's proxy in its place (`yield llm, "
        "params` after `llm = weakref.proxy(runner.llm)`), and each call that unpacks the "
        "tuple into names becomes `with setup_llm(...) as (llm, params):` (no fix for the "
        "unit when a call keeps the tuple whole or starred). The engine is built when the "
        "`with` "
        "enters, where the call was, and torn down at its last use instead of by the hand "
        "cleanup. Safe for a private helper of a test module whose every caller's block is "
        "safe, and for a public one of a test module that no module of its tree imports "
        "or names for a dynamic import (it has no other callers); unsafe for a public one "
        "that may be imported (a module that imports it would get a context manager; so "
        "for a module checked without its tree) or when a caller's block is (identity "
        "checks on the proxy, a thread, ...); "
        "no fix for a public helper outside a test module, a helper that is decorated, a "
        "generator or uses its engine other than through its attributes, or builds it on "
        "the line of its `def` (`def f(): return LLM(...)`; a function whose decorator "
        "caches what it returns, `@functools.cache`, is no factory: its engine is the "
        "cache's, reported where it is built without a fix, or at each call where its "
        "module is out of the rules' scope), and none for the "
        "whole unit when one call cannot be rewritten (returned further, stored on an "
        "attribute or global, in a comprehension, inside a larger expression, used after its "
        "block, weakly referenced, two engines of one function alive together): the reason "
        "names that call's function and line. A factory helper of another module of the "
        "tree (a `tests/utils.py`, a conftest, a sibling module, followed through imports) "
        "is fixed the same way together with every caller in the tree, as one unit across "
        "the modules: written all or not at all, shown as one diff, reported on each "
        "GPU003/GPU004 it removes and on each call's GPU001 where the helper's module is "
        "out of the rules' scope; no fix for the unit when a module the run does not check "
        "uses the helper, when it is used other than by a call, when a caller is not in a "
        "function, or with the project's own `runner`, and the reason names the module and "
        "line. With `target = \"vllm\"` the helper of such a unit, whose callers in other "
        "modules are not given the `vllm_runner` fixture, enters vLLM's runner class itself "
        "(`with VllmRunner(...) as runner:`, `VllmRunner` imported as vLLM's tests import it, "
        "`from tests.conftest import VllmRunner`), its arguments mapped and the runner's "
        "differing defaults spelled out as for every fix of that target: as safe as with "
        "the bundled runner, and no fix when the project has no tests/conftest.py defining "
        "`VllmRunner`, or when a caller passes, through the helper's `**kwargs`, a keyword "
        "whose runner default the fix spells out (the runner would get it twice). A "
        "factory method (a method of a class of the module, own or "
        "inherited from a class of the module, that builds an engine and returns it, "
        "called on `self`: `llm = self._make_llm(...)`, on a class of the module that has "
        "it: `TestLora._make_llm(self, ...)`, or on an instance of one, bound once in the "
        "function or at module level: `factory = EngineFactory(); llm = "
        "factory.create(...)`) is fixed the same way with every such call: "
        "the method becomes a context manager and each call a `with` block. "
        "Safe in a run over a tree where no file imports the module; no fix otherwise (a "
        "class of another module may inherit the method), nor when a class that inherits "
        "it defines a method of that name, the name is used other than by such a call, "
        "or for a static or class method. With `target = \"vllm\"` the method enters "
        "vLLM's `VllmRunner` from the project's tests/conftest.py, as a helper of another "
        "module does (its callers are not given the runner fixture). JSON and SARIF output "
        "show such a fix on every "
        "violation it removes, with the edits of every file (JSON: `other_files`; SARIF: one "
        "`artifactChange` per file). With `--select` (or `ignore`, `per-file-ignores`) the "
        "unit is applied as "
        "the fix of any selected violation it removes, and deletes all it must, as a "
        "with-block rewrite deletes the cleanup after the engine's last use whether GPU004 "
        "is selected or not (cleanup of a proxy after its block would fail): `--fix` and "
        "`--diff` end with a note naming the violations not selected that the fixes removed "
        "(any fix's, a single function's too), and a unit none of whose violations is "
        "selected is not applied.\n\n"

        "With `fix-strategy = \"isolate\"` (or `--fix-strategy isolate`) a test is not "
        "wrapped: it gets `@create_new_process_for_each_test(\"spawn\")` (from "
        "`lint_gpu_tests.runtime`, or `tests.utils` with `target = \"vllm\"`), its manual "
        "cleanup and finalizers are deleted and its constructions stay; the child's exit frees "
        "the engine, as vLLM migrated its cudagraph tests. A spawned child imports the module "
        "afresh and gets the test's arguments by pickle, so the fix is safe for a module-level "
        "test whose parameters are `parametrize` names with literal values, `tmp_path`, or a "
        "`request` only a removed finalizer used, and that shares no mutable module state "
        "with other functions; another fixture, `monkeypatch`, a decorator other than "
        "`pytest.mark.*`, module state changed here and read elsewhere (or the reverse), "
        "changes to `os.environ` or an engine built at import time make it unsafe. Fixtures, "
        "helpers, methods, `async` tests and tests taking `request`, `capsys`, `caplog`, "
        "`pytestconfig` or an engine fixture cannot be isolated: they get the runner fix, "
        "whose title says why. Cleanup that runs before another engine of the test is built "
        "stays. Where the runner fix has none (the engine escapes into module state, a "
        "rebinding the analysis cannot follow), the reason says whether "
        "`--fix-strategy isolate` would fix it."
    )
    options = ("engine-classes", "runner-fixture", "runner-classes", "runner-attribute",
               "isolation-decorators", "process-launchers", "target", "fix-strategy")
    references = ("vLLM tests/conftest.py: `VllmRunner` and the `vllm_runner` fixture",
                  "docs/gpu-runtime.md: memory held by hand-managed engines, measured on an H200")
    INVALID = (
        Example(
            title="An engine an xunit set-up stores on the class, cleaned up by its teardown "
                  "(fixed: the runner entered on an `ExitStack` the teardown closes)",
            source='''\
import gc

from vllm import LLM


class TestGenerate:
    @classmethod
    def setup_class(cls):
        cls.llm = LLM("facebook/opt-125m")  # error: GPU001

    @classmethod
    def teardown_class(cls):
        del cls.llm  # error: GPU004
        gc.collect()  # error: GPU004

    def test_generate(self):
        assert self.llm.generate(["a"])
''',
        ),
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
            title="A factory helper of a module no rule looks at (`tests/utils.py`): each "
                  "call of it builds the engine by hand, cleaned up or not",
            source='''\
from tests.utils import make_llm


def test_greedy():
    llm = make_llm(seed=1)  # error: GPU001
    assert llm.generate(["Hello"])
''',
            path="tests/test_greedy.py",
            modules=(("tests/__init__.py", ""), ("tests/utils.py", '''\
from vllm import LLM


def make_llm(**kwargs):
    return LLM("facebook/opt-125m", enforce_eager=True, **kwargs)
''')),
        ),
        Example(
            title="Calls of such a helper at module level and in a helper class's method "
                  "are reported too (the unit of the helper and its callers has no fix: "
                  "those callers cannot enter a `with`)",
            source='''\
from tests.utils import make_llm

SHARED = make_llm(seed=0)  # error: GPU001


class Generator:
    def __init__(self):
        self.llm = make_llm(seed=1)  # error: GPU001


def test_greedy():
    assert Generator().llm.generate(["Hello"])
    assert SHARED.generate(["Hello"])
''',
            path="tests/test_shared.py",
            modules=(("tests/__init__.py", ""), ("tests/utils.py", '''\
from vllm import LLM


def make_llm(**kwargs):
    return LLM("facebook/opt-125m", enforce_eager=True, **kwargs)
''')),
        ),
        Example(
            title="A helper returns a config value read from its engine, inside a "
                  "`try/finally` that cleans up",
            source='''\
import gc

from vllm import LLM


def _max_num_seqs(**kwargs):
    llm = LLM("facebook/opt-125m", **kwargs)  # error: GPU001
    try:  # error: GPU003
        return llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
    finally:
        del llm
        gc.collect()


def test_default_max_num_seqs():
    assert _max_num_seqs() == 256
''',
        ),
        Example(
            title="A local alias of the engine class; a class attribute does not shadow it "
                  "in the methods",
            source='''\
from vllm import LLM


def test_alias():
    Engine = LLM
    assert Engine("facebook/opt-125m").generate(["a"])  # error: GPU001


class TestGroup:
    LLM = None

    def test_method(self):
        assert LLM("facebook/opt-125m").generate(["a"])  # error: GPU001
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
            title="A helper class that owns an engine, built in a method its constructor calls "
                  "(unsafe fix: the class becomes a context manager over the runner)",
            source='''\
import gc

from vllm import LLM


class Tester:
    def __init__(self, model):
        self._build(model)

    def _build(self, model):
        self.llm = LLM(model)  # error: GPU001

    def run(self, prompts):
        return self.llm.generate(prompts)

    def close(self):
        del self.llm  # error: GPU004
        gc.collect()  # error: GPU004


def test_tester():
    tester = Tester("facebook/opt-125m")
    assert tester.run(["hi"])
    tester.close()
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
            title="A module-scoped fixture that builds the engine and frees it after its "
                  "`yield` (safe fix: the fixture enters the runner class)",
            source='''\
import gc

import pytest
from vllm import LLM


@pytest.fixture(scope="module")
def llm():
    llm = LLM("facebook/opt-125m", enforce_eager=True)  # error: GPU001
    yield llm  # error: GPU002
    del llm  # error: GPU004
    gc.collect()  # error: GPU004
''',
        ),
        Example(
            title="A helper class with `target = \"vllm\"` (unsafe fix: a context manager over "
                  "vLLM's `VllmRunner`, from the project's tests/conftest.py)",
            config=(("target", "vllm"),),
            source='''\
from vllm import LLM


class Tester:
    def __init__(self, model):
        self.llm = LLM(model)  # error: GPU001

    def run(self, prompts):
        return self.llm.generate(prompts)

    def shutdown(self):
        del self.llm  # error: GPU004


def test_tester():
    tester = Tester("facebook/opt-125m")
    assert tester.run(["hi"])
    tester.shutdown()  # error: GPU004
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
        Example(
            title="A factory helper and the tests that call it (one fix: the helper becomes a "
                  "context manager over the runner, each call a `with` block)",
            source='''\
import gc

from vllm import LLM


def _setup_engine(num_loras):
    return LLM("facebook/opt-125m", enable_lora=True, max_loras=num_loras)  # error: GPU001


def test_single_lora():
    llm = _setup_engine(1)
    try:  # error: GPU003
        assert llm.generate(["hi"])
    finally:
        llm.llm_engine.engine_core.shutdown()


def test_two_loras():
    llm = _setup_engine(2)
    assert llm.generate(["hi"])
    del llm  # error: GPU004
    gc.collect()  # error: GPU004
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
            title="A factory helper as the fix leaves it: a context manager over the runner, "
                  "called in `with` statements",
            source='''\
import contextlib
import weakref

from lint_gpu_tests.runtime import VllmRunner


@contextlib.contextmanager
def _setup_engine(num_loras):
    with VllmRunner("facebook/opt-125m", enable_lora=True, max_loras=num_loras) as runner:
        yield weakref.proxy(runner.llm)


def test_single_lora():
    with _setup_engine(1) as llm:
        assert llm.generate(["hi"])
''',
        ),
        Example(
            title="With `target = \"vllm\"`, a factory helper of another module as the fix "
                  "leaves it: a context manager over vLLM's `VllmRunner`, imported from the "
                  "project's tests/conftest.py",
            source='''\
from tests.utils import setup_engine


def test_single_lora():
    with setup_engine(1) as llm:
        assert llm.generate(["hi"])
''',
            path="tests/lora/test_lora.py",
            config=(("target", "vllm"),),
            modules=(("tests/__init__.py", ""), ("tests/conftest.py", '''\
from vllm import LLM


class VllmRunner:
    def __init__(self, model_name, **kwargs):
        self.llm = LLM(model=model_name, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        del self.llm
'''), ("tests/utils.py", '''\
import contextlib
import weakref

from vllm.config import CompilationConfig

from tests.conftest import VllmRunner


@contextlib.contextmanager
def setup_engine(num_loras):
    with VllmRunner(
        "facebook/opt-125m",
        enable_lora=True,
        max_loras=num_loras,
        trust_remote_code=False,
        max_model_len=None,
        block_size=None,
        enable_chunked_prefill=None,
        compilation_config=CompilationConfig(),
    ) as runner:
        yield weakref.proxy(runner.llm)
''')),
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
            title="A script named like a test module, from which pytest collects nothing",
            path="examples/offline_generate_test.py",
            source='''\
from vllm import LLM


def main():
    llm = LLM("facebook/opt-125m")
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
            title="Names resolve per scope: a local or a parameter named `LLM` is not vLLM's",
            source='''\
from mylib import LocalLLM
from vllm import LLM


def test_local():
    LLM = LocalLLM
    m = LLM("x")
    del m


def test_parameter(LLM):
    assert LLM("x")


def test_comprehension():
    assert [LLM for LLM in (str, int)]
''',
        ),
        Example(
            title="A function run as its own process (`process-launchers`)",
            source='''\
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import torch.multiprocessing as mp
from vllm import LLM


def generate(model):
    llm = LLM(model)
    assert llm.generate(["x"])
    del llm


def worker(rank, model):
    LLM(model).generate(["x"])


def test_in_children():
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=generate, args=("facebook/opt-125m",))
    child.start()
    child.join()
    mp.spawn(worker, args=("facebook/opt-125m",), nprocs=2)
    with ProcessPoolExecutor(1) as pool:
        pool.submit(generate, "facebook/opt-125m").result()
''',
        ),
        Example(
            title="A function handed to a launcher helper, which runs it as its own process",
            source='''\
import multiprocessing

from vllm import LLM


def run_in_child(target, *args):
    child = multiprocessing.Process(target=target, args=args)
    child.start()
    child.join()
    assert not child.exitcode


def generate(model):
    llm = LLM(model)
    assert llm.generate(["x"])


def test_in_a_child():
    run_in_child(generate, "facebook/opt-125m")
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
        Example(
            title="A module-scoped fixture over the runner class",
            source='''\
import weakref

import pytest
from lint_gpu_tests.runtime import VllmRunner


@pytest.fixture(scope="module")
def llm():
    with VllmRunner("facebook/opt-125m", enforce_eager=True) as runner:
        yield weakref.proxy(runner.llm)
''',
        ),
        Example(
            title="A helper class already migrated: a context manager over the runner",
            source='''\
import weakref

from lint_gpu_tests.runtime import VllmRunner


class Tester:
    def __init__(self, model):
        self._runner = VllmRunner(model)
        self.llm = weakref.proxy(self._runner.llm)

    def __enter__(self):
        self._runner.__enter__()
        return self

    def __exit__(self, *exc_info):
        self._runner.__exit__(*exc_info)

    def run(self, prompts):
        return self.llm.generate(prompts)


def test_tester():
    with Tester("facebook/opt-125m") as tester:
        assert tester.run(["hi"])
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        runner = module.config.runner_named
        for site in module.engines:
            if site.under_main_guard or site.in_runner_class or is_isolated(site.function):
                continue
            if site.in_raises and site.bound_name is None and isinstance(
                site.statement, ast.Expr
            ):
                continue
            fix = own_fix(module, site)
            fixture = conftest_fixture_of(module, site)  # a conftest's factory fixture's
            if fixture is not None:
                factory = site.function.name if site.function is not None else ""
                fix = FixInfo.none(self.fix_title if fix is None else fix.title, (
                    f"`{factory}()`, the factory that the fixture `{fixture}` hands out and "
                    f"keeps no engine of, is fixed {CONFTEST_FACTORY} (the fixture's tests "
                    "call it in other modules)"))
            engine = dotted_name(site.call.func) or "LLM"
            yield hit_at(site.call, self.message.format(engine=engine, runner=runner), fix)
        if module.imported_helpers:
            yield from self._helper_calls(module, runner)

    def _helper_calls(self, module: ModuleAnalysis, runner: str) -> Iterator[Hit]:
        """The calls of a factory helper of another module, one the rules do not look at
        (:attr:`~lint_gpu_tests.analysis.analysis.ImportedHelper.in_scope`: its engine gets
        no GPU001 there), made in a test, fixture, helper function or method of this module
        or at its module level: each builds an engine by hand as ``LLM(...)`` would, with the
        same exemptions. Its fix is withheld for the unit of the helper and its callers across
        the tree (:mod:`lint_gpu_tests.fixing.tree_units`), which covers it (a unit with a
        caller at module level or in a method has none, naming that caller)."""
        scopes: list[list[ast.AST]] = [walk_nodes(module.tree.body, NESTED_SCOPES)]
        for func in module.functions:
            if func.in_runner_class or is_isolated(func) or \
                    _under_main_guard(module, func.node):
                continue
            scopes.append(module.nodes_of(func))
        for nodes in scopes:
            for node in nodes:
                if not isinstance(node, ast.Call):
                    continue
                helper = module.helper_called(node)
                if helper is None or helper.kind not in ("f", "t", "k") or helper.in_scope or \
                        _entered_or_raising(module, node) or _under_main_guard(module, node):
                    continue
                spelled = dotted_name(node.func) or helper.name
                title = factory_title(module, helper.name, across=True) \
                    if helper.kind in ("f", "t") else self.fix_title
                fix = FixInfo.none(title, imported_helper_reason(helper, spelled))
                yield hit_at(node, self.message.format(engine=spelled, runner=runner), fix)


def own_fix(module: ModuleAnalysis, site: EngineSite) -> FixInfo | None:
    """The fix of GPU001 at ``site`` planned on ``module`` alone: the with-block (or the
    isolation, or the group's ``ExitStack``), else the unit it belongs to in the module (a
    helper class owning it, a factory helper or factory fixture with its callers, an xunit
    set-up closed by its teardown). A conftest's factory fixture's engine gets it only
    where the fixture's unit across the tree has no fix
    (:mod:`lint_gpu_tests.fixing.tree_units`)."""
    plan = strategy_plan(module, site)
    fix = plan.fix_info() if isinstance(plan, WrapPlan) else plan
    owner = owner_class_of(module, site)  # a helper class owning it (fixplan.classes)
    if owner is not None:
        fix = owner.plan.fix_info() if isinstance(owner.plan, ClassPlan) else owner.plan
    unit = factory_unit_of(module, site)  # a factory helper and its callers
    if unit is not None:
        fix = unit.fix_info() if isinstance(unit, FactoryPlan) else unit
    handed = fixture_unit_of(module, site)  # a factory fixture's and its callers
    if handed is not None:
        fix = handed.fix_info()
    xunit = xunit_plan_of(module, site)  # an xunit set-up's, closed by its teardown
    if xunit is not None:
        fix = xunit.fix_info() if isinstance(xunit, XunitPlan) else xunit
    return fix


def _under_main_guard(module: ModuleAnalysis, node: ast.AST) -> bool:
    """True when ``node`` lies in ``if __name__ == "__main__":``."""
    current = module.parent(node)
    while current is not None:
        if isinstance(current, ast.If) and is_main_guard(current):
            return True
        current = module.parent(current)
    return False


def _entered_or_raising(module: ModuleAnalysis, call: ast.Call) -> bool:
    """True when ``call`` is a with-item's context expression or what an
    ``ExitStack``'s ``enter_context(...)`` enters (the helper is entered: a context manager
    already), or an unbound expression statement directly in a ``with pytest.raises(...)``
    body (as GPU001 exempts ``LLM(...)`` there)."""
    parent = module.parent(call)
    if isinstance(parent, ast.withitem) and parent.context_expr is call:
        return True
    if isinstance(parent, ast.Call) and parent.args[:1] == [call] and \
            last_name(parent.func) == "enter_context":
        return True
    if not isinstance(parent, ast.Expr):
        return False
    block = module.parent(parent)
    return isinstance(block, (ast.With, ast.AsyncWith)) and is_raises_with(block) and \
        parent in block.body

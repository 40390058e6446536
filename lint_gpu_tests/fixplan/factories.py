"""Fix planning for factory helpers: a module-level function that builds an engine and returns
it, and every call of it
(:attr:`~lint_gpu_tests.analysis.analysis.ModuleAnalysis.engine_factories`); and factory methods,
a method of a class that does the same, called on ``self``
(:attr:`~lint_gpu_tests.analysis.analysis.ModuleAnalysis.method_factories`), planned the same
way (:func:`_method_unit`).

The shape, as vLLM's LoRA tests had it::

    def setup_engine(num_loras, tp=1):
        return vllm.LLM(model=MODEL, enable_lora=True, max_loras=num_loras,
                        tensor_parallel_size=tp)

    def test_single_lora(tp):
        llm = setup_engine(1, tp)
        try:
            ...
        finally:
            llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()

The fix is one unit: the factory becomes a ``@contextlib.contextmanager`` whose engine is built
by the runner (``with VllmRunner(...) as runner:`` with target bundled; with ``target =
"vllm"`` the ``vllm_runner`` fixture, which the factory gets as its first parameter from every
caller, as a helper does; for a unit across modules, whose callers are not given the fixture,
vLLM's ``VllmRunner`` itself, imported from the project's tests/conftest.py as vLLM's tests
import it, no fix when that file does not define it) and which yields
``weakref.proxy(runner.llm)``; every call becomes
``with setup_engine(...) as llm:`` over the engine's live range, the caller's hand cleanup
(GPU004) and shutdown ``try/finally`` (GPU003) deleted. The factory and all its callers are
planned together (:func:`plan_factory_unit`, given the list of call sites), applied in one
pass, and each violation the unit removes carries its fix; a caller that cannot be rewritten
leaves the whole unit without a fix, the reason naming that caller.

A tuple factory (:attr:`~lint_gpu_tests.analysis.analysis.ModuleAnalysis.tuple_factories`:
``llm = LLM(...)`` ... ``return llm, params``, or ``return LLM(...), params``) is one unit the
same way: the helper yields the tuple with the engine's proxy in its place (the name bound to
``weakref.proxy(runner.llm)`` at the top of its block, or the proxy written into the tuple),
and each call that unpacks it into names (``llm, params = setup_llm(...)``) becomes ``with
setup_llm(...) as (llm, params):``, the block following the engine's name
(:func:`tuple_place`). The other values are bound when the ``with`` enters, as they were by
the call, and outlive the block as they outlived the engine.

Decisions (README, "Fix safety": a safe fix keeps behaviour):

* Each caller's block is planned as a runner built outside a ``with`` (GPU005) whose class is
  the factory: the live range from the call to the last use of every value that can reach the
  engine, the cleanup after it deleted, a ``try`` whose ``finally`` only cleans up unwrapped.
  That is the extent GPU001 gives an engine the test builds itself, and the engine is torn
  down where the hand cleanup ran, or earlier: at the last use, which the differential corpus
  shows keeps outcomes, configurations and outputs (``tests/e2e/suites/test_factory_helper.py``).
* The caller now holds a ``weakref.proxy``: the uses a proxy does not keep (identity, hashing,
  weak references, a thread or closure that may outlive the block, a value handed to a call
  the analysis does not follow) are judged exactly as for GPU001's own proxy (unsafe, or no
  fix).
* Nothing moves in time: ``@contextlib.contextmanager`` runs the factory's body when the
  ``with`` enters, right after the call, so the engine is built where it was and its arguments
  are evaluated as before.
* The factory's contract changes (a context manager instead of an engine). A private factory
  (``_make``) of a test module is called from that module only: the fix is **safe** when every
  caller's block is. A public one of a test module may be imported elsewhere, where its calls
  would get a context manager: **unsafe**. A public one outside a test module (a conftest, a
  helper module under a test root) has no fix
  (:data:`~lint_gpu_tests.analysis.helper_calls.ONE_MODULE`).
* No fix: the factory is decorated, ``async``, a generator already, builds several engines,
  returns on another path, or uses its engine other than through its attributes before
  returning it; it is used other than by calls, or not called in its module; a call is at
  module level, returned further (``return setup_engine()`` in a helper), stored on an
  attribute or global, in a comprehension or lambda, unbound inside a larger expression, one
  of two calls of one function whose engines are alive together, or its engine is used after
  its block or weakly referenced (a proxy cannot be); a tuple factory's call keeps the tuple
  whole or starred, or its tuple refers to the engine twice.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from lint_gpu_tests.analysis.analysis import (
    EngineSite,
    FunctionInfo,
    FunctionKind,
    ModuleAnalysis,
    RunnerCall,
)
from lint_gpu_tests.analysis.helper_calls import ONE_MODULE, name_loads
from lint_gpu_tests.config import is_test_module, project_module
from lint_gpu_tests.fixplan.blocks import loads_of
from lint_gpu_tests.fixplan.classes import (
    RUNNER_CLASS_MODULES,
    owner_class_of,
    tests_package_problem,
    top_level_names,
    vllm_runner_class_problem,
)
from lint_gpu_tests.fixplan.plan import VLLM_TARGET_DEFAULTS, PlanKind, WrapPlan
from lint_gpu_tests.fixplan.planner import Planner, planner_for
from lint_gpu_tests.fixplan.safety import weak_calls
from lint_gpu_tests.fixplan.stored import stored_target
from lint_gpu_tests.fixplan.xunit import XunitPlan, stores_on_xunit, xunit_caller_plan
from lint_gpu_tests.ftypes import Applicability, Blocked, FixInfo, FixKind, FixPlan
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import last_name, parameter_names

FACTORY_TITLE = ("Make `{name}()` a `contextlib.contextmanager` over `{runner}` and call it "
                 "in `with` statements")


@dataclass(frozen=True)
class FactoryCall:
    """One call site of a factory helper, with the analysis of the module it is in (the
    factory's own module today; the unit takes sites of any module, each planned on its own
    analysis).

    Attributes:
        module: the analysis of the module holding the call.
        call: the ``setup_engine(...)`` call.
    """

    module: ModuleAnalysis
    call: ast.Call


@dataclass(frozen=True)
class FactoryCaller:
    """One call of the factory rewritten into a with-block.

    Attributes:
        path: the module the call is in (as its analysis names it).
        function: the name of the function holding the call.
        line: the call's line.
        plan: the with-block over the engine's live range in that function (a
            :attr:`PlanKind.RUNNER` plan: the factory's call is the with-item, its ``as``
            target the name the engine was bound to); or, for a call whose engine an xunit
            set-up stores (``cls.llm = setup_engine()``), the set-up's ``ExitStack`` the
            call is entered on (:func:`lint_gpu_tests.fixplan.xunit.xunit_caller_plan`).
    """

    path: str
    function: str
    line: int
    plan: WrapPlan | XunitPlan


@dataclass(frozen=True)
class CallerGroup:
    """The calls of a factory in one module, each planned on that module's analysis
    (:func:`caller_group`): what a unit needs of a caller's module, so that it can be
    planned where that module was checked (a worker of the run) and handed over.

    Attributes:
        path: the module the calls are in (as its analysis names it).
        callers: one with-block per call, in line order; or why a call cannot be rewritten
            (which leaves the whole unit without a fix).
        spellings: the other names the calls spell the factory by (an alias of an imported
            helper).
        keywords: ``(line, keyword)`` of each keyword argument the calls pass by name.
    """

    path: str
    callers: tuple[FactoryCaller, ...] | Blocked
    spellings: tuple[str, ...] = ()
    keywords: tuple[tuple[int, str], ...] = ()


def caller_group(module: ModuleAnalysis, name: str, calls: Sequence[ast.Call],
                 place: int | None = None) -> CallerGroup:
    """The :class:`CallerGroup` of the calls ``calls`` of the factory ``name`` in
    ``module``; ``place``: the engine's index in the tuple the factory returns (a tuple
    factory, :attr:`ModuleAnalysis.tuple_factories`), ``None`` for one returning the engine
    alone."""
    found = _caller_plans(module, name, list(calls), place)
    return CallerGroup(module.path, found if isinstance(found, Blocked) else tuple(found),
                       tuple(sorted({n for c in calls if (n := last_name(c.func)) is not None}
                                    - {name})),
                       tuple((c.lineno, k.arg) for c in calls for k in c.keywords
                             if k.arg is not None))


def caller_groups(name: str, calls: Sequence[FactoryCall], place: int | None = None
                  ) -> Iterator[CallerGroup]:
    """:func:`caller_group` of each module of ``calls``, in the order first seen, each
    planned when asked for (a unit stops at the first that cannot be rewritten)."""
    for module, sites in _by_module(calls):
        yield caller_group(module, name, sites, place)


@dataclass
class FactoryPlan(FixPlan):
    """How to make one factory helper a context manager and enter it at every call.

    Line numbers are 1-based ``ast`` statement starts in the factory's module as checked.

    Attributes:
        factory: the helper's name.
        path: the helper's module (as its analysis names it).
        def_line: the helper's ``def`` line (the decorator goes above it).
        call_line: the engine call in the helper (where GPU001 reports).
        body: the helper's own with-block over the runner (a :attr:`PlanKind.ENGINE` plan
            from the construction to the ``return``, which yields the engine's proxy).
        return_line: ``return llm`` that becomes ``yield llm`` (the engine bound to a name
            the helper uses before returning it, which the block binds to the proxy);
            ``None`` where the block's own hand-out yields ``weakref.proxy(runner.llm)``.
        callers: every call of the helper, each rewritten into a with-block.
        spellings: the other names its calls spell it by (an alias of an imported helper).
        import_from: with ``target = "vllm"`` and callers in other modules, the module the
            helper's module imports vLLM's ``VllmRunner`` from (``tests.conftest``); ``None``
            where the bundled runner is imported, the helper gets the runner fixture, or the
            helper lives in tests/conftest.py itself.
        applicability / reason / title: as :class:`lint_gpu_tests.ftypes.FixInfo`.
    """

    FIX_KIND = FixKind.FACTORY_CONTEXT_MANAGER
    factory: str
    path: str
    def_line: int
    call_line: int
    body: WrapPlan
    return_line: int | None = None
    callers: tuple[FactoryCaller, ...] = ()
    spellings: tuple[str, ...] = ()
    import_from: str | None = None
    applicability: Applicability = Applicability.SAFE
    reason: str = ""
    title: str = ""

    @property
    def anchor(self) -> tuple[str, int]:
        """``(code, row)`` of the GPU001 violation this plan fixes (the helper's engine)."""
        return ("GPU001", self.call_line)

    def fix_info(self, title: str | None = None) -> FixInfo:
        """The fix of GPU001 at :attr:`anchor`, or (with ``title``) of a GPU004 the unit
        removes, carrying this plan."""
        return FixInfo(self.applicability, title or self.title, self.reason,
                       FixKind.FACTORY_CONTEXT_MANAGER, self)

    def covered_fix(self, title: str) -> FixInfo:
        """The fix of a violation this unit removes along with its own (a caller's GPU003
        ``try/finally`` or finalizer): as safe as the unit, applied with it
        (:attr:`FixKind.WITH_ANOTHER`)."""
        return FixInfo(self.applicability, title, self.reason, FixKind.WITH_ANOTHER)

    def covers(self, path: str, function_line: int, line: int) -> bool:
        """True when the with-block of a caller in the function at ``function_line`` of
        ``path`` deletes the statement at ``line`` or unwraps the ``try`` there."""
        return any(line in caller.plan.remove_lines | caller.plan.unwrap_try_lines
                   for caller in self.callers
                   if caller.path == path and caller.plan.function_line == function_line)

    def hands_out(self, path: str, function_line: int, line: int) -> bool:
        """True when the statement at ``line``, of the fixture at ``function_line`` of
        ``path``, lies in the with-block of a call of the helper there: what the fixture
        yields or returns there is then the weak proxy the context manager hands out
        (GPU002)."""
        return any(caller.plan.site_line <= line <= caller.plan.end_line
                   for caller in self.callers
                   if caller.path == path and caller.plan.function_line == function_line)


def factory_units(module: ModuleAnalysis) -> dict[str, FactoryPlan | FixInfo]:
    """The fix unit of every factory helper of ``module`` (:attr:`engine_factories`), by
    name: its plan, or the missing fix with the reason (computed once per analysis)."""
    return module.derived(_factory_units)


def _factory_units(module: ModuleAnalysis) -> dict[str, FactoryPlan | FixInfo]:
    out: dict[str, FactoryPlan | FixInfo] = {}
    for name in (*module.engine_factories, *module.tuple_factories):
        func = next(f for f in module.functions if f.name == name and f.parent is None
                    and f.owner_class is None and f.kind is FunctionKind.HELPER)
        title = factory_title(module, name)
        sites = [s for s in module.engines if s.function is func]
        if len(sites) != 1:
            out[name] = FixInfo.none(title, f"`{name}()` builds several engines")
            continue
        calls = module_call_sites(module, func)
        if isinstance(calls, str):
            out[name] = FixInfo.none(title, calls)
            continue
        # An xunit set-up storing the helper's engine gets no fixture: the helper then
        # enters the runner class (under ``target = "vllm"``, imported from tests/conftest.py).
        stacked = any(stores_on_xunit(module, c.call) for c in calls)
        out[name] = plan_factory_unit(module, func, sites[0],
                                      caller_groups(name, calls, tuple_place(module, func)),
                                      enter_class=stacked)
    if module.method_factories:
        for func in module.functions:
            key = method_unit_key(module, func)
            if key is not None:
                out[key] = _method_unit(module, func)
    return out


def method_unit_key(module: ModuleAnalysis, func: FunctionInfo) -> str | None:
    """The key of :func:`factory_units` for ``func`` when it is a factory method of its class
    (:attr:`ModuleAnalysis.method_factories`: ``"method:<line of its def>"``), else
    ``None``."""
    owner = func.owner_class
    if owner is None or func.parent is not None or \
            module.method_factories.get(owner.name, {}).get(func.name) != func.node.lineno:
        return None
    return f"method:{func.node.lineno}"


def _method_unit(module: ModuleAnalysis, func: FunctionInfo) -> FactoryPlan | FixInfo:
    """The unit of the factory method ``func``: the method made a context manager and every
    call of it on ``self`` (or ``cls``) in the classes of the module that have it; or why
    not (another class defines a method of that name, the name is used other than by such a
    call, the project has its own runner). With ``target = "vllm"`` the method enters vLLM's
    ``VllmRunner`` from the project's tests/conftest.py, as a helper with callers in other
    modules does (its callers are not given the ``vllm_runner`` fixture)."""
    name = func.name
    title = factory_title(module, name, across=True)
    if module.config.runner:
        return FixInfo.none(title, (
            f"`{name}()` is a method, and the project's runner (`runner = "
            f"\"{module.config.runner}\"`) is not one a factory method is rewritten over"))
    sites = [s for s in module.engines if s.function is func]
    if len(sites) != 1:
        return FixInfo.none(title, f"`{name}()` builds several engines")
    owner = owner_class_of(module, sites[0])
    if owner is not None:
        return FixInfo.none(title, (
            f"`{name}()` builds the engine that `{owner.node.name}` stores on itself: the "
            "class's own fix makes it a context manager"))
    owner_name = func.owner_class.name if func.owner_class is not None else ""
    family = _class_family(module, owner_name)
    other = next((f for f in module.functions if f is not func and f.name == name
                  and f.owner_class is not None and f.parent is None
                  and f.owner_class.name in family), None)
    if other is not None:
        assert other.owner_class is not None
        return FixInfo.none(title, (
            f"`{other.owner_class.name}` defines a `{name}()` of its own (line "
            f"{other.node.lineno}): a call that reaches it would get an engine where the fix "
            "enters a context manager"))
    calls: list[FactoryCall] = []
    for node in walk_breadth(module.tree):
        if not (isinstance(node, ast.Attribute) and node.attr == name):
            continue
        parent = module.parent(node)
        call = parent if isinstance(parent, ast.Call) and parent.func is node else None
        enclosing = module.enclosing_class(node)
        if call is not None and isinstance(node.value, ast.Name) and \
                node.value.id in ("self", "cls") and \
                (enclosing is None or enclosing.name not in family):
            continue  # a call on `self` in a class outside the method's: it cannot reach it
        found = module.method_factory_of(call) if call is not None else None
        if found is None or found[1] != func.node.lineno:
            return FixInfo.none(title, (
                f"`{name}` is used other than by a call on `self`, on its class or on an "
                f"instance of it bound once to a name {_where(node, module)}: what receives "
                "it would get a context manager instead of an engine"))
        assert isinstance(parent, ast.Call)
        calls.append(FactoryCall(module, parent))
    if not calls:
        return FixInfo.none(title, f"`{name}()` is not called on `self` in this module")
    assert func.owner_class is not None
    return plan_factory_unit(module, func, sites[0], caller_groups(name, calls),
                             method_of=func.owner_class.name)


def _class_family(module: ModuleAnalysis, name: str) -> set[str]:
    """The class ``name`` of ``module`` with its ancestors and descendants among the module's
    classes (:attr:`ModuleAnalysis.local_bases`): the classes whose instances may run its
    methods or whose methods may run on its instances."""
    bases = module.local_bases

    def ancestors(of: str, seen: set[str]) -> set[str]:
        for base in set(bases.get(of, ())) - seen:
            seen.add(base)
            ancestors(base, seen)
        return seen

    family = ancestors(name, {name})
    family |= {c for c in bases if name in ancestors(c, set())}
    return family


def factory_unit_of(module: ModuleAnalysis, site: EngineSite) -> FactoryPlan | FixInfo | None:
    """The unit whose factory (a helper, or a method of a class) builds the engine at
    ``site``, or ``None`` when ``site`` is in no factory."""
    func = site.function
    if func is None:
        return None
    key = method_unit_key(module, func)
    if key is not None:
        # A method of a helper class that stores its engine on ``self``: the class's fix.
        return None if owner_class_of(module, site) is not None else \
            factory_units(module).get(key)
    if func.name not in module.engine_factories and tuple_place(module, func) is None or \
            func.parent is not None or func.owner_class is not None:
        return None
    return factory_units(module).get(func.name)


def tuple_place(module: ModuleAnalysis, func: FunctionInfo) -> int | None:
    """The engine's index in the tuple the module-level helper ``func`` returns (``return
    llm, params``: 0) when it is a tuple factory of ``module``
    (:attr:`ModuleAnalysis.tuple_factories`), else ``None``."""
    found = module.tuple_factories.get(func.name)
    if found is None or found[0] != func.node.lineno or func.owner_class is not None or \
            func.parent is not None:
        return None
    return found[1]


def factory_title(module: ModuleAnalysis, name: str, *, across: bool = False) -> str:
    """The fix's title for the factory ``name`` of ``module``: over the runner class, or with
    ``target = "vllm"`` over the runner fixture unless the unit spans modules (``across``),
    whose helper enters vLLM's runner class."""
    config = module.config
    runner = config.runner_fixture if config.runner_is_fixture and not across else (
        config.runner_classes[0] if config.runner_classes else "VllmRunner")
    return FACTORY_TITLE.format(name=name, runner=runner)


def vllm_runner_import(module: ModuleAnalysis) -> str | None | Blocked:
    """With ``target = "vllm"``: the module a factory helper of ``module`` imports vLLM's
    runner class from (``tests.conftest``), ``None`` when ``module`` is that tests/conftest.py
    and defines the class itself, or why the project has none to import (no
    tests/conftest.py, or one that does not define the class at its top level)."""
    problem = vllm_runner_class_problem(module)
    if problem is not None:
        return Blocked(problem)
    dotted = RUNNER_CLASS_MODULES["vllm"]
    where = project_module(module.path, module.config, dotted)
    if where is None or os.path.abspath(where) != os.path.abspath(module.path):
        return dotted
    runner = module.config.runner_classes[0] if module.config.runner_classes \
        else "VllmRunner"
    if runner in top_level_names(module.path):
        return None
    return Blocked(f"`target = \"vllm\"` enters `{runner}`, and `{module.path}`, the "
                   f"project's tests/conftest.py holding the helper, does not define it")


def _where(node: ast.AST, module: ModuleAnalysis) -> str:
    """``in `test_x()` (line N)``, or ``at module level (line N)``."""
    line = getattr(node, "lineno", 0)
    current = module.parent(node)
    while current is not None and not isinstance(current, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef)):
        current = module.parent(current)
    if current is None:
        return f"at module level (line {line})"
    return f"in `{current.name}()` (line {line})"


def module_call_sites(module: ModuleAnalysis, func: FunctionInfo) -> list[FactoryCall] | str:
    """Every call of the factory ``func`` in its own module, or why not every use of it is a
    call the unit can rewrite (it is rebound, shadowed by a parameter, used other than by a
    call) or why it has none."""
    name = func.name
    calls: list[FactoryCall] = []
    for use in name_loads(module, name, func.node):
        if isinstance(use, str):
            return use
        parent = module.parent(use)
        if not (isinstance(parent, ast.Call) and parent.func is use):
            return (f"`{name}` is used other than by a call {_where(use, module)}: what "
                    "receives it would get a context manager instead of an engine")
        calls.append(FactoryCall(module, parent))
    if not calls:
        return (f"`{name}()` returns the engine it builds and is not called in this module: "
                "the fix makes it a context manager together with its callers in other "
                "modules, planned when a caller's hand cleanup of that engine (GPU003, "
                "GPU004) is checked in the same run, and none is")
    return calls


def plan_factory_unit(module: ModuleAnalysis, func: FunctionInfo, site: EngineSite,
                      groups: Iterable[CallerGroup], *, tree: str | None = None,
                      method_of: str | None = None, enter_class: bool = False,
                      tests_imported: bool = False, fixture: str | None = None
                      ) -> FactoryPlan | FixInfo:
    """Plan the unit of the factory ``func`` of ``module`` (whose engine ``site`` builds) and
    its call sites, grouped by module (``groups``, from :func:`caller_group`): the factory's
    own block and one with-block per call.

    The one place a unit is planned: the calls may come from any module, each planned on its
    own analysis (:func:`caller_group`, in whichever process checked that module), which is
    how callers in other modules of a tree join the unit; the first group that cannot be
    rewritten names the unit's missing fix.

    With ``tree`` (the root directory of the helper's tree) the calls are every use of the
    helper in that tree (:mod:`lint_gpu_tests.fixing.tree_units` found them all, in modules the
    run fixes): its being public then changes no caller the unit leaves out, and a caller
    that cannot be rewritten is named with its module (from ``tree``).

    With ``method_of`` (the name of its class), ``func`` is a factory method and ``calls``
    its calls on ``self``: a class of another module may inherit it (and call it for an
    engine) unless no file of the tree imports the module.

    With ``enter_class`` (a caller is an xunit set-up, which gets no fixtures), the helper
    enters the runner class as for callers in other modules.

    With ``fixture`` (the name tests request it by), ``func`` is the factory a fixture of
    ``module`` hands out (:mod:`lint_gpu_tests.fixplan.factory_fixtures`) and ``groups`` the
    calls of that fixture's value; the factory enters the runner class (no caller is given
    the runner fixture), and a module that may import the fixture makes the unit unsafe.

    With ``tests_imported`` (a caller imports from the project's ``tests`` package), the
    helper's import of vLLM's runner class from ``tests.conftest`` needs nothing a caller
    does not already need (:func:`lint_gpu_tests.fixplan.classes.tests_package_problem`).

    Returns:
        The :class:`FactoryPlan` (safe or unsafe, with every reason), or the
        :class:`FixInfo` of the missing fix, its reason naming the factory's shape or the
        caller that cannot be rewritten (function and line).
    """
    name = func.name
    # A method's callers are not given the runner fixture either: it enters the class.
    across = tree is not None or method_of is not None or enter_class or fixture is not None
    title = factory_title(module, name, across=across)
    if module.config.runner:
        return FixInfo.none(title, (
            f"the project's runner (`runner = \"{module.config.runner}\"`) is not one a "
            "factory helper is rewritten over: the factory unit targets the bundled runner "
            "or vLLM's"))
    import_from: str | None = None
    if across and module.config.target == "vllm":
        # Callers in other modules (or of a method) cannot be given the runner fixture: the
        # factory enters vLLM's runner class, imported as vLLM's tests import it.
        found_import = vllm_runner_import(module)
        if isinstance(found_import, Blocked):
            return FixInfo.none(title, found_import.reason)
        import_from = found_import
    body = _factory_body(module, func, site, title, through_callers=not across)
    if isinstance(body, FixInfo):
        return body
    plan, return_line, reasons = body
    if import_from is not None and not tests_imported and \
            (unimportable := tests_package_problem(module)) is not None:
        reasons.append(unimportable)
    callers: list[FactoryCaller] = []
    spellings: set[str] = set()
    twice = _defaults_through_kwargs(module, func, site)
    for group in groups:
        spellings.update(group.spellings)
        found = group.callers
        if isinstance(found, Blocked):
            where = "" if tree is None else f"in `{tree_path(group.path, tree)}`, "
            return FixInfo.none(title, where + found.reason)
        stored = next((c for c in found if isinstance(c.plan, XunitPlan)), None)
        if stored is not None and not plan.use_class:
            # The runner fixture comes through the callers, and an xunit set-up gets none.
            return FixInfo.none(title, (
                f"the call of `{name}()` in `{stored.function}()` (line {stored.line}) cannot "
                f"be given the `{module.config.runner_fixture}` fixture the rewritten helper "
                "takes: an xunit set-up gets no fixtures"))
        clash = next(((line, k) for line, k in group.keywords if k in twice), None)
        if clash is not None:
            where = "" if tree is None else f" in `{tree_path(group.path, tree)}`"
            return FixInfo.none(title, (
                f"the call of `{name}()`{where} (line {clash[0]}) passes `{clash[1]}=` "
                f"through `**{twice[clash[1]]}`, and the fix spells out vLLM's runner default "
                f"for `{clash[1]}` too: the runner would get it twice (`TypeError`)"))
        module_of = "" if tree is None else f" of `{tree_path(group.path, tree)}`"
        reasons.extend(f"the call of `{name}()` in `{caller.function}()`{module_of} (line "
                       f"{caller.line}): {caller.plan.reason}"
                       for caller in found if caller.plan.reason)
        callers.extend(found)
    if fixture is not None:
        spellings.add(fixture)
    if fixture is not None and tree is None:
        if module.imported_by_tree:
            return FixInfo.none(title, (
                "another module of the tree imports this one (or one of its engine "
                f"helpers) and may import the fixture `{fixture}` too: its calls there would "
                "get a context manager instead of an engine, and the fix rewrites the "
                "fixture's callers in this module only"))
        if not module.private_to_tree:
            reasons.insert(0, "the module is not known to be private to its tree (a file of "
                              "the tree imports it, or it was checked without its tree): a "
                              f"module importing the fixture `{fixture}` would get a context "
                              "manager from each call instead of an engine")
    elif method_of is not None:
        if not module.private_to_tree:
            return FixInfo.none(title, (
                f"a class of another module may inherit `{name}()` from `{method_of}` and "
                "would get a context manager instead of an engine: the method is fixed only "
                "in a run over its tree in which no file imports this module"))
    elif not name.startswith("_") and not tree and not module.private_to_tree:
        if (not is_test_module(module.path) or module.imported_by_tree):
            return FixInfo.none(title, f"`{name}()` is public in a module others import: their "
                                f"calls would get a context manager instead of an engine, and "
                                f"{ONE_MODULE} (the helper and its callers in other modules are "
                                "not fixed together)")
        reasons.insert(0, f"`{name}()` is public: a module that imports it would get a context "
                          f"manager instead of an engine ({ONE_MODULE} and does not change "
                          "callers in other modules)")
    return FactoryPlan(
        factory=name,
        path=module.path,
        def_line=func.node.lineno,
        call_line=site.call.lineno,
        body=plan,
        return_line=return_line,
        callers=tuple(callers),
        spellings=tuple(sorted(spellings)),
        import_from=import_from,
        applicability=Applicability.UNSAFE if reasons else Applicability.SAFE,
        reason="; ".join(reasons),
        title=title,
    )


def _defaults_through_kwargs(module: ModuleAnalysis, func: FunctionInfo, site: EngineSite
                             ) -> dict[str, str]:
    """With ``target = "vllm"``, the runner defaults the fix spells out
    (:data:`~lint_gpu_tests.fixplan.plan.VLLM_TARGET_DEFAULTS`) that a caller can also pass
    through the factory's ``**kwargs`` into its engine (``LLM(model, **kwargs)``): default
    -> the name of that parameter. Empty under other targets."""
    kwarg = func.node.args.kwarg
    if module.config.target != "vllm" or kwarg is None:
        return {}
    call = site.call
    if not any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwarg.arg
               for k in call.keywords):
        return {}
    given = {k.arg for k in call.keywords if k.arg is not None}
    named = parameter_names(func.node.args, variadic=False)
    return {name: kwarg.arg for name, _ in VLLM_TARGET_DEFAULTS
            if name not in given and name not in named}


def tree_path(path: str, tree: str) -> str:
    """``path`` from the directory ``tree`` (``/`` between its parts), as messages name a
    module of a tree."""
    return os.path.relpath(os.path.abspath(path), tree).replace(os.sep, "/")


def _by_module(calls: Sequence[FactoryCall]) -> list[tuple[ModuleAnalysis, list[ast.Call]]]:
    """``calls`` grouped by the analysis of their module, in the order first seen."""
    out: dict[int, tuple[ModuleAnalysis, list[ast.Call]]] = {}
    for site in calls:
        out.setdefault(id(site.module), (site.module, []))[1].append(site.call)
    return list(out.values())


def _factory_body(module: ModuleAnalysis, func: FunctionInfo, site: EngineSite, title: str,
                  *, through_callers: bool = True
                  ) -> tuple[WrapPlan, int | None, list[str]] | FixInfo:
    """The factory's own with-block: from the construction to the ``return`` of the engine,
    yielding its proxy; the line of ``return llm`` to turn into ``yield llm`` (or ``None``);
    the unsafe reasons so far. Or the missing fix. ``through_callers=False`` (a unit across
    modules) enters the runner class under every target."""
    node = func.node
    name = node.name
    planner = planner_for(module)
    if isinstance(node, ast.AsyncFunctionDef):
        return FixInfo.none(title, f"`{name}()` is a coroutine function")
    if node.decorator_list and func.owner_class is not None and any(
            last_name(d) in ("staticmethod", "classmethod") for d in node.decorator_list):
        return FixInfo.none(title, f"`{name}()` is a static or class method: the fix makes "
                                   "only plain methods called on `self` context managers")
    if node.decorator_list:
        return FixInfo.none(title, f"`{name}()` is decorated: what the decorator does with a "
                                   "context manager is not followed")
    nodes = module.nodes_of(func)
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in nodes):
        return FixInfo.none(title, f"`{name}()` is a generator already")
    stmt = site.statement
    if not any(s is stmt for s in node.body) or planner.shares_line(stmt):
        return FixInfo.none(title, f"`{name}()` builds its engine inside a compound statement "
                                   "or on a line shared with another statement")
    if stmt.lineno == node.body[0].lineno == node.lineno:
        return FixInfo.none(title, f"`{name}()` builds its engine on the line of its `def` "
                                   "(`def f(): return LLM(...)`): the with-block the fix "
                                   "writes needs a body of its own lines")
    returns = [n for n in nodes if isinstance(n, ast.Return)]
    last = node.body[-1]
    bound = site.bound_name
    place = tuple_place(module, func)
    if isinstance(stmt, ast.Return) and (stmt.value is site.call if place is None else
                                         _built_in_tuple(stmt.value, site.call, place)):
        ret: ast.Return = stmt
    elif bound is not None and isinstance(last, ast.Return) and \
            _returns_engine(last.value, bound, place) and not planner.shares_line(last):
        ret = last
    elif place is not None:
        return FixInfo.none(title, _tuple_return_problem(name, bound, last))
    else:
        return FixInfo.none(title, f"`{name}()` does not end with `return` of the engine it "
                                   "builds")
    if returns != [ret]:
        return FixInfo.none(title, f"`{name}()` returns on other paths")
    index = next(i for i, s in enumerate(node.body) if s is stmt)
    between = node.body[index + 1:-1] if ret is not stmt else []
    if bound is not None and ret is not stmt:
        problem = _between_problem(module, planner, name, bound, between)
        if problem is not None:
            return FixInfo.none(title, problem)
    arguments = planner.runner_arguments(site.call, func, True,  # a helper: the class
                                         through_callers=through_callers)
    if isinstance(arguments, Blocked):
        return FixInfo.none(title, arguments.reason)
    missing = planner.missing_runner_fixture() if not arguments.use_class else None
    if missing is not None:
        return FixInfo.none(title, missing)
    reasons = list(arguments.risks)
    # A tuple's engine bound to a name is bound to its proxy at the top of the block and
    # yielded in the tuple as the helper returned it (``yield llm, params``).
    uses = (place is not None and ret is not stmt) or (
        any(loads_of(s, bound) for s in between) if bound is not None else False)
    config = module.config
    add_param = None
    if not arguments.use_class and config.runner_fixture not in func.params:
        add_param = config.runner_fixture
    plan = WrapPlan(
        kind=PlanKind.ENGINE,
        site_line=stmt.lineno,
        function_line=node.lineno,
        end_line=ret.end_lineno or ret.lineno,
        bound_name=bound if ret is not stmt else None,
        add_param=add_param,
        use_class=arguments.use_class,
        yield_proxy=ret is not stmt and not uses,
        aliases={bound} if bound is not None and ret is not stmt else set(),
        weak_calls=weak_calls(module, [stmt, *between], {bound})
        if bound is not None and uses else set(),
        compilation_config=arguments.compilation,
        mapping_defaults=arguments.mapping_defaults,
        helper_calls=arguments.helper_calls,
        call_line=site.call.lineno,
        title=title,
    )
    return plan, (ret.lineno if uses else None), reasons


def _returns_engine(value: ast.expr | None, bound: str, place: int | None) -> bool:
    """True when ``value``, what the helper's last statement returns, is its engine
    ``bound`` (``return llm``), or with ``place`` a tuple of no starred value holding
    ``bound`` at that index and nowhere else (``return llm, params``)."""
    if place is None:
        return isinstance(value, ast.Name) and value.id == bound
    if not isinstance(value, ast.Tuple) or place >= len(value.elts) or \
            any(isinstance(e, ast.Starred) for e in value.elts):
        return False
    held = value.elts[place]
    return isinstance(held, ast.Name) and held.id == bound and not any(
        isinstance(n, ast.Name) and n.id == bound
        for i, e in enumerate(value.elts) if i != place for n in walk_breadth(e))


def _built_in_tuple(value: ast.expr | None, call: ast.Call, place: int) -> bool:
    """True when ``value`` is a tuple of no starred value that holds the construction
    ``call`` itself at index ``place`` (``return LLM(...), params``)."""
    return isinstance(value, ast.Tuple) and place < len(value.elts) and \
        value.elts[place] is call and not any(isinstance(e, ast.Starred) for e in value.elts)


def _tuple_return_problem(name: str, bound: str | None, last: ast.stmt) -> str:
    """Why the tuple factory ``name`` (whose engine is bound to ``bound``, if to a name)
    does not have a shape its unit rewrites: the engine bound to a name, the helper ending
    with ``return`` of a tuple that holds that name once; or the construction an element of
    the tuple returned; no starred value in the tuple."""
    if bound is None:
        return (f"`{name}()` builds its engine in a tuple other than as an element of the "
                "tuple it returns (`return LLM(...), params`), or of one with a starred "
                "value")
    if isinstance(last, ast.Return) and isinstance(last.value, ast.Tuple):
        return (f"`{name}()` returns a tuple that holds `{bound}` other than once as an "
                "element of its own (or holds a starred value): the proxy the fix yields "
                "would not replace every reference to the engine")
    return f"`{name}()` does not end with `return` of a tuple holding the engine it builds"


def _between_problem(module: ModuleAnalysis, planner: Planner, name: str, bound: str,
                     between: list[ast.stmt]) -> str | None:
    """Why the statements between the factory's construction and its ``return`` cannot run on
    the engine's proxy inside the block: they rebind or delete its name, hand it to a nested
    function, or use it other than through its attributes (``llm.generate(...)``)."""
    for stmt in between:
        for node in walk_breadth(stmt):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
                return f"`{name}()` defines a function or class next to its engine"
            if not (isinstance(node, ast.Name) and node.id == bound):
                continue
            if not isinstance(node.ctx, ast.Load):
                return f"`{name}()` rebinds or deletes `{bound}` (line {node.lineno})"
            parent = module.parent(node)
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                return (f"`{name}()` uses `{bound}` itself (line {node.lineno}), not through "
                        "its attributes, before returning it")
        escape = planner.escape(stmt, {bound}, {bound}, False)
        if escape is not None:
            return escape.reason
    return None


def _caller_plans(module: ModuleAnalysis, name: str, calls: list[ast.Call],
                  place: int | None = None) -> list[FactoryCaller] | Blocked:
    """One with-block per call of the factory ``name`` in ``module``, each planned as a bare
    runner whose class is the factory (what it is once rewritten), on an analysis of the
    module with ``name`` among the runner classes; or why a call cannot be rewritten. With
    ``place`` (a tuple factory) each call must be unpacked into names
    (``llm, params = setup(...)``), the block following the name at ``place``."""
    # The calls' own spellings too: an imported helper may be called under an alias.
    spelled = sorted({n for c in calls if (n := last_name(c.func)) is not None} - {name})
    config = replace(module.config, runner_classes=(*module.config.runner_classes, name,
                                                    *spelled))
    as_runner = ModuleAnalysis.build(module.tree, module.text, module.path, config,
                                     module.conftest_entries, summarise=module.in_scope)
    planner = planner_for(as_runner)
    by_call: dict[int, RunnerCall] = {id(c.call): c for c in as_runner.runner_calls}
    out: list[FactoryCaller] = []
    for call in calls:
        where = f"the call of `{name}()` {_where(call, module)}"
        found = by_call.get(id(call))
        if found is None or found.function is None or found.under_main_guard:
            return Blocked(f"{where} is not in a function")
        if found.context == "returned":
            return Blocked(f"{where} returns the engine further, so it must outlive that "
                           "function")
        if found.context != "bare":
            return Blocked(f"{where} is already a context expression")
        func = found.function
        if func.name == name:
            return Blocked(f"`{name}()` calls itself")
        stmt = as_runner.statement_of(call)
        stored = xunit_caller_plan(as_runner, func, call, name) if place is None else None
        if isinstance(stored, Blocked):
            return Blocked(f"{where}: {stored.reason}")
        if stored is not None:
            out.append(FactoryCaller(module.path, func.name, call.lineno, stored))
            continue
        if place is not None:
            unpacked = _unpacked_names(stmt, call)
            if unpacked is None or place >= len(unpacked):
                return Blocked(f"{where} does not unpack the tuple it returns into names "
                               "(`llm, params = ...`), so the with-statement the fix writes "
                               "would bind the tuple where the engine's proxy goes")
        stored_at = stored_target(func, stmt, call) if place is None else None
        plan = planner.stored_plan(call, stmt, func, stored_at, PlanKind.RUNNER) \
            if stored_at is not None else planner.runner_plan(found, place)
        if isinstance(plan, FixInfo):
            return Blocked(f"{where}: {plan.reason}")
        if plan.bound_name is None and not plan.stored_on and not (
                isinstance(stmt, ast.Expr) and stmt.value is call or
                isinstance(stmt, (ast.Return, ast.Expr)) and _handed_out(stmt) is call
                and func.kind is FunctionKind.FIXTURE):
            return Blocked(f"{where}: the engine is not bound to a name, and the expression "
                           "around the call would hold it")
        if plan.weak_calls:
            line = min(line for line, _ in plan.weak_calls)
            return Blocked(f"{where}: the engine is weakly referenced (line {line}), and the "
                           "`weakref.proxy` the fix binds cannot be")
        out.append(FactoryCaller(module.path, func.name, call.lineno, plan))
    return _one_function_at_a_time(module, name, out)


def _unpacked_names(stmt: ast.stmt, call: ast.Call) -> list[str] | None:
    """The names ``stmt`` unpacks the value of ``call`` into (``llm, params = call``),
    or ``None`` when it is no such assignment of plain names."""
    if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Tuple)):
        return None
    names = [e.id for e in stmt.targets[0].elts if isinstance(e, ast.Name)]
    return names if len(names) == len(stmt.targets[0].elts) else None


def _handed_out(stmt: ast.Return | ast.Expr) -> ast.expr | None:
    """What a fixture's ``return x`` or ``yield x`` statement hands out (``x``)."""
    if isinstance(stmt, ast.Return):
        return stmt.value
    return stmt.value.value if isinstance(stmt.value, ast.Yield) else None


def _one_function_at_a_time(module: ModuleAnalysis, name: str, callers: list[FactoryCaller]
                            ) -> list[FactoryCaller] | Blocked:
    """``callers`` with the parameters a function's blocks drop decided on all of them
    together; or why two calls of one function cannot each get a block (their engines are
    alive together: one block would hold the other's call)."""
    by_function: dict[int, list[FactoryCaller]] = {}
    for caller in callers:
        by_function.setdefault(caller.plan.function_line, []).append(caller)
    out: list[FactoryCaller] = []
    for line, group in by_function.items():
        for first in group:
            for second in group:
                if first is not second and \
                        first.plan.site_line < second.plan.site_line <= first.plan.end_line:
                    return Blocked(f"the calls of `{name}()` in `{first.function}()` (lines "
                                   f"{first.line} and {second.line}) give engines alive "
                                   "together: the fix writes one with-block per call, and "
                                   "the first block would have to hold the second call "
                                   "(no fix nests a factory's blocks yet)")
        if len(group) > 1:
            func = next(f for f in module.functions if f.node.lineno == line
                        and f.name == group[0].function)
            removed = set().union(*(c.plan.remove_lines for c in group))
            drop = Planner._dropped_params(func, removed)
            group = [replace(c, plan=replace(c.plan, drop_params=set(drop)))
                     if isinstance(c.plan, WrapPlan) else c for c in group]
        out.extend(group)
    out.sort(key=lambda c: c.line)
    return out

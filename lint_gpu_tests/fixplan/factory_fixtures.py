"""Fix planning for factory fixtures: a fixture of a test module that hands out a function
building engines and keeps none of them
(:attr:`~lint_gpu_tests.analysis.analysis.ModuleAnalysis.factory_fixtures`), with every test
and fixture of the module that calls what it hands out.

The shape::

    @pytest.fixture
    def make_llm():
        def _make(**overrides):
            return LLM(MODEL, **overrides)
        return _make

    def test_two_rounds(make_llm):
        llm = make_llm(max_num_seqs=4)
        assert llm.generate(["a"])
        del llm
        gc.collect()

The fix is one unit, planned and applied as a factory helper's
(:func:`lint_gpu_tests.fixplan.factories.plan_factory_unit`, rewritten by
:class:`~lint_gpu_tests.codemods.make_factory_context_manager.MakeFactoryContextManager`):
the factory the fixture hands out becomes a ``@contextlib.contextmanager`` over the runner
class yielding ``weakref.proxy(runner.llm)``, and every call of the fixture's value a
``with make_llm(...) as llm:`` block over the engine's live range, the caller's hand cleanup
(GPU004) and shutdown ``try/finally`` (GPU003) deleted. This is vLLM's own shape: its
``vllm_runner`` fixture hands out a class that tests enter (``with vllm_runner(...) as m:``).

Decisions (README, "Fix safety"):

* The engine lives from the call to its last use, as one the test builds itself (GPU001),
  and is torn down where the hand cleanup ran or earlier; the fixture kept none of them, so
  nothing else held it.
* Here only a fixture of a test module: pytest hands it to that module's tests alone. A
  conftest's fixture serves other modules: its unit is planned over the tree
  (:mod:`lint_gpu_tests.fixing.tree_units`, from :func:`conftest_fixture_of`), the
  fixture's own fix (an ``ExitStack`` kept by the fixture) its fallback; a plugin module's
  keeps that fix. A module that another
  module of the tree imports whole, or one of whose engine helpers it imports, has no unit
  either; one checked without its tree, or from which a file of the tree imports something
  else, gets an unsafe one (the reason says a module importing the fixture would get a
  context manager).
* No unit (the fixture keeps its own fix): the fixture uses its factory itself (calls it, or
  hands it to something other than its tests), another fixture of the module has its name
  (a class's), a class of the module derives from a class of another module or the module
  imports tests (their tests may request the fixture), the fixture's value is used other
  than by calls (handed to a helper, stored, requested by its name as a string:
  ``usefixtures``, ``getfixturevalue``), a helper takes a parameter of the fixture's name, or
  a call cannot be rewritten (the factory unit's reasons: two engines of one function alive
  together, a call returned further, and so on).
"""

from __future__ import annotations

import ast
import os

from lint_gpu_tests.analysis.analysis import (
    EngineSite,
    FunctionInfo,
    FunctionKind,
    ModuleAnalysis,
)
from lint_gpu_tests.config import is_test_module
from lint_gpu_tests.fixplan.factories import (
    FactoryPlan,
    caller_group,
    factory_title,
    plan_factory_unit,
)
from lint_gpu_tests.ftypes import FixInfo
from lint_gpu_tests.parsing.source import walk_breadth


def fixture_units(module: ModuleAnalysis) -> dict[str, FactoryPlan | FixInfo]:
    """The unit of every factory fixture of ``module`` that a test module's own tests
    request, by the fixture's name: its plan, or the missing fix with the reason (computed
    once per analysis)."""
    return module.derived(_fixture_units)


def fixture_unit_of(module: ModuleAnalysis, site: EngineSite) -> FactoryPlan | None:
    """The plan of the factory fixture unit whose factory builds the engine at ``site``;
    ``None`` when ``site`` is in no such factory or its unit has no fix (the fixture's own
    fix then applies)."""
    func = site.function
    if func is None or func.parent is None or func.parent.fixture_name is None:
        return None
    unit = fixture_units(module).get(func.parent.fixture_name)
    return unit if isinstance(unit, FactoryPlan) and unit.def_line == func.node.lineno \
        else None


def _fixture_units(module: ModuleAnalysis) -> dict[str, FactoryPlan | FixInfo]:
    out: dict[str, FactoryPlan | FixInfo] = {}
    if not is_test_module(module.path) or module.path.endswith("conftest.py"):
        return out
    for name, line in module.factory_fixtures.items():
        fixture = next((f for f in module.functions if f.fixture_name == name
                        and f.node.lineno == line and f.parent is None), None)
        factory = handed_out_factory(module, fixture) if fixture is not None else None
        if fixture is None or factory is None:
            continue
        sites = [s for s in module.engines if s.function is factory]
        if len(sites) != 1:
            continue
        calls = _unit_problem(module, fixture, factory, name) or \
            call_sites(module, fixture, name) or \
            f"no test or fixture of the module calls what the fixture `{name}` hands out"
        if isinstance(calls, str):
            out[name] = FixInfo.none(factory_title(module, factory.name, across=True), calls)
            continue
        out[name] = plan_factory_unit(module, factory, sites[0],
                                      [caller_group(module, name, calls)], fixture=name)
    return out


def handed_out_factory(module: ModuleAnalysis, fixture: FunctionInfo) -> FunctionInfo | None:
    """The function defined directly in ``fixture``'s body that it returns or yields."""
    handed = [n.value for n in module.nodes_of(fixture)
              if isinstance(n, (ast.Return, ast.Yield)) and isinstance(n.value, ast.Name)]
    if len(handed) != 1:
        return None
    name = handed[0].id if isinstance(handed[0], ast.Name) else None
    return next((f for f in module.functions if f.parent is fixture and f.name == name
                 and any(s is f.node for s in fixture.node.body)), None)


def conftest_fixture_of(module: ModuleAnalysis, site: EngineSite) -> str | None:
    """The name of the fixture of ``module``, a ``conftest.py``, that hands out the factory
    building the engine at ``site`` (its one engine) and keeps none of its engines: the
    fixture and every call of its value in the tree are fixed as one unit
    (:mod:`lint_gpu_tests.fixing.tree_units`); else ``None``."""
    func = site.function
    if os.path.basename(module.path) != "conftest.py" or func is None or \
            func.parent is None or func.parent.fixture_name is None:
        return None
    fixture = func.parent
    name = fixture.fixture_name
    if name is None or fixture.parent is not None or fixture.owner_class is not None or \
            module.factory_fixtures.get(name) != fixture.node.lineno or \
            handed_out_factory(module, fixture) is not func or \
            sum(1 for s in module.engines if s.function is func) != 1:
        return None
    return name


def self_use(module: ModuleAnalysis, fixture: FunctionInfo, factory: FunctionInfo,
             name: str) -> str | None:
    """Why the fixture ``name`` uses its ``factory`` other than by handing it out (which
    would get a context manager instead of an engine), else ``None``."""
    handed = [n for n in module.nodes_of(fixture)
              if isinstance(n, (ast.Return, ast.Yield)) and isinstance(n.value, ast.Name)]
    for node in walk_breadth(fixture.node):
        if isinstance(node, ast.Name) and node.id == factory.name and \
                not any(h.value is node for h in handed):
            return (f"the fixture `{name}` uses `{factory.name}()` itself (line "
                    f"{node.lineno}), which would get a context manager instead of an engine")
    return None


def _unit_problem(module: ModuleAnalysis, fixture: FunctionInfo, factory: FunctionInfo,
                  name: str) -> str | None:
    """Why the callers of the fixture ``name`` may not all be this module's own tests and
    fixtures, or why the fixture itself uses its ``factory`` other than by handing it out;
    else ``None``."""
    problem = self_use(module, fixture, factory, name)
    if problem is not None:
        return problem
    for func in module.functions:
        if func.fixture_name == name and func is not fixture:
            return (f"`{func.name}()` (line {func.node.lineno}) is a fixture of the same name, "
                    f"which its tests request instead of the module's `{name}`")
    local = {c.name for c in module.classes}
    for cls in module.classes:
        for base in cls.bases:
            if not (isinstance(base, ast.Name) and (base.id in local or base.id == "object")):
                return (f"`{cls.name}` (line {cls.lineno}) derives from a class of another "
                        f"module, whose tests may request the fixture `{name}` and would get "
                        "a context manager from each call")
    for stmt in module.tree.body:
        if isinstance(stmt, ast.ImportFrom) and any(
                a.name.startswith(("test", "Test")) or a.name == "*" for a in stmt.names):
            return (f"the module imports tests from another module (line {stmt.lineno}), which "
                    f"may request the fixture `{name}` and would get a context manager from "
                    "each call")
    return None


def call_sites(module: ModuleAnalysis, fixture: FunctionInfo | None, name: str
               ) -> list[ast.Call] | str:
    """Every call of the value of the fixture ``name`` (``fixture``, where ``module``
    defines it) in the tests and fixtures of ``module`` that request it (none, where none
    does), or why not every use is such a call."""
    own = {id(n) for d in fixture.node.decorator_list for n in walk_breadth(d)} \
        if fixture is not None else set()
    for node in walk_breadth(module.tree):
        if isinstance(node, ast.Constant) and node.value == name and id(node) not in own:
            return (f"the fixture `{name}` is named in a string (line {node.lineno}): a "
                    "test requesting it by name (`usefixtures`, `getfixturevalue`) is not "
                    "followed")
    calls: list[ast.Call] = []
    for func in module.functions:
        if func is fixture or name not in func.params:
            continue
        if func.kind not in (FunctionKind.TEST, FunctionKind.FIXTURE) or func.in_base_class:
            return (f"`{func.name}()` (line {func.node.lineno}) takes a parameter "
                    f"`{name}` that pytest does not fill: what it is given is not followed")
        for node in walk_breadth(func.node):
            if not (isinstance(node, ast.Name) and node.id == name):
                continue
            parent = module.parent(node)
            if not isinstance(node.ctx, ast.Load) or not (
                    isinstance(parent, ast.Call) and parent.func is node) or \
                    module.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                            ast.Lambda)) is not func.node:
                return (f"`{func.name}()` uses the fixture `{name}` other than by calling "
                        f"it (line {node.lineno}): what receives it would get a context "
                        "manager factory")
            calls.append(parent)
    return calls

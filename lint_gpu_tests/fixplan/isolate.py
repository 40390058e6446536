"""Fix planning for the ``isolate`` fix strategy (config ``fix-strategy``; README, "Fix
strategies").

With ``fix-strategy = "isolate"`` a test that builds engines by hand is not wrapped in the
runner: it is decorated with ``@create_new_process_for_each_test("spawn")`` (the bundled
runtime's, or ``tests.utils``'s with ``target = "vllm"``), its manual cleanup and engine
finalizers are deleted, and the constructions stay. The spawned child's exit is the
ownership boundary: the engine, its EngineCore and everything the test held go with it.

**When isolating keeps behaviour** (the rule this module decides, measured by the e2e
differential harness). A spawned child imports the test module afresh and receives the
test's arguments by pickle, so:

* only a module-level ``def test_*`` (not ``async``, not a method, not nested) can be
  isolated: the child finds the function by its module-level name. Fixtures, helpers and
  module-level code cannot; for them the strategy falls back to the runner fix, and says so;
* each parameter must be a ``@pytest.mark.parametrize`` name whose values are literals, or
  ``tmp_path`` (a ``Path``: it pickles and names the same directory), or a parameter the fix
  drops (``request`` used only by a removed finalizer). Fixtures that hold this process's
  state (``request``, ``capsys``, ``caplog``, ``pytestconfig`` ...) or an engine cannot
  cross: the runner fix is used instead. Any other fixture makes the fix unsafe (its value
  must pickle, and what its set-up changed here other than environment variables is not
  seen in the child), as do non-literal parameter values and ``monkeypatch``;
* the test must not share mutable module state with the rest of the module: changes it makes
  to a module-level name (``global``, item or attribute stores, ``append``...) stay in the
  child, and changes other functions make are not seen by a child that imports the module
  afresh; writes to ``os.environ`` stay in the child. Either makes the fix unsafe, unless no
  other function of the module reads what the test changes. A module that builds an engine
  at import time builds it again in every child: unsafe too;
* decorators other than ``pytest.mark.*`` make it unsafe (they run in this process around
  the isolated call).

Cleanup that runs before another engine of the same test is built (between two engines, or
inside a loop that builds one per iteration) is kept: it frees the earlier engine as before.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from lint_gpu_tests.analysis.analysis import EngineSite, FunctionInfo, FunctionKind, ModuleAnalysis
from lint_gpu_tests.config import project_module
from lint_gpu_tests.fixplan.blocks import walk_statements
from lint_gpu_tests.fixplan.flow import STORE_METHODS
from lint_gpu_tests.fixplan.groups import engine_group, group_cleanup_loop
from lint_gpu_tests.fixplan.plan import PlanKind, WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import Applicability, Blocked, FixInfo, FixKind, FixProblem, Risky
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import last_name

ISOLATE_DECORATOR = "create_new_process_for_each_test"
ISOLATE_CALL = f'{ISOLATE_DECORATOR}("spawn")'
ISOLATE_TITLE = f"Run the test in a new process: `@{ISOLATE_CALL}`"
#: Where the decorator is imported from, per ``target``.
DECORATOR_MODULES = {"bundled": "lint_gpu_tests.runtime", "vllm": "tests.utils"}
#: Built-in fixtures whose values pickle and mean the same in a child process.
PICKLABLE_FIXTURES = frozenset({"tmp_path"})
#: Built-in fixtures that hold this process's state, with why they cannot cross.
PROCESS_FIXTURES = {
    "request": "the fixture request of this process",
    "pytestconfig": "this process's pytest configuration",
    "capsys": "this process's captured output",
    "capsysbinary": "this process's captured output",
    "capfd": "this process's captured output",
    "capfdbinary": "this process's captured output",
    "caplog": "this process's log capture",
    "recwarn": "this process's warning recorder",
    "record_property": "this process's test report",
    "record_testsuite_property": "this process's test report",
    "record_xml_attribute": "this process's test report",
    "tmp_path_factory": "this process's pytest configuration",
    "tmpdir_factory": "this process's pytest configuration",
    "pytester": "this process's pytest session",
    "testdir": "this process's pytest session",
    "cache": "this process's pytest configuration",
}
ENVIRON_METHODS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__",
                             "__delitem__"})


@dataclass
class IsolatePlan(WrapPlan):
    """How to isolate one test: decorate it, delete its cleanup, keep its constructions.

    The :class:`WrapPlan` fields keep their meaning where they apply (``function_line``,
    ``remove_lines``, ``unwrap_try_lines``, ``drop_params``, ``applicability``, ``reason``,
    ``title``, ``call_line``: the first engine call, whose GPU001 the other violations'
    fixes depend on); ``kind`` is :attr:`PlanKind.ISOLATE` and ``site_line`` is the ``def`` line.

    Attributes:
        kept_lines: cleanup lines (a subset of ``remove_lines``, so GPU004 counts them as
            fixed by this plan) that stay because they run before a later engine of the
            test is built, or do not stand alone on their line.
        import_from: the module the decorator is imported from.
        engine_lines: lines of every engine call of the test (their GPU001 share the plan).
    """

    kept_lines: set[int] = field(default_factory=set)
    import_from: str = DECORATOR_MODULES["bundled"]
    engine_lines: set[int] = field(default_factory=set)

    @property
    def anchor(self) -> tuple[str, int]:
        """``("GPU001", row)`` of the test's first engine construction."""
        return ("GPU001", self.call_line)

    @property
    def fix_kind(self) -> FixKind:
        """The codemod that applies this plan."""
        return FixKind.ISOLATE_TEST_PROCESS


def strategy_plan(module: ModuleAnalysis, site: EngineSite) -> WrapPlan | FixInfo:
    """The GPU001 fix of ``site`` under the configured ``fix-strategy``.

    ``runner``: :meth:`Planner.engine_plan`; when that has no fix and isolating the test
    would fix it, the reason says so. ``isolate``: the test's :class:`IsolatePlan`; where
    the site cannot be isolated (a fixture, a helper, module level, a fixture argument that
    cannot cross to a child), the runner fix, its title saying why.
    """
    runner = planner_for(module).engine_plan(site)
    if module.config.fix_strategy != "isolate" and isinstance(runner, WrapPlan):
        return runner
    isolated = isolate_plan(module, site.function)
    if module.config.fix_strategy == "isolate":
        if isinstance(isolated, IsolatePlan):
            return isolated
        note = f" (not isolated: {isolated.reason})"
        if isinstance(runner, WrapPlan):
            return dataclasses.replace(runner, title=runner.title + note)
        return FixInfo(runner.applicability, runner.title,
                       f"{runner.reason}; not isolated either: {isolated.reason}")
    if isinstance(runner, FixInfo) and isinstance(isolated, IsolatePlan):
        how = "safely" if isolated.applicability is Applicability.SAFE else \
            f"as an unsafe fix ({isolated.reason})"
        return FixInfo(runner.applicability, runner.title,
                       f"{runner.reason}; `--fix-strategy isolate` would fix it {how}")
    return runner


def isolate_plan(module: ModuleAnalysis, func: FunctionInfo | None) -> IsolatePlan | FixInfo:
    """Plan the isolation of the test ``func`` (cached per function); a :class:`FixInfo`
    without a fix, with the reason, when it cannot be isolated (see the module docstring)."""
    cache: dict[int, IsolatePlan | FixInfo] | None = getattr(module, "_isolate_plans", None)
    if cache is None:
        cache = {}
        module._isolate_plans = cache  # type: ignore[attr-defined]
    key = id(func.node) if func is not None else 0
    if key not in cache:
        cache[key] = _plan(module, func)
    return cache[key]


def _plan(module: ModuleAnalysis, func: FunctionInfo | None) -> IsolatePlan | FixInfo:
    config = module.config
    if func is None:
        # Only ever shown after the runner fix's own reason, which says where it is built.
        return FixInfo.none(ISOLATE_TITLE, "no test owns it")
    if func.kind is FunctionKind.FIXTURE:
        return FixInfo.none(ISOLATE_TITLE, "a fixture's value cannot cross to a child process")
    node = func.node
    if func.kind is not FunctionKind.TEST or not any(s is node for s in module.tree.body):
        return FixInfo.none(ISOLATE_TITLE,
                            "only a module-level test function can run in a new process")
    if isinstance(node, ast.AsyncFunctionDef):
        return FixInfo.none(ISOLATE_TITLE, "an `async def` test")
    if ISOLATE_DECORATOR not in config.isolation_decorators:
        return FixInfo.none(ISOLATE_TITLE,
                            f"`{ISOLATE_DECORATOR}` is not in `isolation-decorators`")
    if sum(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
           and s.name == node.name for s in module.tree.body) > 1:
        return FixInfo.none(ISOLATE_TITLE, f"`{node.name}` is defined twice in the module")
    import_from = DECORATOR_MODULES.get(config.target, DECORATOR_MODULES["bundled"])
    if import_from != DECORATOR_MODULES["bundled"] and \
            project_module(module.path, config, import_from) is None:
        return FixInfo.none(ISOLATE_TITLE, (
            f"`target = \"{config.target}\"` imports the decorator from `{import_from}`, and "
            f"the project has no `{import_from.replace('.', '/')}.py`"))
    planner = planner_for(module)
    sites = [s for s in module.engines if s.function is func]
    engines = module.engine_names(func)
    bindings = module.function_bindings(func)
    deletable = bindings.engines | bindings.runners | bindings.strong_aliases
    last_site = max((s.statement.lineno for s in sites), default=0)
    loops_with_engine = [n for n in module.nodes_of(func)
                         if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and any(
                             s.call in set(walk_breadth(n)) for s in sites)]
    remove: set[int] = set()
    kept: set[int] = set()
    unwrap: set[int] = set()

    def runs_before_next_engine(stmt: ast.stmt) -> bool:
        return stmt.lineno < last_site or any(
            any(n is stmt for n in walk_breadth(loop)) for loop in loops_with_engine)

    statements = [s for top in node.body for s in walk_statements(top)]
    # A loop that only tears down a group's engines (``for llm in llms: llm.shutdown()``)
    # goes whole, as with the runner fix (shape 1).
    containers = {group.container for site in sites if (group := engine_group(
        module, site.call, site.statement, func)) is not None}
    for stmt in statements:
        loop = next((found for container in sorted(containers) if (found := group_cleanup_loop(
            module, stmt, container, planner.is_cleanup_statement))), [])
        if loop and not any(planner.shares_line(s) for s in loop) and \
                not runs_before_next_engine(stmt):
            remove.update(s.lineno for s in loop)
    idioms = {id(stmt): idiom for stmt in statements if isinstance(stmt, (ast.Assign, ast.Try))
              and (idiom := planner.release_idiom(stmt, deletable)) is not None}
    inside_idioms = {id(n) for idiom in idioms.values() for s in idiom for n in walk_breadth(s)}
    for stmt in statements:
        if stmt.lineno in remove:
            continue  # a group's teardown loop, or a statement of one
        if id(stmt) in idioms:  # ``llm = weakref.proxy(llm); del llm``: goes whole
            lines = {s.lineno for s in idioms[id(stmt)]}
            remove.update(lines)
            if runs_before_next_engine(stmt) or planner.shares_line(stmt) or \
                    planner.on_header_line(stmt):
                kept.update(lines)
            continue
        if id(stmt) in inside_idioms:
            continue
        cleanup = isinstance(stmt, ast.Delete) and any(
            isinstance(t, ast.Name) and t.id in deletable for t in stmt.targets) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and (
                module.cleanup_call_kind(stmt.value) is not None
                or planner.finalizer_engine(stmt.value, engines)))
        if cleanup:
            remove.add(stmt.lineno)
            if runs_before_next_engine(stmt) or planner.shares_line(stmt) or \
                    planner.on_header_line(stmt) or not planner.is_cleanup_statement(
                        stmt, deletable):
                kept.add(stmt.lineno)
        elif isinstance(stmt, ast.Try) and planner.finally_only_cleans(stmt, engines) and \
                planner._unwrappable(stmt) and not runs_before_next_engine(stmt):
            unwrap.add(stmt.lineno)
            remove.update(s.lineno for s in stmt.finalbody)
    applicability = Applicability.SAFE
    reasons: list[str] = []
    drop: set[str] = set()
    removed = [s for s in statements if s.lineno in remove - kept]
    for param in func.params:
        problem = _param_problem(module, func, param, removed)
        if problem == "drop":
            drop.add(param)
        elif isinstance(problem, Blocked):
            return FixInfo.none(ISOLATE_TITLE, problem.reason)
        elif problem is not None:
            reasons.append(problem.reason)
    reasons += _decorator_problems(node)
    reasons += _state_problems(module, func)
    if reasons:
        applicability = Applicability.UNSAFE
    first = min(sites, key=lambda s: (s.call.lineno, s.call.col_offset)) if sites else None
    return IsolatePlan(
        kind=PlanKind.ISOLATE,
        site_line=node.lineno,
        function_line=node.lineno,
        end_line=node.end_lineno or node.lineno,
        bound_name=None,
        remove_lines=remove,
        unwrap_try_lines=unwrap,
        drop_params=drop,
        applicability=applicability,
        reason="; ".join(reasons),
        title=ISOLATE_TITLE,
        call_line=first.call.lineno if first is not None else node.lineno,
        kept_lines=kept,
        import_from=import_from,
        engine_lines={s.call.lineno for s in sites},
    )


def _param_problem(module: ModuleAnalysis, func: FunctionInfo, param: str,
                   removed: list[ast.stmt]) -> FixProblem | Literal["drop"] | None:
    """Why the test's parameter ``param`` keeps the test out of a spawned child
    (:class:`Blocked`), makes isolating it unsafe (:class:`Risky`), or ``"drop"`` when the
    fix drops it; ``None`` when it crosses as it is."""
    values = _parametrized(func.node).get(param)
    if values is not None:
        if all(_literal(v, _module_literals(module)) for v in values):
            return None
        return Risky(f"the parametrized values of `{param}` are sent to the child by pickle")
    if param in PICKLABLE_FIXTURES:
        return None
    loads = [n for n in module.nodes_of(func) if isinstance(n, ast.Name) and n.id == param]
    if loads and all(any(n in set(walk_breadth(r)) for r in removed) for n in loads):
        return "drop"
    if param in module.engine_fixtures:
        return Blocked(f"`{param}` is an engine fixture: an engine cannot be sent to a child "
                       "process")
    if param == module.config.runner_fixture:
        return Blocked(f"the test already uses `{param}`")
    if param in PROCESS_FIXTURES:
        return Blocked(f"`{param}` is {PROCESS_FIXTURES[param]}, which a child process cannot "
                       "use")
    if param == "monkeypatch":
        return Risky("`monkeypatch` is pickled into the child: its changes apply there, not "
                     "here")
    return Risky(f"the fixture `{param}` is sent to the child by pickle: its value must "
                 "pickle, and what its set-up changed in this process (other than environment "
                 "variables) is not seen there")


def _parametrized(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[ast.expr]]:
    """``@pytest.mark.parametrize`` argument names of ``node`` and the value expressions
    each takes (an unknown shape gives the whole value list expression)."""
    out: dict[str, list[ast.expr]] = {}
    for deco in node.decorator_list:
        if not (isinstance(deco, ast.Call) and last_name(deco.func) == "parametrize"
                and len(deco.args) >= 2):
            continue
        names_node, values = deco.args[0], deco.args[1]
        if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
            names = [n.strip() for n in names_node.value.split(",") if n.strip()]
        elif isinstance(names_node, (ast.List, ast.Tuple)):
            names = [e.value for e in names_node.elts
                     if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        else:
            continue
        rows = values.elts if isinstance(values, (ast.List, ast.Tuple)) else [values]
        for name in names:
            out.setdefault(name, []).extend(rows)
    return out


def _module_literals(module: ModuleAnalysis) -> set[str]:
    """Module-level names bound once, to a literal (``MODELS = ["a", "b"]``)."""
    counts: dict[str, int] = {}
    literal: set[str] = set()
    for stmt in module.tree.body:
        for node in walk_breadth(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                counts[node.id] = counts.get(node.id, 0) + 1
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                stmt.targets[0], ast.Name) and _literal(stmt.value, set()):
            literal.add(stmt.targets[0].id)
    return {name for name in literal if counts.get(name) == 1}


def _literal(node: ast.expr, names: set[str]) -> bool:
    """Whether ``node`` is a literal, ``pytest.param`` of literals, or one of ``names``
    (module-level literals, see :func:`_module_literals`); such values pickle."""
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Call) and last_name(node.func) == "param":
        return all(_literal(a, names) for a in node.args)
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _decorator_problems(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    out = []
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        spelled = ast.unparse(target)
        if not (spelled.startswith("pytest.mark.") or spelled.startswith("mark.")):
            out.append(f"the decorator `{spelled}` runs in this process around the isolated "
                       "call")
    return out


def _module_names(module: ModuleAnalysis) -> set[str]:
    """Names bound at module level (assignments, definitions, imports)."""
    out: set[str] = set()
    for stmt in module.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        else:
            out.update(n.id for n in walk_breadth(stmt) if isinstance(n, ast.Name)
                       and isinstance(n.ctx, ast.Store))
    return out


def _local_names(module: ModuleAnalysis, func: FunctionInfo) -> set[str]:
    declared = {n for x in module.nodes_of(func) if isinstance(x, ast.Global) for n in x.names}
    stored = {n.id for n in module.nodes_of(func) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    return (stored | set(func.params)) - declared


def _mutated(module: ModuleAnalysis, func: FunctionInfo, shared: set[str]) -> set[str]:
    """Module-level names in ``shared`` that ``func`` (nested functions included) changes:
    rebinds through ``global``, stores items or attributes into, or calls a storing method
    of. ``os.environ`` counts as ``"os.environ"``."""
    out: set[str] = set()
    local = _local_names(module, func)
    for node in walk_breadth(func.node):
        if isinstance(node, ast.Global):
            out.update(n for n in node.names if any(
                isinstance(m, ast.Name) and m.id == n and isinstance(m.ctx, ast.Store)
                for m in walk_breadth(func.node)))
        holder: ast.AST | None = None
        if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(
                node.ctx, (ast.Store, ast.Del)):
            holder = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr in STORE_METHODS | ENVIRON_METHODS):
            holder = node.func.value
        elif isinstance(node, ast.Call) and module.qualified(node.func) in (
                "os.putenv", "os.unsetenv"):
            out.add("os.environ")
        if holder is None:
            continue
        if module.qualified(holder) == "os.environ":
            out.add("os.environ")
            continue
        while isinstance(holder, (ast.Attribute, ast.Subscript)):
            holder = holder.value
        if isinstance(holder, ast.Name) and holder.id in shared and holder.id not in local:
            out.add(holder.id)
    return out


def _state_problems(module: ModuleAnalysis, func: FunctionInfo) -> list[str]:
    """Why module state makes isolating ``func`` unsafe (see the module docstring)."""
    out: list[str] = []
    shared = _module_names(module) - {f.name for f in module.functions}
    mine = _mutated(module, func, shared)
    others = [f for f in module.functions if f.node is not func.node and f.parent is None]
    readers = {n.id for f in others for n in walk_breadth(f.node)
               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if "os.environ" in mine:
        out.append("its changes to `os.environ` stay in the child, where later tests saw "
                   "them before")
    for name in sorted(mine - {"os.environ"}):
        if name in readers:
            out.append(f"it changes the module-level `{name}` in the child only, and other "
                       "functions of the module read it")
    reads = {n.id for n in walk_breadth(func.node) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Load)} - _local_names(module, func)
    changed_elsewhere = set().union(*(_mutated(module, f, shared) for f in others)) \
        if others else set()
    for name in sorted(reads & changed_elsewhere):
        out.append(f"other functions change the module-level `{name}`, and a child that "
                   "imports the module afresh does not see their changes")
    if any(s.function is None and not s.under_main_guard for s in module.engines):
        out.append("the module builds an engine at import time, and each child imports it "
                   "again")
    return out

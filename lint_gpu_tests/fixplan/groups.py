"""Fix planning for engines that do not live in one name: groups, factories, branches.

Engines kept together in a container, a name rebound in branches and a factory fixture, recognised
on the ``ast`` tree; :mod:`lint_gpu_tests.fixplan.planner`
asks this module before planning a construction and carries the answer in
``WrapPlan.group``, which ``lint_gpu_tests/codemods/_groups.py`` applies:

- **Engines alive together in a container** (:func:`engine_group`):
  ``llms = [LLM(m) for m in models]`` (a list or dict comprehension), or a ``for``/``while``
  loop whose body does ``llms.append(LLM(m))`` / ``llms[k] = LLM(m)`` on a list or dict the
  function built itself. The with-block is one ``contextlib.ExitStack()`` over the
  container's live range, entering one runner per engine and keeping a
  ``weakref.proxy(...)`` of each engine in the container.
- **Factory fixtures** (:func:`factory_fixture`): a fixture whose nested ``def make(...)``
  builds an engine, registers a finalizer shutting it down and returns it. The fixture's
  body from the ``def`` on moves into one ``contextlib.ExitStack()``, ``make`` enters a
  runner on it and returns a proxy, and ``return make`` becomes ``yield make``.
- **A name rebound in the branches of an ``if``** (:func:`other_branch_statements`): the
  other branch binds the same name to its own engine before reading it, so its uses are
  not uses of this engine.

Nothing here imports the rest of fix planning: this module sits below it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from lint_gpu_tests.analysis.analysis import FunctionInfo, FunctionKind, ModuleAnalysis
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import last_name

#: Title of the group and factory fixes.
GROUP_TITLE = "Enter each engine's runner on one `contextlib.ExitStack()`"
#: Why a factory fixture's fix is unsafe.
FACTORY_REASON = (
    "the factory hands each engine to the test as a `weakref.proxy` (identity checks and "
    "references kept past the fixture see the proxy), and the engines are torn down when "
    "the fixture's `contextlib.ExitStack()` closes at its teardown")
_FRESH_CALLS = frozenset({"list", "dict"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)


@dataclass(frozen=True)
class GroupShape:
    """A construction the ordinary with-block cannot hold, and how the fix holds it.

    Attributes:
        kind: ``"comprehension"``, ``"loop"`` (shape 1) or ``"factory"`` (shape 6).
        statement: the statement of the owning function's block where the
            ``with contextlib.ExitStack()`` starts (the assignment, the loop, or the
            nested ``def``).
        container: the local name holding the engines (``llms``), or the nested factory's
            name for ``"factory"``.
        stack: a name for the ``ExitStack`` that the function does not use yet.
        runner: what enters each engine: the ``vllm_runner_factory`` fixture (target
            bundled: one memory wait, after the last runner exits), the configured runner
            fixture (target vllm) or the runner class (helpers, wide-scoped fixtures);
            filled in by the planner.
    """

    kind: str
    statement: ast.stmt
    container: str
    stack: str
    runner: str = ""


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in walk_breadth(node) if isinstance(n, ast.Name)}


def _free_name(func: ast.AST, base: str) -> str:
    used = _names(func) | {a.arg for a in walk_breadth(func) if isinstance(a, ast.arg)}
    name, k = base, 2
    while name in used:
        name, k = f"{base}{k}", k + 1
    return name


def _engine_calls(module: ModuleAnalysis, node: ast.AST) -> list[ast.Call]:
    return [n for n in walk_breadth(node) if isinstance(n, ast.Call)
            and (module.builds_engine(n) or module.is_runner_call(n))]


def _is_fresh(value: ast.AST | None) -> bool:
    """An empty list or dict the function builds itself."""
    if isinstance(value, ast.List):
        return not value.elts
    if isinstance(value, ast.Dict):
        return not value.keys
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
        value.func.id in _FRESH_CALLS and not value.args and not value.keywords


def engine_group(module: ModuleAnalysis, call: ast.Call, stmt: ast.stmt,
                 func: FunctionInfo) -> GroupShape | None:
    """Shape 1: ``call`` builds one engine of a group kept in a local container.

    Recognised: ``name = [LLM(...) for ...]`` or ``name = {k: LLM(...) for ...}`` (the
    engine is the element itself, nothing else in the comprehension builds one), and a
    loop (no ``else``) whose body holds ``name.append(LLM(...))`` or ``name[k] = LLM(...)``
    as its only engine, where ``name`` is bound once in the function, to an empty list or
    dict, earlier in the block holding the loop. Whether the container's uses allow a
    fix is the planner's value flow; this only says where the block starts.

    Returns:
        The shape, or ``None`` when the construction is not one of these.
    """
    node = func.node
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Name):
        value = stmt.value
        elt = value.elt if isinstance(value, ast.ListComp) else (
            value.value if isinstance(value, ast.DictComp) else None)
        if elt is call and len(_engine_calls(module, value)) == 1:
            return GroupShape("comprehension", stmt, stmt.targets[0].id,
                              _free_name(node, "stack"))
        return None
    loop = module.parent(stmt)
    if not isinstance(loop, _LOOPS) or loop.orelse or not any(s is stmt for s in loop.body):
        return None
    container: str | None = None
    if isinstance(stmt, ast.Expr) and stmt.value is not call and isinstance(
            stmt.value, ast.Call) and stmt.value.args and stmt.value.args[0] is call and \
            len(stmt.value.args) == 1 and not stmt.value.keywords:
        func_node = stmt.value.func
        if isinstance(func_node, ast.Attribute) and func_node.attr == "append" and \
                isinstance(func_node.value, ast.Name):
            container = func_node.value.id
    elif isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1:
        target = stmt.targets[0]
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            container = target.value.id
    if container is None or len(_engine_calls(module, loop)) != 1:
        return None
    if isinstance(loop, (ast.For, ast.AsyncFor)) and container in _names(loop.target):
        return None
    stores = [n for n in walk_breadth(node) if isinstance(n, ast.Name) and n.id == container
              and isinstance(n.ctx, ast.Store)]
    if len(stores) != 1 or container in func.params:
        return None
    binding = module.parent(stores[0])
    if not (isinstance(binding, ast.Assign) and len(binding.targets) == 1
            and _is_fresh(binding.value)) or module.parent(binding) is not module.parent(loop):
        return None
    if binding.lineno >= loop.lineno:
        return None
    return GroupShape("loop", loop, container, _free_name(node, "stack"))


def group_cleanup_loop(module: ModuleAnalysis, stmt: ast.stmt, container: str,
                       is_cleanup: Callable[[ast.stmt, set[str]], bool]) -> list[ast.stmt]:
    """Shape 1: ``stmt`` when it is a loop that only tears down the group's engines, with
    the statements of its body; else ``[]``.

    Recognised: ``for llm in llms:`` (or ``llms.values()``; a plain name as target, no
    ``else``) whose every statement is cleanup of ``llm`` (``is_cleanup``: ``llm.shutdown()``,
    ``del llm``, ``llm.llm_engine.engine_core.shutdown()``, ``gc.collect()`` ...), and the
    target is not read after the loop (removing the loop would change what it holds). The
    group's runners do all of it when the ``ExitStack`` closes, so the loop goes with the
    rewrite, as a single engine's ``llm.shutdown()`` does.
    """
    if not isinstance(stmt, ast.For) or stmt.orelse or not isinstance(stmt.target, ast.Name):
        return []
    source = stmt.iter
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and \
            source.func.attr == "values" and not source.args and not source.keywords:
        source = source.func.value
    target = stmt.target.id
    if not (isinstance(source, ast.Name) and source.id == container) or not all(
            is_cleanup(s, {target}) for s in stmt.body):
        return []
    func = module.parent(stmt)
    while func is not None and not isinstance(func, _SCOPES):
        func = module.parent(func)
    end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
    if func is not None and any(
            isinstance(n, ast.Name) and n.id in (target, container) and isinstance(
                n.ctx, ast.Load) and (n.lineno, n.col_offset) > end for n in walk_breadth(func)):
        return []
    return [stmt, *stmt.body]


#: Calls that tell a ``weakref.proxy`` from the engine it stands for.
IDENTITY_CALLS = frozenset({"id", "type"})
#: Calls that look at a value's class through its ``__class__``, which a ``weakref.proxy``
#: forwards: ``isinstance(proxy, LLM)`` is True as for the engine itself, and
#: ``issubclass()`` raises the same ``TypeError`` on an instance, proxy or not (CPython's
#: ``object_isinstance`` falls back to ``__class__`` when ``type(x)`` does not match).
#: Only a class test against the proxy's own type tells them apart.
CLASS_CALLS = frozenset({"isinstance", "issubclass"})
_PROXY_TYPES = frozenset({"ProxyType", "CallableProxyType", "ProxyTypes"})


def identity_reason(node: ast.AST, names: set[str], subject: str) -> str | None:
    """The unsafe reason when ``node`` looks at a name in ``names`` by identity
    (``type(llm) is LLM``, ``id(llm)``, ``llm is other``, ``isinstance(llm,
    weakref.ProxyType)``): after the fix it holds a proxy. ``isinstance(llm, LLM)`` is
    not identity (:data:`CLASS_CALLS`), nor is ``llm is None``. ``subject`` says what the
    names hold in the reason (``"the engine"``)."""
    if isinstance(node, ast.Call) and any(
            isinstance(a, ast.Name) and a.id in names for a in node.args):
        name = last_name(node.func)
        if name in IDENTITY_CALLS or (name in CLASS_CALLS and any(
                isinstance(n, (ast.Name, ast.Attribute)) and last_name(n) in _PROXY_TYPES
                for a in node.args[1:] for n in walk_breadth(a))):
            return f"`{name}()` on {subject} sees a `weakref.proxy`, not the engine"
    if isinstance(node, ast.Compare):
        operands = (node.left, *node.comparators)
        for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
            if isinstance(op, (ast.Is, ast.IsNot)) and any(
                    isinstance(x, ast.Name) and x.id in names and not _is_none(y)
                    for x, y in ((left, right), (right, left))):
                return f"identity checks (`is`) on {subject} see a `weakref.proxy`"
    return None


def _is_none(node: ast.expr) -> bool:
    """True for the constant ``None``: a ``weakref.proxy`` is no more ``None`` than the
    engine it stands for, so ``llm is None`` and ``llm is not None`` answer the same."""
    return isinstance(node, ast.Constant) and node.value is None


def identity_problem(segment: list[ast.stmt], names: set[str]) -> str | None:
    """The unsafe reason when ``segment`` compares what may be one of the group's engines
    by identity (see :func:`identity_reason`). ``names`` are the names that may hold an
    engine of the group."""
    for stmt in segment:
        for node in walk_breadth(stmt):
            reason = identity_reason(node, names, "an engine of the group")
            if reason is not None:
                return reason
    return None


def inside_loop(module: ModuleAnalysis, stmt: ast.stmt) -> bool:
    """Whether ``stmt`` runs in a loop of its own function (directly or nested in an
    ``if``/``try``/``with`` of the loop body): statements before it in its block then run
    again after it, in the next iteration."""
    parent = module.parent(stmt)
    while parent is not None and not isinstance(parent, _SCOPES):
        if isinstance(parent, _LOOPS):
            return True
        parent = module.parent(parent)
    return False


def after_loop_cleanup(module: ModuleAnalysis, stmt: ast.stmt,
                       is_generic_cleanup: Callable[[ast.stmt], bool]) -> set[int]:
    """Shape 5: start lines of the generic cleanup (``gc.collect()``, ``empty_cache()``
    ...: ``is_generic_cleanup``) right after the loop whose body builds the engine at
    ``stmt``, when that loop builds no other engine: each iteration's runner already did
    it, so it goes with the rewrite."""
    loop = module.parent(stmt)
    if not isinstance(loop, _LOOPS) or len(_engine_calls(module, loop)) != 1:
        return set()
    holder = module.parent(loop)
    block = next((b for b in (getattr(holder, a, None) for a in ("body", "orelse",
                                                                 "finalbody"))
                  if isinstance(b, list) and any(s is loop for s in b)), None)
    if block is None:
        return set()
    out: set[int] = set()
    for later in block[next(i for i, s in enumerate(block) if s is loop) + 1:]:
        if not is_generic_cleanup(later):
            break
        out.add(later.lineno)
    return out


def _binds_first(module: ModuleAnalysis, block: list[ast.stmt], name: str) -> bool:
    """Whether every path through ``block`` binds ``name`` (a plain assignment that does
    not read it, an ``if`` whose branches both do, or a runner's with-block, which never
    swallows an exception, whose body does) before anything else mentions it."""
    for stmt in block:
        if name not in _names(stmt):
            continue
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            return any(t.id == name for t in stmt.targets  # type: ignore[attr-defined]
                       ) and name not in _names(stmt.value)
        if isinstance(stmt, ast.If) and name not in _names(stmt.test):
            return _binds_first(module, stmt.body, name) and bool(stmt.orelse) and \
                _binds_first(module, stmt.orelse, name)
        if isinstance(stmt, ast.With) and all(
                module.is_runner_call(item.context_expr) and item.optional_vars is not None
                and name not in _names(item.optional_vars) and name not in _names(
                    item.context_expr) for item in stmt.items):
            return _binds_first(module, stmt.body, name)
        return False
    return True


def other_branch_statements(module: ModuleAnalysis, stmt: ast.stmt,
                            name: str) -> list[ast.stmt]:
    """Shape 5: the statements of the other branches of each ``if`` around ``stmt`` that
    bind ``name`` before they read it (``if a: llm = LLM(x) ... else: llm = LLM(y) ...``).

    Their reads and rebindings of ``name`` see their own binding, on every path and in
    every iteration of a loop around the ``if``, so they are not uses of the engine built
    by ``stmt`` and do not keep its block from being planned.
    """
    out: list[ast.stmt] = []
    node: ast.AST = stmt
    parent = module.parent(node)
    while parent is not None and not isinstance(parent, _SCOPES):
        if isinstance(parent, ast.If):
            if any(s is node for s in parent.body):
                other = parent.orelse
            elif any(s is node for s in parent.orelse):
                other = parent.body
            else:
                other = []
            if other and _binds_first(module, other, name):
                out.extend(other)
        node, parent = parent, module.parent(parent)
    return out


@dataclass(frozen=True)
class FactoryParts:
    """What the factory-fixture fix (shape 6) rewrites; the planner turns it into a plan.

    Attributes:
        shape: the :class:`GroupShape` (kind ``"factory"``, ``statement`` the nested
            ``def``, ``container`` its name).
        fixture: the fixture that defines the factory.
        end_line: last line of the fixture's body (the ``return``).
        remove_lines: start lines of the finalizer statements in the factory.
    """

    shape: GroupShape
    fixture: FunctionInfo
    end_line: int
    remove_lines: frozenset[int]


def factory_fixture(module: ModuleAnalysis, call: ast.Call, stmt: ast.stmt,
                    func: FunctionInfo, is_finalizer: Callable[[ast.stmt, set[str]], bool],
                    ) -> FactoryParts | str | None:
    """Shape 6: ``call`` is built by a factory nested in a fixture.

    Recognised: ``func`` is a ``def`` directly in the body of a fixture that is no
    generator and ends with ``return <that def's name>`` (its only ``return``); in the
    factory the engine is bound (``llm = LLM(...)``) and each other statement naming it is
    a finalizer shutting it down (``is_finalizer``: ``request.addfinalizer(...)``) or the
    final ``return llm``; or the factory is ``return LLM(...)`` alone.

    Returns:
        The :class:`FactoryParts`; a reason string when the function is such a factory but
        its body is not one of these shapes (no fix); ``None`` when it is no factory.
    """
    fixture = func.parent
    node = func.node
    if fixture is None or fixture.kind is not FunctionKind.FIXTURE or not any(
            s is node for s in fixture.node.body):
        return None
    body = fixture.node.body
    last = body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)
            and last.value.id == node.name):
        return None
    own = module.nodes_of(fixture)
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own) or sum(
            isinstance(n, ast.Return) for n in own) != 1:
        return "the factory fixture returns on other paths or is a generator already"
    shape = GroupShape("factory", node, node.name, _free_name(fixture.node, "stack"))
    end = last.end_lineno or last.lineno
    if isinstance(stmt, ast.Return) and stmt.value is call and node.body[-1] is stmt:
        return FactoryParts(shape, fixture, end, frozenset())
    bound = stmt.targets[0].id if isinstance(stmt, ast.Assign) and stmt.value is call and \
        len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) else None
    if bound is None or not any(s is stmt for s in node.body):
        return "the factory's engine is not bound to one name in its body"
    tail = node.body[-1]
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in module.nodes_of(func)):
        return ("the factory is a generator (it yields its engine and cleans up after "
                "it), which no fix rewrites")
    if not (isinstance(tail, ast.Return) and isinstance(tail.value, ast.Name)
            and tail.value.id == bound):
        return "the factory does not end with `return` of its engine"
    remove: set[int] = set()
    for other in node.body:
        if other is stmt or other is tail or bound not in _names(other):
            continue
        if is_finalizer(other, {bound}):
            remove.add(other.lineno)
            continue
        return "the factory uses its engine in ways the fix does not follow"
    if sum(isinstance(n, ast.Return) for n in module.nodes_of(func)) != 1:
        return "the factory returns on other paths"
    return FactoryParts(shape, fixture, end, frozenset(remove))


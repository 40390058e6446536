"""Engines kept on an attribute (or a global) between a set-up and its hand cleanup: what
the hand cleanup of such a stored engine is, where its run of statements lies, how the
readers of the attribute would see the engine's proxy, and the shape of a generator fixture
that stores its engine on an attribute.

The fixture's shape, as class-level sharing in pytest suites has it::

    @pytest.fixture(scope="class", autouse=True)
    def engine(self, request):
        request.cls.llm = LLM(MODEL)
        yield
        del request.cls.llm
        gc.collect()

Its fix (:meth:`lint_gpu_tests.fixplan.planner.Planner.engine_plan`) is a with-block over the
runner from the store to the statement before the cleanup run (the fixture's ``yield`` among
them), the store binding the attribute to the engine's proxy; the cleanup run goes, so the
runner's teardown runs where the cleanup began::

    def engine(self, request):
        with VllmRunner(MODEL) as runner:
            request.cls.llm = weakref.proxy(runner.llm)
            yield

An xunit set-up's store (:mod:`lint_gpu_tests.fixplan.xunit`) uses the same pieces: the
cleanup run of its teardown, and the readers of the attribute.

An engine is spelled here as its dotted target: ``"request.cls.llm"``, ``"cls.llm"``, or a
global's name (``"llm"``).
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

from lint_gpu_tests.analysis.analysis import FunctionInfo, FunctionKind, ModuleAnalysis
from lint_gpu_tests.fixplan.groups import CLASS_CALLS, IDENTITY_CALLS
from lint_gpu_tests.fixplan.safety import hash_reason
from lint_gpu_tests.ftypes import Blocked
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import dotted_name, last_name, parameter_names

#: The attributes of pytest's ``request`` that a fixture stores an engine on for the tests
#: of its scope (``request.cls.llm``, ``request.module.engine``, ``request.instance.llm``).
REQUEST_HOLDERS = frozenset({"cls", "module", "instance"})


def holds(node: ast.AST, spelled: str) -> bool:
    """True when ``node`` is the dotted target ``spelled`` (``cls.llm``, or a global's
    name)."""
    return isinstance(node, (ast.Name, ast.Attribute)) and dotted_name(node) == spelled


def deletes(stmt: ast.stmt, spelled: str) -> bool:
    """True when ``stmt`` is ``del <spelled>`` (among others)."""
    return isinstance(stmt, ast.Delete) and any(holds(t, spelled) for t in stmt.targets)


def clears(stmt: ast.stmt, spelled: str) -> bool:
    """True when ``stmt`` is ``<spelled> = None``."""
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
        isinstance(stmt.value, ast.Constant) and stmt.value.value is None and \
        holds(stmt.targets[0], spelled)


def cleans(module: ModuleAnalysis, stmt: ast.stmt, spelled: str) -> bool:
    """True when ``stmt`` is hand cleanup of the engine at ``spelled`` or of the process:
    ``del`` of it alone, its ``shutdown()``/``close()`` (or its engine core's), or a cleanup
    call GPU004 knows given nothing but the target's first name."""
    if isinstance(stmt, ast.Delete):
        return all(holds(t, spelled) for t in stmt.targets)
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("shutdown", "close"):
        root: ast.AST = func.value
        while isinstance(root, ast.Attribute) and not holds(root, spelled):
            root = root.value
        if holds(root, spelled):
            return not call.args
    kind = module.cleanup_call_kind(call)
    head = spelled.partition(".")[0]
    return kind is not None and kind != "engine_core.shutdown()" and not any(
        isinstance(n, ast.Name) and n.id != head for a in call.args for n in walk_breadth(a))


def cleanup_run(module: ModuleAnalysis, body: Sequence[ast.stmt], spelled: str,
                where: str) -> list[int] | str:
    """The lines of the hand cleanup of ``spelled`` in ``body`` (a teardown's statements, or
    those after a fixture's ``yield``): one run of statements directly in it, after which no
    statement reads the target; or why there is none (``where`` names the function in the
    reason, ``"`teardown_class()`"``). An assignment of ``None`` to the target within or
    after the run stays (the target ends as it did); a line of cleanup statements alone
    (``del cls.llm; gc.collect()``) goes whole."""
    cleaned = [cleans(module, s, spelled) for s in body]
    found = [i for i, c in enumerate(cleaned) if c]
    cleared = {i for i, s in enumerate(body) if clears(s, spelled)}
    if not found:
        return f"{where} holds no cleanup of `{spelled}` of its own"
    mixed = next((s for s, c in zip(body, cleaned, strict=True)
                  if not c and deletes(s, spelled)), None)
    if mixed is not None:
        return (f"{where} deletes `{spelled}` together with other values (line "
                f"{mixed.lineno}): that statement is not the engine's cleanup alone")
    first, last = found[0], found[-1]
    if any(i not in found and i not in cleared and not isinstance(body[i], ast.Global)
           for i in range(first, last + 1)):
        return (f"the cleanup in {where} is not one run of statements: the runner's "
                "teardown would move the cleanup after the statements between")
    spans = [(body[i].lineno, body[i].end_lineno or body[i].lineno) for i in found]
    if any(start <= (s.end_lineno or s.lineno) and s.lineno <= end
           for j, s in enumerate(body) if j not in found for start, end in spans):
        return (f"a cleanup statement of {where} shares its line with a statement that is "
                "not cleanup")
    read = read_after(body[last + 1:], spelled)
    if read is not None:
        return f"{where} reads `{spelled}` after its cleanup (line {read})"
    nested = [n for s in body for n in walk_breadth(s)
              if n is not s and isinstance(n, ast.stmt) and deletes(n, spelled)]
    if nested:
        return f"{where} deletes `{spelled}` inside a compound statement (line {nested[0].lineno})"
    return [body[i].lineno for i in found]


def read_after(statements: Sequence[ast.stmt], spelled: str) -> int | None:
    """The line of the first read of the target ``spelled`` in ``statements`` (run after
    its cleanup): through the target itself, or by its name as a string
    (``hasattr(self, "llm")``, ``"llm" not in globals()``), which sees the proxy the fix
    leaves where the cleanup had deleted it; else ``None``."""
    name = spelled.rpartition(".")[2]
    for stmt in statements:
        for n in walk_breadth(stmt):
            if holds(n, spelled) and isinstance(getattr(n, "ctx", None), ast.Load) or \
                    isinstance(n, ast.Constant) and n.value == name:
                return getattr(n, "lineno", stmt.lineno)
    return None


def proxy_risks(module: ModuleAnalysis, scope: ast.AST, attribute: str, removed: set[int],
                *, global_name: bool = False) -> list[str] | Blocked:
    """Why the uses in ``scope`` of an engine held on ``attribute`` (``<any>.<attribute>``,
    or with ``global_name`` the module's global ``attribute``) may behave otherwise on a
    weak proxy (an identity check, a weak reference, a value handed whole to a call or
    stored): the fix is unsafe then; or, where a use hashes it (a set member, a dict key,
    ``hash()``: a proxy is unhashable), why there is no fix. The uses in the statements the
    fix removes (``removed``, their lines) do not count."""
    out: list[str] = []
    for node in walk_breadth(scope):
        if not global_name and isinstance(node, ast.Attribute) and \
                node.attr == attribute and isinstance(node.value, ast.Name):
            spelled = f"`{node.value.id}.{attribute}`"
        elif global_name and isinstance(node, ast.Name) and node.id == attribute and \
                not _local_in(module, node):
            spelled = f"`{attribute}`"
        else:
            continue
        if not isinstance(node.ctx, ast.Load) or module.statement_of(node).lineno in removed:
            continue
        parent = module.parent(node)
        if isinstance(parent, ast.Attribute):
            continue  # a read through it (``self.llm.generate``) or a longer chain
        if parent is not None and hash_reason(parent, functools.partial(operator.is_, node),
                                              (ast.Load, ast.Store, ast.Del)) is not None:
            return Blocked(f"{spelled} is a dict key or set member or is hashed (line "
                           f"{node.lineno}), and the `weakref.proxy` the fix binds is "
                           "unhashable")
        reason: str | None = None
        if isinstance(parent, ast.Call) and node in parent.args and \
                last_name(parent.func) in IDENTITY_CALLS:
            reason = f"`{last_name(parent.func)}()` on {spelled} sees a `weakref.proxy`"
        elif isinstance(parent, ast.Compare) and any(
                isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops) and not any(
                isinstance(o, ast.Constant) and o.value is None
                for o in (parent.left, *parent.comparators)):
            reason = f"identity checks (`is`) on {spelled} see a `weakref.proxy`"
        elif isinstance(parent, (ast.Call, ast.keyword)) and node is not getattr(
                parent, "func", None) and not (isinstance(parent, ast.Call)
                                               and last_name(parent.func) in CLASS_CALLS):
            reason = (f"{spelled} is handed to a call (line {node.lineno}), which gets the "
                      "engine's `weakref.proxy`")
        elif isinstance(parent, (ast.Assign, ast.Return, ast.Yield, ast.Tuple, ast.List,
                                 ast.Dict, ast.Set)):
            reason = (f"{spelled} is stored or handed on (line {node.lineno}) as the engine's "
                      "`weakref.proxy`, which may outlive the teardown")
        if reason is not None and reason not in out:
            out.append(reason)
    return out


def _local_in(module: ModuleAnalysis, node: ast.Name) -> bool:
    """True when the function around ``node`` binds its name as a local of its own (a
    name, not the module's global)."""
    func = module.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return False
    nodes = list(walk_breadth(func))
    return not any(isinstance(n, ast.Global) and node.id in n.names for n in nodes) and (
        any(isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Store)
            for n in nodes) or node.id in parameter_names(func.args, variadic=False))


@dataclass(frozen=True)
class StoredShape:
    """A generator fixture's engine stored on an attribute, as its fix needs it.

    Attributes:
        spelled: the target as written (``request.cls.llm``).
        end: the index, in the fixture's body, of the last statement the with-block holds
            (the one before the cleanup run, or the body's last).
        remove: the lines of the cleanup run after the ``yield``.
        risks: why the readers of the attribute may see the proxy otherwise.
        unwrap: the line of the ``try`` around the ``yield`` whose ``finally`` (the
            cleanup run) goes, the ``try`` giving way to its body.
    """

    spelled: str
    end: int
    remove: set[int] = field(default_factory=set)
    risks: tuple[str, ...] = ()
    unwrap: set[int] = field(default_factory=set)


def engines_built_in(module: ModuleAnalysis, func: FunctionInfo) -> int:
    """How many engines ``func`` builds: its constructions and runner calls (a factory
    helper's calls, where the unit plans its callers on an analysis with the helper among
    the runner classes)."""
    return sum(1 for s in module.engines if s.function is func) + sum(
        1 for r in module.runner_calls if r.function is func)


def stored_target(func: FunctionInfo | None, stmt: ast.stmt, call: ast.Call) -> str | None:
    """The dotted target (``request.cls.llm``, ``self.llm``) when ``stmt`` of the fixture
    ``func`` stores the engine ``call`` builds on an attribute of one of its parameters
    (``request``'s class, module or instance, or ``self``), or the name of a global the
    fixture declares (``global llm``) that it stores it in; else ``None``."""
    if func is None or func.kind is not FunctionKind.FIXTURE or not (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.value is call):
        return None
    target = stmt.targets[0]
    if isinstance(target, ast.Name) and any(
            isinstance(s, ast.Global) and target.id in s.names for s in func.node.body):
        return target.id  # a module's global the fixture declares
    spelled = dotted_name(target) if isinstance(target, ast.Attribute) else None
    if spelled is None:
        return None
    parts = spelled.split(".")
    if parts[0] == "self" and len(parts) == 2 and func.owner_class is not None:
        return spelled
    if len(parts) == 3 and parts[0] in func.params and parts[1] in REQUEST_HOLDERS:
        return spelled
    return None


def _other_store(module: ModuleAnalysis, func: FunctionInfo, stmt: ast.stmt,
                 spelled: str) -> int | None:
    """The line of another assignment or ``del`` of the attribute ``spelled`` ends in: in
    the fixture's class; for a fixture of the module, another store spelled the same
    (``request.cls.llm``); for a module's attribute (``request.module.engine``) or global,
    its global too; the fixture's own ``del`` of it and a module-level ``<name> =
    <constant>`` aside. ``None`` when there is none."""
    attribute = spelled.rpartition(".")[2]
    scope: ast.AST = func.owner_class if func.owner_class is not None else module.tree
    is_global = _is_global(spelled)
    # A fixture of the module storing on ``request.cls`` serves the classes that use it:
    # another class's ``self.llm`` is no store of its attribute; its own spelling is.
    any_receiver = is_global or func.owner_class is not None
    for node in walk_breadth(module.tree if is_global else scope):
        if isinstance(node, ast.Attribute) and node.attr == attribute and \
                not isinstance(node.ctx, ast.Load) and \
                (any_receiver or dotted_name(node) == spelled) and \
                node is not stmt.targets[0]:  # type: ignore[attr-defined]
            own = module.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef)) is func.node
            if not (own and deletes(module.statement_of(node), spelled)):
                return node.lineno
        elif is_global and isinstance(node, ast.Name) and node.id == attribute and \
                not isinstance(node.ctx, ast.Load) and \
                node is not stmt.targets[0]:  # type: ignore[attr-defined]
            own = module.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef)) is func.node
            if not (own and deletes(module.statement_of(node), spelled)) and \
                    rebinds_global(module, node):
                return node.lineno
    return None


def rebinds_global(module: ModuleAnalysis, node: ast.Name) -> bool:
    """True when ``node``, a store or ``del`` of a name, rebinds the module's global of that
    name: at module level, other than as ``<name> = <constant>`` (its first value, before
    any set-up runs), or in a function that declares it ``global``."""
    around = module.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                     ast.ClassDef))
    if around is None:
        at = module.statement_of(node)
        return not (isinstance(at, (ast.Assign, ast.AnnAssign))
                    and isinstance(at.value, ast.Constant))
    return isinstance(around, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(n, ast.Global) and node.id in n.names for n in walk_breadth(around))


def _is_global(spelled: str) -> bool:
    """True when the target ``spelled`` is a module's global: a name, or a module's
    attribute (``request.module.engine``), which its tests read by name."""
    return "." not in spelled or spelled.split(".")[1:2] == ["module"]


def stored_targets(module: ModuleAnalysis, func: FunctionInfo) -> set[str]:
    """The dotted targets (:func:`stored_target`) the fixture ``func`` stores an engine on,
    one it builds or gets from a factory helper: what its ``del`` of one cleans up."""
    if func.kind is not FunctionKind.FIXTURE:
        return set()
    return {spelled for stmt in module.nodes_of(func) if isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Call) and (module.builds_engine(stmt.value) or
                                                      module.factory_called(stmt.value))
            and (spelled := stored_target(func, stmt, stmt.value)) is not None}


def stored_shape(module: ModuleAnalysis, func: FunctionInfo, stmt: ast.stmt,
                 spelled: str) -> StoredShape | Blocked:
    """The with-block's extent for the engine the fixture ``func`` stores at ``spelled``
    (:func:`stored_target`) in ``stmt``, or why no fix writes one. The fixture hands over
    to its tests by a ``yield`` statement of its body after the store, its cleanup run
    after it; or by a ``yield`` in the body of a ``try`` whose ``finally`` is that cleanup
    alone (the ``try`` then gives way to its body)."""
    body = func.node.body
    index = next((i for i, s in enumerate(body) if s is stmt), None)
    if index is None:
        return Blocked(f"the engine is stored on `{spelled}` inside a compound statement")
    if engines_built_in(module, func) != 1:
        return Blocked(f"`{func.name}()` builds several engines")
    yields = [n for n in module.nodes_of(func) if isinstance(n, (ast.Yield, ast.YieldFrom))]
    at = next((i for i, s in enumerate(body) if i > index and _hands_over(s, yields)), None)
    if at is None or len(yields) != 1:
        return Blocked(f"the fixture stores the engine on `{spelled}` and does not hand "
                       "over to its tests by one `yield` statement of its body after that")
    attribute = spelled.rpartition(".")[2]
    elsewhere = _other_store(module, func, stmt, spelled)
    if elsewhere is not None:
        return Blocked(f"`{attribute}` is assigned or deleted elsewhere (line {elsewhere}): "
                       "the with-block would not own what it holds then")
    where = f"`{func.name}()` after its `yield`"
    unwrap: set[int] = set()
    trying = body[at]
    if isinstance(trying, ast.Try):
        if trying.handlers or trying.orelse or not trying.finalbody:
            return Blocked(f"the `yield` of `{func.name}()` is in a `try` with handlers or "
                           "an `else`, or no `finally`")
        run = cleanup_run(module, trying.finalbody, spelled, f"the `finally` of {where}")
        if isinstance(run, str) or len(run) != len(trying.finalbody):
            return Blocked(f"the `finally` around the `yield` of `{func.name}()` holds more "
                           f"than the cleanup of `{spelled}`")
        unwrap = {trying.lineno}
        read = read_after(body[at + 1:], spelled)
        if read is not None:
            return Blocked(f"{where} reads `{spelled}` after its cleanup (line {read})")
        end = at
    else:
        after = body[at + 1:]
        found = cleanup_run(module, after, spelled, where) if after else []
        if isinstance(found, str):
            if any(cleans(module, s, spelled) for s in after) or any(
                    deletes(n, spelled) for s in after for n in walk_breadth(s)
                    if isinstance(n, ast.stmt)):
                return Blocked(found)
            found = []  # no cleanup: the engine lived as long as its holder; the block ends it
        run = found
        end = next(i for i, s in enumerate(body) if s.lineno == run[0]) - 1 if run \
            else len(body) - 1
    scope: ast.AST = func.owner_class if func.owner_class is not None else module.tree
    risks = proxy_risks(module, scope, attribute, set(run))
    # A module's attribute is its global: its tests read it by name.
    by_name = proxy_risks(module, module.tree, attribute, set(run), global_name=True) \
        if _is_global(spelled) else []
    if isinstance(risks, Blocked):
        return risks
    if isinstance(by_name, Blocked):
        return by_name
    handed = yields[0].value if isinstance(yields[0], ast.Yield) else None
    if not _is_global(spelled) and handed is not None and any(
            holds(n, spelled) for n in walk_breadth(handed)):
        # (a global's tests read it by name: ``by_name`` says so)
        risks.append(f"the fixture yields `{spelled}`: its users get the engine's "
                     "`weakref.proxy`")
    return StoredShape(spelled, end, set(run),
                       tuple([*risks, *(r for r in by_name if r not in risks)]), unwrap)


def _hands_over(stmt: ast.stmt, yields: Sequence[ast.AST]) -> bool:
    """True when ``stmt`` is the fixture's ``yield`` statement, or a ``try`` with it
    directly in its body (``yields``: every yield of the fixture)."""
    if isinstance(stmt, ast.Expr):
        return any(stmt.value is y for y in yields)
    return isinstance(stmt, ast.Try) and any(
        isinstance(s, ast.Expr) and any(s.value is y for y in yields) for s in stmt.body)

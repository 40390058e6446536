"""Planning GPU008's fixes: how each hand-made change of a configured environment variable
(found by :func:`lint_gpu_tests.analysis.env_mutations.find_mutations`) becomes
``monkeypatch.setenv``/``delenv`` (:func:`plan_fix`, :func:`env_fix`), applied by
:mod:`lint_gpu_tests.codemods.use_monkeypatch_env`.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from dataclasses import dataclass, replace

from lint_gpu_tests.analysis.analysis import (
    ENV_READ,
    FunctionInfo,
    FunctionKind,
    ModuleAnalysis,
    environment_reads,
    literal_value,
    local_names,
    module_constants,
)
from lint_gpu_tests.analysis.env_mutations import (
    TEARDOWN_OF,
    EnvMutation,
    class_of,
    find_mutations,
    is_unittest_class,
)
from lint_gpu_tests.analysis.mappings import parametrized_values
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import Applicability, FixInfo, FixKind, FixPlan
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import (
    fixture_decorator,
    is_main_guard,
    last_name,
    names_in,
    none_test,
)

#: Calls that open a ``MonkeyPatch`` context (``pytest.MonkeyPatch.context()``,
#: ``monkeypatch.context()``): the name it binds can set variables directly.
CONTEXT_CALL = "context"
MONKEYPATCH = "monkeypatch"
CONTEXT_NAME = "mp"


@dataclass(frozen=True)
class EnvFixPlan(FixPlan):
    """How one mutation is rewritten (computed on the ``ast`` tree; the codemod applies it).

    Attributes:
        fix: the fix information the violation carries.
        receiver: the name the replacement calls go through (``monkeypatch``, ``mp``).
        function_line: line of the owning ``def`` (``ast``'s, the ``def`` keyword).
        add_param: add ``monkeypatch`` to the function's parameters.
        wrap_line: start line of the first statement of the function body that the new
            ``with pytest.MonkeyPatch.context() as mp:`` covers (to the end of the body);
            ``None`` when no block is added.
        statement_line: start line of the mutating statement the codemod replaces.
        prelude: statements inserted before the statement of the function body starting
            at ``prelude_line`` (a ``unittest.TestCase`` method's
            ``mp = pytest.MonkeyPatch()`` and ``self.addCleanup(mp.undo)``).
        prelude_line: see ``prelude``; ``None`` when nothing is inserted.
        needs: imports the rewrite adds (keys of the codemods' ``IMPORTS``).
        fixture: at module level, the name of the module-scoped autouse fixture the change
            moves into (one per module, gathering every such change in order); else ``""``.
        fixture_line: at module level, the start line of the top-level statement the
            fixture is placed before (``0``: at the end of the module).
        pytest_name: at module level, the name the fixture's decorator and
            ``MonkeyPatch`` are reached through (``pytest``, or its alias).
    """

    FIX_KIND = FixKind.USE_MONKEYPATCH_ENV
    fix: FixInfo
    receiver: str = MONKEYPATCH
    function_line: int = 0
    add_param: bool = False
    wrap_line: int | None = None
    statement_line: int = 0
    prelude: tuple[str, ...] = ()
    prelude_line: int | None = None
    needs: tuple[str, ...] = ()
    fixture: str = ""
    fixture_line: int = 0
    pytest_name: str = "pytest"


#: The name of the fixture module-level changes move into (a suffix when it is taken).
MODULE_FIXTURE = "_module_environment"
#: Calls at module level that are evaluated for their arguments only (their own result
#: reads no environment): what is after them is named instead.
_TRANSPARENT_CALLS = frozenset({"dict", "list", "tuple", "set", "frozenset", "range", "str",
                                "int", "float", "bool", "len", "sorted", "enumerate", "zip"})
#: ``unittest.mock``'s patchers: at import they only build the patch, which applies when the
#: test runs; nothing in them is looked into.
_PATCHERS = frozenset({"unittest.mock.patch", "unittest.mock.patch.dict",
                       "unittest.mock.patch.object", "unittest.mock.patch.multiple",
                       "mock.patch", "mock.patch.dict", "mock.patch.object"})
#: Standard-library calls that build a value or a class and read no environment variable.
_TRANSPARENT_QUALIFIED = frozenset({
    "dataclasses.dataclass", "dataclasses.field", "collections.namedtuple",
    "typing.NamedTuple", "typing.TypeVar", "os.path.join", "os.path.dirname",
    "os.path.abspath", "os.path.basename", "pathlib.Path"})


@dataclass(frozen=True)
class _ModuleUnit:
    """The module-level changes that move into one autouse fixture.

    Attributes:
        statements: ids of the statements that move, in source order.
        fixture: the fixture's name.
        fixture_line: see :attr:`EnvFixPlan.fixture_line`.
        needs: imports the fixture needs (``pytest``).
        refusal: why none moves (``""`` when they do).
        staying: the variables a module-level change that stays at import time changes.
        pytest_name: the name ``pytest`` is imported as (``import pytest as pt``).
    """

    statements: frozenset[int]
    staying: frozenset[str] = frozenset()
    fixture: str = ""
    fixture_line: int = 0
    needs: tuple[str, ...] = ()
    refusal: str = ""
    pytest_name: str = "pytest"


# ---------------------------------------------------------------------- fix planning
def plan_fix(module: ModuleAnalysis, mutation: EnvMutation, title: str) -> EnvFixPlan:
    """Decide the fix of one mutation (see the rule's *Fix safety*)."""
    func = mutation.function
    if not mutation.rewritable:
        return EnvFixPlan(FixInfo.none(title, mutation.reason))
    if func is None:
        return _module_plan(module, mutation, title)
    planner = planner_for(module)
    if planner.shares_line(mutation.statement) or planner.on_header_line(mutation.statement):
        return EnvFixPlan(FixInfo.none(title, "it shares its line with another statement"))
    cls = class_of(module, func)
    if func.in_base_class and cls is not None:
        if is_unittest_class(module, cls):
            return _add_cleanup_plan(module, mutation, func, title)
        return EnvFixPlan(FixInfo.none(title, "a method of a class whose bases are not known to "
                                          "be `unittest.TestCase`: no fixture and no "
                                          "`addCleanup` is known to reach it"))
    if func.kind not in (FunctionKind.TEST, FunctionKind.FIXTURE):
        partner = TEARDOWN_OF.get(func.name)
        advice = f"restore the variable in `{partner}`, or set" if partner else "change"
        return EnvFixPlan(FixInfo.none(title, f"pytest passes no fixtures to `{func.name}`: "
                                          f"{advice} it with `monkeypatch` in an autouse "
                                          "fixture"))
    unsafe = mutation.reason
    line = func.node.lineno
    existing = _context_name(module, mutation.statement, func)
    if existing is not None:
        return EnvFixPlan(_fix(title, unsafe), existing, line)
    if func.kind is FunctionKind.TEST or func.fixture_scope in (None, "function"):
        if MONKEYPATCH in func.params:
            return EnvFixPlan(_fix(title, unsafe), MONKEYPATCH, line)
        if MONKEYPATCH in local_names(module, func):
            return EnvFixPlan(FixInfo.none(title, "the function binds a local `monkeypatch`"))
        return EnvFixPlan(_fix(title, unsafe), MONKEYPATCH, line, add_param=True)
    if module.imports.get("pytest") != "pytest":
        return EnvFixPlan(FixInfo.none(title, "`pytest` is not imported as `pytest` for "
                                          "`pytest.MonkeyPatch.context()`"))
    if not any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in module.nodes_of(func)):
        return EnvFixPlan(FixInfo.none(title, f"a {func.fixture_scope}-scoped fixture that "
                                          "returns: a `MonkeyPatch.context()` block would "
                                          "restore the variable before any test runs"))
    if CONTEXT_NAME in local_names(module, func):
        return EnvFixPlan(FixInfo.none(title, f"the fixture binds a local `{CONTEXT_NAME}`"))
    top = _top_statement(module, mutation.statement, func)
    first = min((m.statement for m in find_mutations(module)
                 if m.function is func and m.rewritable),
                key=lambda s: s.lineno, default=mutation.statement)
    wrap_from = min(top.lineno, _top_statement(module, first, func).lineno)
    reason = (f"a {func.fixture_scope}-scoped fixture cannot request the function-scoped "
              "`monkeypatch`: `pytest.MonkeyPatch.context()` restores the variable when the "
              "fixture ends, where before it stayed set for the rest of the session")
    return EnvFixPlan(FixInfo(Applicability.UNSAFE, title,
                              "; ".join(r for r in (reason, unsafe) if r)),
                      CONTEXT_NAME, line, wrap_line=wrap_from)



def _module_plan(module: ModuleAnalysis, mutation: EnvMutation, title: str) -> EnvFixPlan:
    """The fix of a change at a test module's top level: with the module's other such
    changes it moves into a module-scoped autouse fixture (:func:`_module_unit`); unsafe,
    for what ran after it at import time and the modules after it no longer see it."""
    unit = module.derived(_module_unit)
    if id(mutation.statement) not in unit.statements:
        return EnvFixPlan(FixInfo.none(title, _not_moved(module, mutation, unit)))
    reason = "; ".join(r for r in (_import_time_readers(module, mutation), (
        "the variable is now set only while this module's tests run: modules collected "
        "after it, and their tests, no longer see it")) if r)
    return EnvFixPlan(FixInfo(Applicability.UNSAFE, title, reason), CONTEXT_NAME,
                      needs=unit.needs, fixture=unit.fixture, fixture_line=unit.fixture_line,
                      pytest_name=unit.pytest_name)


def _not_moved(module: ModuleAnalysis, mutation: EnvMutation, unit: _ModuleUnit) -> str:
    """Why a module-level change does not move into the fixture (:func:`_module_unit`)."""
    value = _value_problem(module, mutation)[0]
    if value is not None:
        return value
    if mutation.statement not in module.tree.body:
        return _AT_MODULE_LEVEL
    planner = planner_for(module)
    if planner.shares_line(mutation.statement) or planner.on_header_line(mutation.statement):
        return "it shares its line with another statement"
    kept = sorted(unit.staying & set(mutation.names))
    if kept:
        return (f"another change of `{kept[0]}` at module level stays where it is (it cannot "
                "move into a fixture): moving this one would change their order")
    return unit.refusal or _AT_MODULE_LEVEL


_AT_MODULE_LEVEL = ("at module level the setting applies to the whole session; set it in a "
                    "fixture with `monkeypatch`, or in a conftest.py")


def _module_unit(module: ModuleAnalysis) -> _ModuleUnit:
    """Which module-level changes move into the fixture: the plain top-level statements
    (not in an ``if``, ``try``, loop or class) that the codemod rewrites, unless another
    module-level change of one of their variables stays at import time; the fixture's
    name (one no identifier of the module has) and place: where the first of them was,
    after the imports directly following it (they stay together, and ``import pytest``
    among them binds the name the decorator needs). Code after that place stays as it
    was."""
    found = [m for m in find_mutations(module) if m.function is None]
    planner = planner_for(module)
    top = {id(s) for s in module.tree.body}
    moving = [m for m in found if m.rewritable and id(m.statement) in top and not (
        planner.shares_line(m.statement) or planner.on_header_line(m.statement))
        and _value_problem(module, m)[0] is None]
    staying = {n for m in found if m not in moving for n in m.names}
    moving = [m for m in moving if not staying & set(m.names)]
    if not moving:
        return _ModuleUnit(frozenset(), frozenset(staying))
    aliases = sorted(local for local, qualified in module.imports.items()
                     if qualified == "pytest")
    spelled = "pytest" if "pytest" in aliases or not aliases else aliases[0]
    if spelled == "pytest" and "pytest" in module.imports and not aliases:
        return _ModuleUnit(frozenset(), refusal="`pytest` names something else here, and the "
                                                "fixture needs `pytest.fixture`")
    values = set().union(*(names_in(m.statement) for m in moving))
    if CONTEXT_NAME in values:
        return _ModuleUnit(frozenset(), refusal=f"a value uses `{CONTEXT_NAME}`, the name the "
                                                "fixture binds to its `MonkeyPatch`")
    body = module.tree.body
    moved = {id(m.statement) for m in moving}
    index = body.index(moving[0].statement)
    while index < len(body) and (id(body[index]) in moved or isinstance(
            body[index], (ast.Import, ast.ImportFrom))):
        index += 1
    bound = any(isinstance(s, ast.Import) and any(
        a.name == "pytest" and (a.asname or a.name) == spelled for a in s.names)
        for s in body[:index])
    if aliases and not bound:
        return _ModuleUnit(frozenset(), refusal="`pytest` is imported after code that "
                                                "follows the change: the fixture's decorator "
                                                "could not use it")
    name, suffix = MODULE_FIXTURE, 1
    while _may_name(module, name):
        suffix += 1
        name = f"{MODULE_FIXTURE}_{suffix}"
    return _ModuleUnit(frozenset(moved), frozenset(staying), name,
                       body[index].lineno if index < len(body) else 0,
                       () if bound else ("pytest",), pytest_name=spelled)


def _import_time_readers(module: ModuleAnalysis, mutation: EnvMutation) -> str:
    """What runs at import after the statement of ``mutation`` (a top-level statement that
    moves into the fixture; the others that move do not count) and may have read the
    variables it changes: the imports after it, which may read the environment when
    imported, and the calls and reads of ``os.environ`` in module-level code (decorator
    arguments such as ``pytest.mark.skipif``'s, parametrize values, defaults, class
    bodies), which pytest evaluates at collection, before the fixture runs, and the
    ``__main__`` block of a module also run as a script; ``""`` when nothing does."""
    items: list[str] = []
    body = module.tree.body
    moved = module.derived(_module_unit).statements
    for later in body[body.index(mutation.statement) + 1:]:
        if id(later) in moved:
            continue
        if isinstance(later, (ast.Import, ast.ImportFrom)):
            imported = [a.name for a in later.names] if isinstance(later, ast.Import) else \
                ["." * later.level + (later.module or "")]
            items += [f"the import of `{n}` (line {later.lineno})" for n in imported]
            continue
        if isinstance(later, ast.If) and is_main_guard(later):
            items.append(f"the `__main__` block (line {later.lineno}) when the module runs as "
                         "a script, where no fixture runs")
            continue
        items += [f"`{_shorten(_as_written(module, n))}` (line {n.lineno})"  # type: ignore[attr-defined]
                  for n in _import_time_calls(module, later, mutation.names)]
    if not items:
        return ""
    shown = ", ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")
    return (f"code that runs after it at import no longer sees the change, which the "
            f"fixture makes only when the module's first test starts: {shown}")


#: Whitespace after an opening and before a closing bracket, which joining a call's lines
#: leaves (``patch.dict( os.environ, {``).
_OUTER_SPACE = re.compile(r"([(\[{]) ")
_INNER_SPACE = re.compile(r" ([)\]}])")


def _as_written(module: ModuleAnalysis, node: ast.AST) -> str:
    """The source of ``node`` as the module writes it (``ast.unparse`` where the positions
    do not give it)."""
    return ast.get_source_segment(module.text, node) or ast.unparse(node)


def _shorten(code: str) -> str:
    code = _INNER_SPACE.sub(r"\1", _OUTER_SPACE.sub(r"\1", " ".join(code.split())))
    return code if len(code) <= 40 else code[:37] + "..."


def _import_time_calls(module: ModuleAnalysis, stmt: ast.stmt,
                       names: tuple[str, ...]) -> list[ast.AST]:
    """The outermost calls and reads of the environment that run when ``stmt`` (module or
    class level) runs: not in function bodies or lambdas; pytest's decorators
    (``pytest.mark.*``, ``pytest.fixture``, ``pytest.param``), plain builtins
    (:data:`_TRANSPARENT_CALLS`), the record classes of the module (:func:`_record_classes`)
    and changes of the environment are looked into instead; ``unittest.mock``'s patchers
    (:data:`_PATCHERS`) are passed over.
    A read of a variable by a literal name counts when it is one of ``names``; any other
    use of ``os.environ`` counts."""
    constants = module_constants(module)
    records = module.derived(_record_classes)
    out: list[ast.AST] = []
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            stack += reversed([*node.decorator_list, *args.defaults,
                               *(d for d in args.kw_defaults if d is not None)])
            continue
        if isinstance(node, ast.Lambda):
            continue
        key: ast.AST | None = None
        if isinstance(node, ast.Subscript) and module.qualified(node.value) == "os.environ":
            key = node.slice
        elif isinstance(node, ast.Call) and node.args and (
                module.qualified(node.func) == "os.getenv" or (
                    isinstance(node.func, ast.Attribute)
                    and module.qualified(node.func.value) == "os.environ")):
            key = node.args[0]
        if key is not None:
            name = literal_value(key, constants, frozenset())
            if not isinstance(name, str) or name in names:
                out.append(node)
                continue
            if isinstance(node, ast.Call):
                stack += reversed([*node.args[1:], *(k.value for k in node.keywords)])
            continue
        if isinstance(node, ast.Call):
            qualified = module.qualified(node.func) or ""
            if qualified in _PATCHERS:
                continue
            if qualified.split(".")[0] != "pytest" and \
                    qualified not in _TRANSPARENT_QUALIFIED and not (
                    isinstance(node.func, ast.Name) and (node.func.id in _TRANSPARENT_CALLS
                                                         or node.func.id in records)):
                out.append(node)
                continue
            stack += reversed(node.args + [k.value for k in node.keywords])
            continue
        if isinstance(node, (ast.Name, ast.Attribute)) and \
                module.qualified(node) == "os.environ":
            out.append(node)
            continue
        stack += reversed(list(ast.iter_child_nodes(node)))
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]


#: Bases of a record class whose construction runs no code of the module.
_RECORD_BASES = frozenset({"typing.NamedTuple", "typing.TypedDict", "typing_extensions.NamedTuple",
                           "typing_extensions.TypedDict"})


def _record_classes(module: ModuleAnalysis) -> frozenset[str]:
    """The module's top-level classes whose construction runs no code of the module, and so
    reads no environment: a body of fields, constants and its docstring only (no ``def``),
    based on ``NamedTuple``/``TypedDict`` or on nothing, or decorated
    ``@dataclasses.dataclass`` (with or without arguments); a name the module binds again
    is left out."""
    out: set[str] = set()
    bound: dict[str, int] = {}
    for stmt in module.tree.body:
        for node in ast.walk(stmt) if not isinstance(stmt, ast.ClassDef) else [stmt]:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound[node.id] = bound.get(node.id, 0) + 1
        if not isinstance(stmt, ast.ClassDef):
            continue
        bound[stmt.name] = bound.get(stmt.name, 0) + 1
        fields_only = all(isinstance(s, (ast.AnnAssign, ast.Assign, ast.Pass)) or
                          isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                          for s in stmt.body)
        bases = {module.qualified(b) for b in stmt.bases}
        decorators = {module.qualified(d.func if isinstance(d, ast.Call) else d)
                      for d in stmt.decorator_list}
        plain = not stmt.bases and not stmt.keywords and not stmt.decorator_list
        if fields_only and (plain or (bases and bases <= _RECORD_BASES and
                                      not stmt.decorator_list and not stmt.keywords)
                            or (not stmt.bases and not stmt.keywords and
                                decorators == {"dataclasses.dataclass"})):
            out.add(stmt.name)
    return frozenset(n for n in out if bound.get(n) == 1)


def _add_cleanup_plan(module: ModuleAnalysis, mutation: EnvMutation, func: FunctionInfo,
                      title: str) -> EnvFixPlan:
    """The fix of a change in a method of a ``unittest.TestCase``, which no fixture
    reaches: a ``MonkeyPatch`` of its own whose ``undo`` the test case runs as a cleanup
    (``self.addCleanup(mp.undo)``; ``cls.addClassCleanup`` in a classmethod such as
    ``setUpClass``), opened before the function's first change, which it then makes."""
    line = func.node.lineno
    existing = _context_name(module, mutation.statement, func)
    if existing is not None:
        return EnvFixPlan(_fix(title, mutation.reason), existing, line)
    decorators = {last_name(d) for d in func.node.decorator_list}
    if "staticmethod" in decorators or not func.node.args.args:
        return EnvFixPlan(FixInfo.none(title, "a method without `self` or `cls` cannot reach "
                                          "`addCleanup`"))
    owner = func.node.args.args[0].arg
    register = "addClassCleanup" if "classmethod" in decorators else "addCleanup"
    locals_ = local_names(module, func)
    if CONTEXT_NAME in locals_:
        return EnvFixPlan(FixInfo.none(title, f"the function binds a local `{CONTEXT_NAME}`"))
    needs: tuple[str, ...] = ()
    spelled = _may_name(module, "MonkeyPatch")  # else no statement can load the name
    if module.imports.get("pytest") == "pytest":
        factory = "pytest.MonkeyPatch"
    elif module.imports.get("MonkeyPatch") in ("pytest.MonkeyPatch",
                                                "_pytest.monkeypatch.MonkeyPatch"):
        factory = "MonkeyPatch"
    elif "MonkeyPatch" in locals_ or "MonkeyPatch" in module.imports or any(
            (spelled and "MonkeyPatch" in names_in(stmt))
            or getattr(stmt, "name", None) == "MonkeyPatch"
            for stmt in module.tree.body if not isinstance(stmt, (ast.Import, ast.ImportFrom))):
        return EnvFixPlan(FixInfo.none(title, "`MonkeyPatch` names something else here"))
    else:
        factory, needs = "MonkeyPatch", ("MonkeyPatch",)
    first = min((m.statement for m in find_mutations(module)
                 if m.function is func and m.rewritable),
                key=lambda s: s.lineno, default=mutation.statement)
    top = _top_statement(module, first, func)
    return EnvFixPlan(_fix(title, mutation.reason), CONTEXT_NAME, line,
                      prelude=(f"{CONTEXT_NAME} = {factory}()",
                               f"{owner}.{register}({CONTEXT_NAME}.undo)"),
                      prelude_line=top.lineno, needs=needs)


def _may_name(module: ModuleAnalysis, name: str) -> bool:
    """False only when no identifier of ``module`` can be ``name``: a source that does not
    contain it once NFKC-normalised (a non-ASCII one may spell it in characters that
    normalise to it, as Python reads identifiers)."""
    return name in module.text or (not module.text.isascii()
                                   and name in module.derived(_normalised_text))


def _normalised_text(module: ModuleAnalysis) -> str:
    """``module``'s source, NFKC-normalised as Python normalises identifiers."""
    return unicodedata.normalize("NFKC", module.text)


@dataclass(frozen=True)
class UndoPlan(FixPlan):
    """How the changes through a ``pytest.MonkeyPatch()`` that nothing undoes are undone when
    the fixture that makes them ends (:mod:`lint_gpu_tests.codemods.undo_monkeypatch`
    applies it; every change through the instance carries the same plan).

    Attributes:
        fix: the fix information the violation carries.
        function_line: line of the fixture's ``def`` (``ast``'s, the ``def`` keyword).
        receiver: the instance's name (``mp``).
        add_yield: the fixture does not yield: a bare ``yield`` goes before the ``undo()``,
            which makes it a generator fixture handing out ``None``, as its return did.
        before_return: the fixture's body ends with a bare ``return``: what is added goes
            before it.
    """

    FIX_KIND = FixKind.UNDO_MONKEYPATCH
    fix: FixInfo
    function_line: int = 0
    receiver: str = ""
    add_yield: bool = False
    before_return: bool = False


def undo_fix(module: ModuleAnalysis, mutation: EnvMutation) -> FixInfo:
    """The fix of a change through a ``pytest.MonkeyPatch()`` bound in a fixture that
    nothing undoes (:attr:`EnvMutation.patcher`): ``<mp>.undo()`` at the end of the
    fixture's body (after a ``yield`` added where it has none), so the instance is undone
    at the fixture's teardown. Safe in a session-scoped fixture (the variables stay set for
    every test, as before) and in a function-scoped one but where another function reads
    a variable (:func:`_read_problem`); unsafe in a class-, module-, package- or dynamically
    scoped one (later modules no longer see the change). None in a test (no teardown runs
    code after a failure), for an ``async`` fixture, one that returns a value or before its
    end (a bare ``return`` ending it is kept after what the fix adds) or yields more than
    once, or a name bound more than once or other than by a statement of the fixture's own
    body (``undo()`` at its end would find it unbound)."""
    func = mutation.function
    name = mutation.patcher
    title = f"Undo `{name}` when the fixture ends"
    if func is None or func.kind is not FunctionKind.FIXTURE or not name.isidentifier():
        return FixInfo.none(title, mutation.reason)
    if isinstance(func.node, ast.AsyncFunctionDef):
        return FixInfo.none(title, f"{mutation.reason} (an `async` fixture is not rewritten)")
    nodes = module.nodes_of(func)
    yields = [n for n in nodes if isinstance(n, (ast.Yield, ast.YieldFrom))]
    binds = [n for n in walk_breadth(func.node) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Store)]
    body = func.node.body
    last = body[-1]
    returns = [n for n in nodes if isinstance(n, ast.Return)]
    problem = ""
    if any(r is not last or r.value is not None for r in returns):
        problem = "the fixture returns before its end or returns a value"
    elif len(yields) > 1:
        problem = "the fixture yields more than once"
    elif len(binds) != 1 or not any(isinstance(s, ast.Assign) and binds[0] in s.targets
                                    for s in body):
        problem = f"the fixture binds `{name}` more than once or inside a block"
    if problem:
        return FixInfo.none(title, f"{mutation.reason}; {problem}, so `{name}.undo()` at its "
                                   "end might not run")
    scope = func.fixture_scope or "function"
    if scope == "session":
        fix = FixInfo(Applicability.SAFE, title)
    elif scope == "function":
        read = _read_problem(module, mutation)
        fix = FixInfo(Applicability.UNSAFE, title, read) if read else \
            FixInfo(Applicability.SAFE, title)
    else:
        fix = FixInfo(Applicability.UNSAFE, title,
                      f"a {scope}-scoped fixture: `{name}.undo()` restores the variables "
                      "when it ends, where before they stayed set for the rest of the session")
    plan = UndoPlan(fix, func.node.lineno, name, add_yield=not yields,
                    before_return=bool(returns))
    return replace(fix, kind=FixKind.UNDO_MONKEYPATCH, plan=plan)


def env_fix(module: ModuleAnalysis, mutation: EnvMutation, title: str) -> FixInfo:
    """The fix of ``mutation`` that GPU008 reports (:func:`plan_fix`), carrying its plan for
    the codemod when there is one."""
    if mutation.patcher:
        return undo_fix(module, mutation)
    plan = plan_fix(module, mutation, title)
    if not plan.fix.available:
        return plan.fix
    fix = plan.fix
    value, risky = _value_problem(module, mutation)
    if value is not None:
        return FixInfo.none(title, value)
    # At module level the fixture covers every function of the module (its reasons say
    # what no longer sees the change).
    read = _read_problem(module, mutation) if mutation.function is not None else ""
    reasons = [r for r in (fix.reason, risky, read) if r]
    if reasons:
        fix = FixInfo(Applicability.UNSAFE, title, "; ".join(reasons))
    return replace(fix, kind=FixKind.USE_MONKEYPATCH_ENV,
                   plan=replace(plan, fix=fix, statement_line=mutation.statement.lineno))


#: ``str`` methods whose result is a string.
_STR_METHODS = frozenset({"format", "join", "lower", "upper", "strip", "lstrip", "rstrip",
                          "replace", "removeprefix", "removesuffix", "title"})


def _is_str(module: ModuleAnalysis, func: FunctionInfo | None, node: ast.AST,
            depth: int = 0) -> bool | None:
    """Whether ``node`` (in ``func``) is statically a ``str`` (``True``), statically
    something else (``False``), or known only at run time (``None``). A parameter counts
    by the values ``@pytest.mark.parametrize`` gives it; a local name bound only to reads
    of the environment is a string where each read is one (:func:`_read_is_str`) or where
    ``node`` runs only after a test that the name is not ``None``
    (:func:`_tested_not_none`), else known only at run time (``None`` when unset)."""
    if depth > 4:
        return None
    if isinstance(node, ast.JoinedStr):
        return True
    reads = module.derived(_read_ids)
    if id(node) in reads:
        return True if isinstance(node, ast.expr) and _read_is_str(node) else None
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and \
            _is_str(module, func, node.values[-1], depth + 1):
        # ``old or "0"``: a string unless a value before the last is neither a string nor
        # ``None``; a read of the environment (or a name bound to one) is one of the two.
        if all(id(v) in reads or _is_str(module, func, v, depth + 1) or
               isinstance(v, ast.Name) and _bound_to_reads(module, func, v.id, reads)
               for v in node.values[:-1]):
            return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return True if _is_str(module, func, node.left, depth + 1) else None
    if isinstance(node, ast.IfExp):
        branches = {_is_str(module, func, node.body, depth + 1),
                    _is_str(module, func, node.orelse, depth + 1)}
        return branches.pop() if len(branches) == 1 else (None if None in branches else False)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "str":
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS and \
                _is_str(module, func, node.func.value, depth + 1):
            return True
        return None
    if isinstance(node, ast.Name) and func is not None and node.id in func.params:
        values = parametrized_values(module, func, node.id)
        if not values:
            return None
        verdicts = {_is_str(module, func, v, depth + 1) for v in values}
        return False if False in verdicts else (None if None in verdicts else True)
    if isinstance(node, ast.Name) and func is not None:
        stores = _stores_of(module, func, node.id)
        if stores and all(id(n.value) in reads for n in stores):
            if all(_read_is_str(n.value) for n in stores) or \
                    _tested_not_none(module, node, node.id):
                return True
            return None
        if stores and all(_is_str(module, func, n.value, depth + 1) for n in stores):
            return True  # ``old = os.environ.get(X) or "0"``
    if isinstance(node, (ast.Constant, ast.Name, ast.List, ast.Tuple, ast.Set, ast.Dict,
                         ast.UnaryOp)):
        value = literal_value(node, module_constants(module), local_names(module, func))
        if value is None:
            is_none = isinstance(node, ast.Constant) and node.value is None
            return False if is_none or isinstance(node, (ast.List, ast.Tuple, ast.Set,
                                                         ast.Dict)) else None
        return isinstance(value, str)
    return None


def _read_is_str(read: ast.expr) -> bool:
    """Whether the environment read ``read`` gives a ``str`` on every path: a subscript
    (``os.environ["X"]``, which raises when unset), or ``.get``/``getenv`` with a string
    default (``os.environ.get("X", "")``); a read with no default gives ``None`` when the
    variable is unset."""
    if isinstance(read, ast.Subscript):
        return True
    return isinstance(read, ast.Call) and len(read.args) == 2 and \
        isinstance(read.args[1], ast.Constant) and isinstance(read.args[1].value, str) or \
        isinstance(read, ast.Call) and any(
            k.arg == "default" and isinstance(k.value, ast.Constant)
            and isinstance(k.value.value, str) for k in read.keywords)


def _read_ids(module: ModuleAnalysis) -> frozenset[int]:
    """The ids of the nodes that read the environment (:func:`environment_reads`), once per
    analysis: :func:`_is_str` asks at every level of its recursion."""
    return frozenset(id(n) for nodes in environment_reads(module).values() for n in nodes)


def _stores_of(module: ModuleAnalysis, func: FunctionInfo, name: str) -> list[ast.Assign]:
    """The assignments of ``func`` that bind ``name`` (as one of their targets)."""
    return [n for n in module.nodes_of(func) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in n.targets)]


def _bound_to_reads(module: ModuleAnalysis, func: FunctionInfo | None, name: str,
                    reads: frozenset[int]) -> bool:
    """Whether ``func`` binds ``name`` only to reads of the environment (``reads``: their
    nodes' ids), which give a string or ``None``."""
    if func is None:
        return False
    stores = _stores_of(module, func, name)
    return bool(stores) and all(id(n.value) in reads for n in stores)


def _tested_not_none(module: ModuleAnalysis, node: ast.AST, name: str) -> bool:
    """Whether ``node`` only runs where ``name`` is not ``None``: in the body of ``if name:``
    or ``if name is not None:``, in the ``else`` of ``if name is None:`` or ``if not
    name:``, or after such an ``if`` (no ``else``) whose body leaves the block (``return``,
    ``raise``, ``continue``, ``break``)."""
    child, current = node, module.parent(node)
    while current is not None:
        if isinstance(current, ast.If):
            kind = none_test(current.test, name)
            if kind == "some" and any(child is s for s in current.body) or \
                    kind == "none" and any(child is s for s in current.orelse):
                return True
        for field in ("body", "orelse", "finalbody"):
            block = getattr(current, field, None)
            if isinstance(block, list) and any(child is s for s in block):
                index = next(i for i, s in enumerate(block) if s is child)
                if any(isinstance(s, ast.If) and not s.orelse and s.body and
                       none_test(s.test, name) == "none" and
                       isinstance(s.body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))
                       for s in block[:index]):
                    return True
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
        child, current = current, module.parent(current)
    return False


def _set_values(mutation: EnvMutation) -> list[ast.expr]:
    """The values ``mutation`` sets (none for a removal)."""
    node = mutation.node
    if mutation.removes:
        return []
    if isinstance(node, ast.Assign):
        return [node.value]
    if not isinstance(node, ast.Call):
        return []
    method = last_name(node.func)
    if method == "update":
        out = [k.value for k in node.keywords]
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                out += arg.values
            elif isinstance(arg, ast.Call):
                out += [k.value for k in arg.keywords]
        return out
    return node.args[1:2]


def _value_problem(module: ModuleAnalysis, mutation: EnvMutation) -> tuple[str | None, str]:
    """``(reason there is no fix, reason the fix is unsafe)`` from the values ``mutation``
    sets: ``os.environ`` takes only strings (anything else raises ``TypeError``), where
    ``monkeypatch.setenv`` converts any value with a warning, so the test would go on."""
    unknown: list[str] = []
    for value in _set_values(mutation):
        verdict = _is_str(module, mutation.function, value)
        code = ast.unparse(value)
        if verdict is False:
            return (f"`{code}` is not a string: setting it raises `TypeError` today, where "
                    "`monkeypatch.setenv` would convert it (with a warning) and the test "
                    "would go on"), ""
        if verdict is None:
            unknown.append(f"`{code}`")
    if not unknown:
        return None, ""
    return None, (f"{', '.join(unknown)} may not be a string: the environment takes only "
                  "strings (anything else raises `TypeError`), where `monkeypatch.setenv` "
                  "converts any value (with a warning)")


def _within_change(module: ModuleAnalysis, func: FunctionInfo,
                   reader: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``reader`` runs while the change ``func`` makes holds, before the fix and
    after it: a method of the class whose set-up ``func`` is, a function requesting the
    fixture ``func`` (any function of the module when it is autouse)."""
    if func.kind is FunctionKind.FIXTURE:
        deco = fixture_decorator(func.node)
        if isinstance(deco, ast.Call) and any(
                k.arg == "autouse" and isinstance(k.value, ast.Constant) and k.value.value
                for k in deco.keywords):
            return True
        return func.name in {a.arg for a in (*reader.args.posonlyargs, *reader.args.args,
                                             *reader.args.kwonlyargs)}
    return func.name in TEARDOWN_OF and func.owner_class is not None and \
        module.parent(reader) is func.owner_class


def _read_problem(module: ModuleAnalysis, mutation: EnvMutation) -> str:
    """Why ending the leak changes what a reader sees: a function of the module or of a
    conftest.py above it reads a changed variable by name; else ``""``. Not a reader: the
    code after the change in its own function (it sees the same value either way), the
    whole function when it changes the variable again (it restores what it saved: a run
    of it again does not see the change either), and what runs while the change holds
    either way: the methods of the class whose set-up makes it, the tests and fixtures
    that request the fixture that makes it (every function of the module for an autouse
    fixture)."""
    func = mutation.function
    owner = func.node if func is not None else None
    after = mutation.statement.end_lineno or mutation.statement.lineno
    reads = environment_reads(module)
    for name in mutation.names:
        restores = any(m.function is func and m.statement is not mutation.statement
                       and name in m.names for m in find_mutations(module))
        for node in reads.get(name, ()):
            reader = module.parent(node)
            while reader is not None and not isinstance(
                    reader, (ast.FunctionDef, ast.AsyncFunctionDef)):
                reader = module.parent(reader)
            if reader is owner and (restores or node.lineno > after):  # type: ignore[attr-defined]
                continue
            if func is not None and reader is not None and reader is not owner and \
                    _within_change(module, func, reader):
                continue
            where = f"`{reader.name}`" if reader is not None else "a lambda"
            return (f"{where} reads `{name}` (line {node.lineno}), which today sees "  # type: ignore[attr-defined]
                    "what this change leaves behind for the tests after it; `monkeypatch` "
                    "undoes the change when its test ends")
        if ENV_READ + name in module.conftest_entries:
            return (f"a conftest.py above this module reads `{name}`, which today sees what "
                    "this change leaves behind for the tests after it; `monkeypatch` undoes "
                    "the change when its test ends")
    return ""


def _fix(title: str, unsafe: str) -> FixInfo:
    if unsafe:
        return FixInfo(Applicability.UNSAFE, title, unsafe)
    return FixInfo(Applicability.SAFE, title)


def _top_statement(module: ModuleAnalysis, stmt: ast.stmt, func: FunctionInfo) -> ast.stmt:
    """The statement of ``func``'s own body that holds ``stmt``."""
    current: ast.AST = stmt
    while True:
        parent = module.parent(current)
        if parent is func.node or parent is None:
            assert isinstance(current, ast.stmt)
            return current
        current = parent


def _context_name(module: ModuleAnalysis, stmt: ast.stmt, func: FunctionInfo) -> str | None:
    """The name bound by an enclosing ``with ....context() as mp:`` of a MonkeyPatch."""
    current = module.parent(stmt)
    while current is not None and current is not func.node:
        if isinstance(current, (ast.With, ast.AsyncWith)):
            for item in current.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
                        expr.func.attr == CONTEXT_CALL and last_name(expr.func.value) in (
                            "MonkeyPatch", MONKEYPATCH) and \
                        isinstance(item.optional_vars, ast.Name):
                    return item.optional_vars.id
        current = module.parent(current)
    return None

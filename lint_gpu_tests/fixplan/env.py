"""Planning GPU008's fixes: how each hand-made change of a configured environment variable
(found by :func:`lint_gpu_tests.env_mutations.find_mutations`) becomes
``monkeypatch.setenv``/``delenv`` (:func:`plan_fix`, :func:`env_fix`), applied by
:mod:`lint_gpu_tests.codemods.use_monkeypatch_env`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from lint_gpu_tests.analysis import (
    FunctionInfo,
    ModuleAnalysis,
    local_names,
)
from lint_gpu_tests.env_mutations import (
    TEARDOWN_OF,
    EnvMutation,
    class_of,
    find_mutations,
    is_unittest_class,
)
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import Applicability, FixInfo, FixKind
from lint_gpu_tests.syntax import (
    last_name,
    names_in,
)

#: Calls that open a ``MonkeyPatch`` context (``pytest.MonkeyPatch.context()``,
#: ``monkeypatch.context()``): the name it binds can set variables directly.
CONTEXT_CALL = "context"
MONKEYPATCH = "monkeypatch"
CONTEXT_NAME = "mp"


@dataclass(frozen=True)
class EnvFixPlan:
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
    """

    fix: FixInfo
    receiver: str = MONKEYPATCH
    function_line: int = 0
    add_param: bool = False
    wrap_line: int | None = None
    statement_line: int = 0
    prelude: tuple[str, ...] = ()
    prelude_line: int | None = None
    needs: tuple[str, ...] = ()



# ---------------------------------------------------------------------- fix planning
def plan_fix(module: ModuleAnalysis, mutation: EnvMutation, title: str) -> EnvFixPlan:
    """Decide the fix of one mutation (see the rule's *Fix safety*)."""
    func = mutation.function
    if not mutation.rewritable:
        return EnvFixPlan(FixInfo.none(title, mutation.reason))
    if func is None:
        return EnvFixPlan(FixInfo.none(title, "at module level the setting applies to the whole "
                                          "session; set it in a fixture with `monkeypatch`, "
                                          "or in a conftest.py"))
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
    if func.kind not in ("test", "fixture"):
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
    if func.kind == "test" or func.fixture_scope in (None, "function"):
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
    """False only when no identifier of ``module`` can be ``name``: an ASCII source that
    does not contain it (a non-ASCII one may spell it in characters that NFKC-normalise to
    it, as Python reads identifiers)."""
    return name in module.text or not module.text.isascii()


def env_fix(module: ModuleAnalysis, mutation: EnvMutation, title: str) -> FixInfo:
    """The fix of ``mutation`` that GPU008 reports (:func:`plan_fix`), carrying its plan for
    the codemod when there is one."""
    plan = plan_fix(module, mutation, title)
    if not plan.fix.available:
        return plan.fix
    return replace(plan.fix, kind=FixKind.USE_MONKEYPATCH_ENV,
                   plan=replace(plan, statement_line=mutation.statement.lineno))


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

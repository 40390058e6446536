"""GPU005 runner-without-with: a runner built outside a with-statement."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import FixInfo, FixKind
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import last_name, parameter_names
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import hit_at


class RunnerWithoutWith(Rule):
    """Flags ``VllmRunner(...)``/``vllm_runner(...)`` called outside ``with``."""

    code = "GPU005"
    name = "runner-without-with"
    summary = "A runner used outside a with-statement"
    message = "`{runner}(...)` used outside a with-statement; its teardown may never run"
    fix_title = "Wrap in a with-statement"
    fix_kinds = (FixKind.WRAP_RUNNER_IN_WITH,)
    what_it_does = (
        "Checks for calls of the runner fixture or a runner class that are not the context "
        "expression of a `with` (plain, nested, or in a parenthesised group) and not passed "
        "to `ExitStack.enter_context(...)`. A helper that returns the runner for its caller "
        "to enter is allowed, and so is a runner bound to a name that the very next "
        "statement enters (`runner = vllm_runner(...)`, then `with runner as m:` or "
        "`stack.enter_context(runner)`)."
    )
    why_bad = (
        "The runner frees the GPU in `__exit__`. Assigned to a name, it is torn down only if "
        "someone remembers to call `__exit__`, and never when the test fails first."
    )
    fix_safety = (
        "Safe: the with-statement covers the runner's live range, and `del runner` or an "
        "explicit `__exit__` call is removed; a fixture that hands the runner out yields the "
        "runner itself. Unsafe or unavailable for the same escapes as GPU001; none when a "
        "later statement enters the runner (`with runner`, `stack.enter_context(runner)`, "
        "`runner.__enter__()`, through an alias, an item of a container holding it, or a "
        "function of the module entering its parameter), before its name is bound again: "
        "a with-statement around it would enter it twice."
    )
    INVALID = (
        Example(
            title="A runner bound without a with-statement",
            source='''\
def test_generate(vllm_runner):
    runner = vllm_runner("facebook/opt-125m")  # error: GPU005
    assert runner.generate_greedy(["hi"], max_tokens=4)
''',
        ),
    )
    VALID = (
        Example(
            title="with, nested with, a group and an ExitStack",
            source='''\
import contextlib


def test_all(vllm_runner):
    with vllm_runner("a", gpu_memory_utilization=0.4) as first, \\
            vllm_runner("b", gpu_memory_utilization=0.4) as second:
        assert first and second
    with (
        vllm_runner("c") as third,
    ):
        assert third
    with contextlib.ExitStack() as stack:
        fourth = stack.enter_context(vllm_runner("d"))
        assert fourth
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        planner = planner_for(module)
        for call in module.runner_calls:
            if call.context != "bare" or call.under_main_guard:
                continue
            func = call.function
            if func is not None and func.in_runner_class:
                continue
            entered = _entered_later(module, call.call)
            if entered == 0:
                continue  # ``runner = vllm_runner(...)`` then ``with runner as m:`` at once
            plan = planner.runner_plan(call)
            fix = plan.fix_info(self.fix_title) if isinstance(plan, WrapPlan) else plan
            if entered is not None:
                fix = FixInfo.none(self.fix_title, (
                    f"the runner is entered later (line {entered}): a with-statement around "
                    "its construction would enter it twice"))
            name = last_name(call.call.func) or module.config.runner_fixture
            yield hit_at(call.call, self.message.format(runner=name), fix)


def _entered_later(module: ModuleAnalysis, call: ast.Call) -> int | None:
    """For a runner ``call`` bound by its statement (``runner = vllm_runner(...)``, or held
    in what the statement binds: ``runners = (vllm_runner(...),)``), whether a later
    statement of the same function enters it: a ``with``, ``enter_context`` or
    ``__enter__()`` of a name holding it (an alias ``r2 = runner`` too, or an item or
    attribute of it), or a call handing it to a function of the module that enters its
    parameter; the names' uses end where the statement's own name is bound again. ``0``
    when the runner is bound by a plain ``runner = ...`` and the statement right after, in
    the same block, enters it (``with runner as m:``, ``stack.enter_context(runner)``:
    before anything else runs); else the line of the first such statement, ``None`` when
    none does."""
    stmt = module.statement_of(call)
    if not isinstance(stmt, ast.Assign):
        return None
    held = {n.id for t in stmt.targets for n in walk_breadth(t)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    scope = module.enclosing(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    if scope is None or not held:
        return None
    start = (stmt.lineno, stmt.col_offset)
    later = [n for n in walk_breadth(scope) if (getattr(n, "lineno", 0),
                                               getattr(n, "col_offset", 0)) > start]
    # Where the statement's own names are bound again (``runner = vllm_runner(...)`` once
    # more): what is entered after that is another runner.
    rebound = min(((n.lineno, n.col_offset) for n in later if isinstance(n, ast.Name)
                   and n.id in held and isinstance(n.ctx, ast.Store)), default=None)
    if rebound is not None:
        later = [n for n in later if (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))
                 < rebound]
    aliases = set(held)
    grown = True
    while grown:
        grown = False
        for node in later:
            if isinstance(node, ast.Assign) and _root(node.value) in aliases:
                new = {t.id for t in node.targets if isinstance(t, ast.Name)} - aliases
                if new:
                    aliases |= new
                    grown = True
    entering = module.derived(_entering_helpers)

    def enters(node: ast.AST) -> bool:
        if _enters_one_of(node, aliases):
            return True
        if not isinstance(node, ast.Call):
            return False
        if isinstance(node.func, ast.Attribute) and node.func.attr == "__enter__":
            return _root(node.func.value) in aliases
        if isinstance(node.func, ast.Name) and node.func.id in entering:
            return any(_root(a) in aliases for a in (*node.args,
                                                     *(k.value for k in node.keywords)))
        return False

    plain = len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and \
        stmt.value is call
    parent = module.parent(stmt)
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(parent, field, None)
        if plain and isinstance(block, list) and any(s is stmt for s in block):
            index = next(i for i, s in enumerate(block) if s is stmt)
            following = block[index + 1] if index + 1 < len(block) else None
            if isinstance(following, (ast.With, ast.AsyncWith)) and enters(following) or \
                    isinstance(following, (ast.Expr, ast.Assign)) and \
                    isinstance(following.value, ast.Call) and \
                    last_name(following.value.func) == "enter_context" and \
                    enters(following.value):
                return 0
    lines = [getattr(node, "lineno", 0) for node in later if enters(node)]
    return min(lines) if lines else None


def _root(node: ast.AST) -> str | None:
    """The name an expression starts from (``r`` of ``r``, ``r[0]``, ``r.inner``)."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _enters_one_of(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` is a ``with`` or an ``enter_context(...)`` call entering what one
    of ``names`` holds (the name itself, an item or an attribute of it)."""
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return any(_root(i.context_expr) in names for i in node.items
                   if not isinstance(i.context_expr, ast.Call))
    return isinstance(node, ast.Call) and last_name(node.func) == "enter_context" and \
        any(_root(a) in names for a in node.args)


def _entering_helpers(module: ModuleAnalysis) -> frozenset[str]:
    """The module-level functions that enter one of their parameters (``with r as m:``,
    ``stack.enter_context(r)``), once per analysis."""
    out: set[str] = set()
    for stmt in module.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = parameter_names(stmt.args, variadic=False)
            if any(_enters_one_of(node, params) for node in walk_breadth(stmt)):
                out.add(stmt.name)
    return frozenset(out)

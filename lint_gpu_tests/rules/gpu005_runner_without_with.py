"""GPU005 runner-without-with: a runner built outside a with-statement."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import FixInfo, FixKind
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import last_name
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
        "statement enters (`runner = vllm_runner(...)`, then `with runner as m:`)."
    )
    why_bad = (
        "The runner frees the GPU in `__exit__`. Assigned to a name, it is torn down only if "
        "someone remembers to call `__exit__`, and never when the test fails first."
    )
    fix_safety = (
        "Safe: the with-statement covers the runner's live range, and `del runner` or an "
        "explicit `__exit__` call is removed; a fixture that hands the runner out yields the "
        "runner itself. Unsafe or unavailable for the same escapes as GPU001; none when a "
        "later statement enters the runner by its name (`with runner`, "
        "`stack.enter_context(runner)`): a with-statement around it would enter it twice."
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
    """For ``runner = vllm_runner(...)`` (``call``), whether a later statement of the same
    function enters ``runner`` itself (``with runner as m:``,
    ``stack.enter_context(runner)``): ``0`` when it is the statement right after, in the
    same block (the runner is entered before anything else runs), the line of the first
    such statement otherwise, ``None`` when none does."""
    stmt = module.statement_of(call)
    if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return None
    name = stmt.targets[0].id
    scope = module.enclosing(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    if scope is None:
        return None

    def enters(node: ast.AST) -> bool:  # a with or enter_context of ``name`` itself
        if isinstance(node, (ast.With, ast.AsyncWith)):
            return any(isinstance(i.context_expr, ast.Name) and i.context_expr.id == name
                       for i in node.items)
        return isinstance(node, ast.Call) and last_name(node.func) == "enter_context" and \
            any(isinstance(a, ast.Name) and a.id == name for a in node.args)

    parent = module.parent(stmt)
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            index = next(i for i, s in enumerate(block) if s is stmt)
            following = block[index + 1] if index + 1 < len(block) else None
            if isinstance(following, (ast.With, ast.AsyncWith)) and enters(following):
                return 0
    lines = [node.lineno for node in walk_breadth(scope)
             if isinstance(node, (ast.With, ast.AsyncWith, ast.Call)) and enters(node)
             and (node.lineno, node.col_offset) > (stmt.lineno, stmt.col_offset)]
    return min(lines) if lines else None

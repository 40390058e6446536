"""GPU005 runner-without-with: a runner built outside a with-statement."""

from __future__ import annotations

from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import FixKind
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
        "to enter is allowed."
    )
    why_bad = (
        "The runner frees the GPU in `__exit__`. Assigned to a name, it is torn down only if "
        "someone remembers to call `__exit__`, and never when the test fails first."
    )
    fix_safety = (
        "Safe: the with-statement covers the runner's live range, and `del runner` or an "
        "explicit `__exit__` call is removed; a fixture that hands the runner out yields the "
        "runner itself. Unsafe or unavailable for the same escapes as GPU001."
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
            plan = planner.runner_plan(call)
            fix = plan.fix_info(self.fix_title) if isinstance(plan, WrapPlan) else plan
            name = last_name(call.call.func) or module.config.runner_fixture
            yield hit_at(call.call, self.message.format(runner=name), fix)

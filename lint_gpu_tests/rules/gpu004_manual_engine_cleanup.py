"""GPU004 manual-engine-cleanup: hand-written cleanup in a function that owns an engine."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace

from lint_gpu_tests.analysis import ModuleAnalysis, last_name
from lint_gpu_tests.classplan import ClassPlan, owner_classes
from lint_gpu_tests.fixplan import WrapPlan, _stmt_block, planner_for
from lint_gpu_tests.ftypes import Applicability, FixInfo
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import (
    covering_fix,
    function_plans,
    hit_at,
    is_isolated,
    none_fix,
)


class ManualEngineCleanup(Rule):
    """Flags ``del llm``, ``gc.collect()``, ``empty_cache()`` ... next to an engine."""

    code = "GPU004"
    name = "manual-engine-cleanup"
    summary = "Manual cleanup in a function that owns an engine"
    message = "Manual cleanup `{what}` in a function that owns an engine"
    fix_title = "Remove the manual cleanup"
    what_it_does = (
        "In a function that owns an engine (builds one, holds a runner, or receives the "
        "`vllm_runner` fixture or an engine fixture defined in the module or in a "
        "`conftest.py` pytest loads for it), checks for "
        "`del <engine>`, `gc.collect()`, `torch.cuda/npu/xpu/hpu/accelerator.empty_cache()`, "
        "`current_platform.empty_cache()`, `cleanup_dist_env_and_memory()`, "
        "`destroy_model_parallel()`, `destroy_distributed_environment()`, "
        "`wait_for_gpu_memory_to_clear(...)`, a direct `engine_core.shutdown()`, and the "
        "names in `cleanup-functions`. Also in the methods of a helper class that owns an "
        "engine (`self.llm = LLM(...)` in `__init__` or a method it calls): `del self.llm` "
        "and the same calls, in its `close()`, `__del__` or any other method, and `del` of "
        "an instance (`del tester`) in the function that builds it."
    )
    why_bad = (
        "`del llm` + `gc.collect()` was measured to leave 5.1 GiB free of 80 GiB while an "
        "explicit engine-core shutdown left 78.7 GiB: partial cleanup looks like it works and "
        "does not. It is also skipped when the test fails before it. The runner's teardown "
        "does all of these steps, in order, even on failure."
    )
    fix_safety = (
        "Removed as part of the GPU001 rewrite of the engine, with the same safety (for a "
        "helper class: the class becomes a context manager over the runner, a method made "
        "only of cleanup is deleted with its calls; unsafe). In a "
        "function that already uses the runner, removing a leftover cleanup call is unsafe: "
        "it changes when memory is freed within the test."
    )
    options = ("cleanup-functions", "isolation-decorators")
    INVALID = (
        Example(
            title="Leftover cleanup after the runner block",
            source='''\
import gc
import weakref

import torch


def test_chat(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.chat([{"role": "user", "content": "hi"}])
    gc.collect()  # error: GPU004
    torch.cuda.empty_cache()  # error: GPU004
''',
        ),
        Example(
            title="Cleanup in the methods of a helper class that owns an engine",
            source='''\
import torch
from vllm import LLM
from vllm.distributed import cleanup_dist_env_and_memory


class Scorer:
    def __init__(self, model):
        self.llm = LLM(model)  # error: GPU001

    def score(self, prompt):
        return self.llm.generate([prompt])[0].outputs[0].cumulative_logprob

    def __del__(self):
        cleanup_dist_env_and_memory()  # error: GPU004
        torch.cuda.empty_cache()  # error: GPU004


def test_score():
    scorer = Scorer("facebook/opt-125m")
    assert scorer.score("hi") is not None
    del scorer  # error: GPU004
''',
        ),
    )
    VALID = (
        Example(
            title="A kernel test with no engine",
            source='''\
import torch


def test_matmul():
    a = torch.ones(4, 4)
    assert (a @ a).sum() == 64
    torch.cuda.empty_cache()
''',
        ),
        Example(
            title="The definition of a shared cleanup helper",
            source='''\
import gc

import torch


def cleanup_dist_env_and_memory():
    gc.collect()
    torch.cuda.empty_cache()


def test_uses_helper():
    cleanup_dist_env_and_memory()
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        # A helper class's own cleanup (even in the ``__init__`` that builds the engine) is
        # the class rewrite's to remove: its report wins.
        reported: set[int] = set()
        for hit in self._owner_class_hits(module):
            reported.add(hit.node_line)
            yield hit
        for hit in self._function_hits(module):
            if hit.node_line not in reported:
                yield hit

    def _owner_class_hits(self, module: ModuleAnalysis) -> Iterator[Hit]:
        """Cleanup in the methods of a helper class that owns an engine (``del self.llm``,
        ``gc.collect()`` in its ``close()``), and of its instances in the functions that
        build them (``del tester``), which the class rewrite removes
        (:mod:`lint_gpu_tests.classplan`)."""
        for owner in owner_classes(module):
            plan = owner.plan
            if not isinstance(plan, ClassPlan):
                for stmt, what in owner.cleanup:
                    yield hit_at(stmt, self.message.format(what=what),
                                 none_fix(self.fix_title, plan.reason))
                continue
            fix = plan.fix_info(self.fix_title)
            found = list(owner.cleanup)
            for use in plan.uses:
                for node in ast.walk(module.tree):
                    if not (isinstance(node, ast.stmt) and node.lineno in use.remove_lines):
                        continue
                    if isinstance(node, ast.Delete):
                        found.append((node, "del " + ", ".join(
                            t.id for t in node.targets if isinstance(t, ast.Name))))
                    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                            last_name(node.value.func) != "__exit__":
                        found.append((node, module.cleanup_call_kind(node.value) or "cleanup"))
            for stmt, what in found:
                hit = hit_at(stmt, self.message.format(what=what), fix)
                yield replace(hit, depends_on=plan.anchor)

    def _function_hits(self, module: ModuleAnalysis) -> Iterator[Hit]:
        for func in module.functions:
            if is_isolated(func) or func.in_runner_class or not module.owns_engine(func):
                continue
            names = module.function_bindings(func)
            deletable = names.engines | names.runners | names.strong_aliases
            plans = function_plans(module, func)
            for node in module.nodes_of(func):
                what: str | None = None
                if isinstance(node, ast.Delete):
                    targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
                    if targets and any(t in deletable for t in targets):
                        what = f"del {', '.join(targets)}"
                elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                    what = module.cleanup_call_kind(node.value)
                if what is None or not isinstance(node, ast.stmt):  # a Delete or an Expr
                    continue
                plan: WrapPlan | None = None
                fix: FixInfo
                if plans:
                    plan, fix = covering_fix(plans, node.lineno, self.fix_title)
                elif _removable_alone(module, node, deletable):
                    fix = FixInfo(Applicability.UNSAFE, self.fix_title,
                                  "removing it changes when memory is freed within the test")
                else:
                    fix = none_fix(self.fix_title, "not a statement of its own")
                yield hit_at(node, self.message.format(what=what), fix, plan)


def _removable_alone(module: ModuleAnalysis, node: ast.stmt, deletable: set[str]) -> bool:
    """True when the cleanup statement can be deleted by itself: a statement of a block, alone
    on its line, and (for ``del``) deleting nothing but engines, runners and their aliases."""
    planner = planner_for(module)
    if _stmt_block(module, node) is None or planner.shares_line(node) or \
            planner.on_header_line(node):
        return False
    return not isinstance(node, ast.Delete) or all(
        isinstance(t, ast.Name) and t.id in deletable for t in node.targets)

"""Helpers shared by several rules (isolation, positions, plan lookup)."""

from __future__ import annotations

import ast

from lint_gpu_tests.analysis import FunctionInfo, ModuleAnalysis
from lint_gpu_tests.fixplan import WrapPlan, planner_for
from lint_gpu_tests.ftypes import Applicability, FixInfo
from lint_gpu_tests.rule import Hit


def is_isolated(func: FunctionInfo | None) -> bool:
    """True when ``func`` or a function around it runs in its own process."""
    while func is not None:
        if func.isolated:
            return True
        func = func.parent
    return False


def hit_at(node: ast.AST, message: str, fix: FixInfo | None,
           plan: WrapPlan | FixInfo | None = None) -> Hit:
    """A :class:`Hit` spanning ``node``; ``plan`` is the rewrite whose fix ``fix`` rides on."""
    return Hit(
        node_line=node.lineno,  # type: ignore[attr-defined]
        node_col=node.col_offset,  # type: ignore[attr-defined]
        end_line=getattr(node, "end_lineno", None) or node.lineno,  # type: ignore[attr-defined]
        end_col=getattr(node, "end_col_offset", None) or node.col_offset,  # type: ignore[attr-defined]
        message=message,
        fix=fix,
        depends_on=plan.anchor if isinstance(plan, WrapPlan) else None,
    )


def function_plans(module: ModuleAnalysis, func: FunctionInfo) -> list[WrapPlan | FixInfo]:
    """The GPU001 plans of every engine, and the GPU005 plans of every bare runner, built
    directly in ``func``."""
    planner = planner_for(module)
    plans = [planner.engine_plan(site) for site in module.engines if site.function is func]
    plans += [planner.runner_plan(call) for call in module.runner_calls
              if call.function is func and call.context == "bare"]
    return plans


def plan_covering(
    module: ModuleAnalysis, func: FunctionInfo, line: int, *, try_line: bool = False
) -> WrapPlan | None:
    """The engine plan in ``func`` that removes (or unwraps, with ``try_line``) ``line``."""
    for plan in function_plans(module, func):
        if isinstance(plan, WrapPlan):
            lines = plan.unwrap_try_lines if try_line else plan.remove_lines
            if line in lines:
                return plan
    return None


def unfixable_engine_reason(module: ModuleAnalysis, func: FunctionInfo) -> str:
    """Why the engines of ``func`` have no fix (first reason), for dependent rules."""
    for plan in function_plans(module, func):
        if isinstance(plan, FixInfo):
            return plan.reason
    return "the engine is not built in this function"


def none_fix(title: str, reason: str) -> FixInfo:
    """A missing fix with its reason."""
    return FixInfo(Applicability.NONE, title, reason)

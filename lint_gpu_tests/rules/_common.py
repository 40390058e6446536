"""Helpers shared by several rules (isolation, positions, plan lookup)."""

from __future__ import annotations

import ast

from lint_gpu_tests.analysis import FunctionInfo, ModuleAnalysis
from lint_gpu_tests.fixplan.isolate import strategy_plan
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.ftypes import Applicability, FixInfo
from lint_gpu_tests.rule import Hit
from lint_gpu_tests.source import walk_nodes
from lint_gpu_tests.syntax import names_in


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
    plans = [strategy_plan(module, site) for site in module.engines if site.function is func]
    plans += [planner.runner_plan(call) for call in module.runner_calls
              if call.function is func and call.context == "bare"]
    return plans


def covering_fix(
    plans: list[WrapPlan | FixInfo], line: int, title: str, *, try_line: bool = False
) -> tuple[WrapPlan | None, FixInfo]:
    """The plan among a function's ``plans`` (see :func:`function_plans`) that removes (or
    unwraps, with ``try_line``) the statement at ``line``, and the fix it gives that
    statement: the plan's own, or none with the reason the function's engine has no fix."""
    for plan in plans:
        if isinstance(plan, WrapPlan):
            lines = plan.unwrap_try_lines if try_line else plan.remove_lines
            if line in lines:
                return plan, plan.covered_fix(title)
    reason = next((p.reason for p in plans if isinstance(p, FixInfo)),
                  "the engine is not built in this function")
    return None, none_fix(title, reason)


def is_shutdown_try(module: ModuleAnalysis, node: ast.AST, engines: set[str]) -> bool:
    """True for a ``try/finally`` whose ``finally`` does nothing but shut down one of
    ``engines`` (names) and clean up after it: GPU003's report, which covers the statements
    of that ``finally`` (GPU004 does not report them again: one statement, one report)."""
    return isinstance(node, ast.Try) and planner_for(module).finally_only_cleans(
        node, engines) and any(names_in(s) & engines or "engine_core" in ast.unparse(s)
                               for s in node.finalbody)


def none_fix(title: str, reason: str) -> FixInfo:
    """A missing fix with its reason."""
    return FixInfo(Applicability.NONE, title, reason)



def module_constants(module: ModuleAnalysis) -> dict[str, object]:
    """Names bound exactly once at module level to a literal (``GPU_UTIL = 0.4``,
    ``ENV_KEY = "VLLM_X"``), with their values; read with :func:`ast.literal_eval`, so a
    name bound twice, or to anything computed, is left out. Rules compute it once per
    module and pass it to :func:`literal_value`."""
    counts: dict[str, int] = {}
    values: dict[str, object] = {}
    for stmt in module.tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = list(stmt.targets), stmt.value
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [stmt.target], stmt.value
        for name in walk_nodes(targets):
            if isinstance(name, ast.Name):
                counts[name.id] = counts.get(name.id, 0) + 1
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and len(targets) == 1 and \
                isinstance(targets[0], ast.Name) and value is not None:
            try:
                values[targets[0].id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
    return {name: v for name, v in values.items() if counts.get(name) == 1}


def literal_value(node: ast.AST, constants: dict[str, object],
                  local_names: frozenset[str] = frozenset()) -> object | None:
    """The value of a literal, or of a module constant's name (``constants`` from
    :func:`module_constants`) that the function does not rebind (``local_names``: its
    parameters and assigned names); ``None`` when it is known only at run time."""
    if isinstance(node, ast.Name):
        return None if node.id in local_names else constants.get(node.id)
    try:
        value: object = ast.literal_eval(node)
        return value
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def local_names(module: ModuleAnalysis, func: FunctionInfo | None) -> frozenset[str]:
    """Names ``func`` binds itself (parameters, assignments, loop and with targets), which
    hide module constants of the same name; empty at module level."""
    return frozenset() if func is None else module.bound_names(func)

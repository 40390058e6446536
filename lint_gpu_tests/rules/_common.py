"""Helpers shared by several rules (isolation, positions, plan lookup)."""

from __future__ import annotations

import ast
import os

from lint_gpu_tests.analysis.analysis import FunctionInfo, ImportedHelper, ModuleAnalysis
from lint_gpu_tests.fixplan.factories import FactoryPlan, factory_units
from lint_gpu_tests.fixplan.factory_fixtures import fixture_units
from lint_gpu_tests.fixplan.isolate import ISOLATE_CALL, IsolatePlan, strategy_plan
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.fixplan.xunit import XunitPlan
from lint_gpu_tests.ftypes import CONFTEST_FACTORY, IMPORTED_FACTORY, FixInfo
from lint_gpu_tests.parsing.syntax import dotted_name, names_in
from lint_gpu_tests.rule import Hit

#: The fix of cleanup the isolate strategy keeps (it frees an engine before the test builds
#: the next one, or does not stand alone on its line): the statement stays, and the
#: violation goes because the test then runs in a new process.
KEPT_TITLE = (f"Keep it (the test runs in a new process, `@{ISOLATE_CALL}`, where manual "
              "cleanup is not reported)")


def hit_at(node: ast.AST, message: str, fix: FixInfo | None,
           plan: WrapPlan | FactoryPlan | XunitPlan | FixInfo | None = None) -> Hit:
    """A :class:`Hit` spanning ``node``; ``plan`` is the rewrite whose fix ``fix`` rides on."""
    return Hit(
        node_line=node.lineno,  # type: ignore[attr-defined]
        node_col=node.col_offset,  # type: ignore[attr-defined]
        end_line=getattr(node, "end_lineno", None) or node.lineno,  # type: ignore[attr-defined]
        end_col=getattr(node, "end_col_offset", None) or node.col_offset,  # type: ignore[attr-defined]
        message=message,
        fix=fix,
        depends_on=plan.anchor if isinstance(plan, (WrapPlan, FactoryPlan, XunitPlan))
        else None,
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
            if isinstance(plan, IsolatePlan) and line in plan.kept_lines:
                return plan, plan.covered_fix(KEPT_TITLE)
            if line in lines:
                return plan, plan.covered_fix(title)
    reason = next((p.reason for p in plans if isinstance(p, FixInfo)), None)
    if reason is None:
        wraps = sorted((p for p in plans if isinstance(p, WrapPlan)), key=lambda p: p.call_line)
        inside = next((p for p in wraps if p.site_line <= line <= p.end_line), None)
        before = [p for p in wraps if p.call_line <= line]
        if inside is not None:
            reason = (f"the rewrite of the engine built on line {inside.call_line} keeps "
                      "this statement inside its block, where it acts on the engine's proxy")
        elif wraps:
            reason = (f"the rewrite of the engine built on line "
                      f"{(before or wraps)[-1 if before else 0].call_line} leaves this "
                      "statement where it is: it is not part of the teardown that the "
                      "runner's block takes over")
        else:
            reason = "the engine is not built in this function"
    return None, FixInfo.none(title, reason)


def is_shutdown_try(module: ModuleAnalysis, node: ast.AST, engines: set[str]) -> bool:
    """True for a ``try/finally`` whose ``finally`` does nothing but shut down one of
    ``engines`` (names) and clean up after it: GPU003's report, which covers the statements
    of that ``finally`` (GPU004 does not report them again: one statement, one report)."""
    return isinstance(node, ast.Try) and planner_for(module).finally_only_cleans(
        node, engines) and any(names_in(s) & engines or "engine_core" in ast.unparse(s)
                               for s in node.finalbody)


def factory_fix(module: ModuleAnalysis, func: FunctionInfo, line: int, title: str, *,
                hands_out: bool = False) -> tuple[FactoryPlan | None, FixInfo]:
    """The fix of the cleanup (or shutdown ``try``) at ``line`` of ``func``, an engine that
    ``func`` gets from a factory helper of the module (:attr:`ModuleAnalysis.engine_factories`):
    the factory unit's (:mod:`lint_gpu_tests.fixplan.factories`) when its with-block in ``func``
    removes the statement, else none with the reason, naming the helper; an engine from a
    helper of another module of the tree has none (:func:`imported_helper_reason`). With
    ``hands_out``, ``line`` is a fixture's ``yield`` or ``return`` of that engine (GPU002),
    which the unit fixes when the with-block holds it (:meth:`FactoryPlan.hands_out`)."""
    for node in module.nodes_of(func):
        helper = module.helper_called(node)
        if helper is not None and helper.kind != "k":
            spelled = dotted_name(node.func) or helper.name  # type: ignore[attr-defined]
            return None, FixInfo.none(title, imported_helper_reason(helper, spelled))
        method = module.method_factory_of(node)
        if method is not None:
            return _method_fix(module, func, line, title, method, hands_out)
        inherited = module.imported_method_of(node)
        if inherited is not None:
            return None, FixInfo.none(title, imported_method_reason(*inherited))
        fixture = module.factory_fixture_called(node)
        if fixture is not None:
            unit = fixture_units(module).get(fixture)
            if isinstance(unit, FactoryPlan) and \
                    (unit.hands_out if hands_out else unit.covers)(module.path,
                                                                  func.node.lineno, line):
                return unit, unit.covered_fix(title)
            line_of = module.factory_fixtures[fixture]
            imported = module.imported_factory_fixtures.get(fixture)
            where = f"line {line_of}" if line_of else \
                f"`{imported}`" if imported is not None else "a conftest.py"
            if isinstance(unit, FactoryPlan):
                return None, FixInfo.none(title, (
                    f"the engine comes from `{fixture}(...)`, the factory that the fixture "
                    f"`{fixture}` ({where}) hands out, and its rewrite into a context manager "
                    "keeps this statement"))
            if imported is None and (not line_of or os.path.basename(module.path) ==
                                     "conftest.py"):
                return None, FixInfo.none(title, (
                    f"the engine comes from `{fixture}(...)`, the factory that the fixture "
                    f"`{fixture}` ({where}) hands out and keeps no engine of: a fix of the "
                    f"fixture {CONFTEST_FACTORY} removes this statement"))
            why = "" if not isinstance(unit, FixInfo) else (
                "; the factory and its calls are not made a context manager and with-blocks: "
                + unit.reason)
            return None, FixInfo.none(title, (
                f"the engine comes from `{fixture}(...)`, the factory that the fixture "
                f"`{fixture}` ({where}) hands out and keeps no engine of: no fix removes "
                "this statement (the fixture's own fix, GPU001, makes the fixture keep "
                "every engine its factory builds, and leaves this statement acting on a "
                f"proxy){why}"))
    units = factory_units(module)
    called = sorted({name for n in module.nodes_of(func)
                     if (name := module.factory_called(n) or module.tuple_factory_called(n))
                     is not None})
    reason = "the engine is not built in this function"
    for name in called or sorted(units):
        unit = units[name]
        if isinstance(unit, FixInfo):
            return None, FixInfo.none(title, unit.reason)
        covers = unit.hands_out if hands_out else unit.covers
        if covers(module.path, func.node.lineno, line):
            return unit, unit.covered_fix(title)
        reason = (f"the engine comes from `{name}()` (line {unit.def_line}), and its rewrite "
                  "into a context manager keeps this statement")
    return None, FixInfo.none(title, reason)


def _method_fix(module: ModuleAnalysis, func: FunctionInfo, line: int, title: str,
                method: tuple[str, int], hands_out: bool) -> tuple[FactoryPlan | None, FixInfo]:
    """:func:`factory_fix` for an engine ``func`` gets from a factory method (``method``: the
    call as spelled and the line of the method's ``def``): the method's unit when its
    with-block in ``func`` removes (or, with ``hands_out``, hands out) the statement at
    ``line``, else none with the reason."""
    spelled, def_line = method
    unit = factory_units(module).get(f"method:{def_line}")
    if not isinstance(unit, FactoryPlan):
        return None, FixInfo.none(title, unit.reason if unit is not None else
                                  f"the engine comes from `{spelled}()` (line {def_line})")
    covers = unit.hands_out if hands_out else unit.covers
    if covers(module.path, func.node.lineno, line):
        return unit, unit.covered_fix(title)
    return None, FixInfo.none(title, (f"the engine comes from `{spelled}()` (line {def_line}), "
                                      "and its rewrite into a context manager keeps this "
                                      "statement"))


def imported_method_reason(spelled: str, helper: ImportedHelper) -> str:
    """Why a violation about an engine from a factory method of ``helper``, a class of
    another module (inherited by the caller's class, or called on an instance of it),
    called as ``spelled``, has no fix."""
    name = spelled.rpartition(".")[2]
    return (f"the engine comes from `{spelled}()`, a method of `{helper.name}` (its own or "
            f"one it inherits), a class defined in {helper.where}: no fix rewrites a method "
            "of a "
            f"class of another module together with its callers yet (`{name}()` would have "
            "to become a context manager for every class of the tree that inherits it)")


def imported_helper_reason(helper: ImportedHelper, spelled: str) -> str:
    """Why a violation about an engine that comes from ``helper``, an engine helper of
    another module of the tree, called as ``spelled``, has no fix: the one place this
    reason (and the plan it stands for) is made."""
    if helper.kind == "k":
        return (f"the engine comes from `{spelled}()`, defined in {helper.where}, which "
                f"caches the engine it returns (`@{helper.extra}`): the engine lives as long "
                "as that cache, shared by every caller, and no fix rewrites a cached engine")
    if helper.kind == "c":
        held = ", ".join(f"`self.{a}`" for a in sorted(helper.attributes))
        return (f"the engine is held on {held} of `{helper.name}`, defined in "
                f"{helper.where}: a class of another module, and no fix rewrites a class "
                "of another module together with its users yet")
    alias = "" if spelled.rpartition(".")[2] == helper.name else f" (`{helper.name}()`)"
    packed = " in a tuple with other values" if helper.kind == "t" else ""
    return (f"the engine comes from `{spelled}()`{alias}, defined in {helper.where}: "
            f"{IMPORTED_FACTORY}{packed}, and its fix, made with the helper and every call "
            "of it, "
            "is planned over the tree's files: not for one file alone (stdin, the flake8 "
            "plugin, an editor's document)")

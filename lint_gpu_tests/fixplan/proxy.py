"""Planning the weak-proxy fixes of GPU002 and GPU006 (applied by
:mod:`lint_gpu_tests.codemods.proxy_engine_reference`).

A :class:`ProxyPlan` names the statements whose ``runner.llm`` becomes
``weakref.proxy(runner.llm)``: the reported statement and, for a fixture that yields an alias
of the runner's engine, the statements binding that alias. :func:`weak_referents` finds the
``weakref`` calls the rewrite must point at the runner's engine instead (a proxy cannot be
weakly referenced).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.fixplan.safety import weak_calls
from lint_gpu_tests.ftypes import FixKind, FixPlan
from lint_gpu_tests.parsing.source import walk_breadth


@dataclass(frozen=True)
class ProxyPlan(FixPlan):
    """GPU002/GPU006: turn the engine in the statements starting on ``lines`` (1-based,
    ``ast``'s) into weak proxies: ``x = runner.llm`` binds ``weakref.proxy(runner.llm)``; a
    fixture's ``yield``/``return runner.llm`` yields one (``return`` becomes ``yield``)."""

    FIX_KIND = FixKind.PROXY_ENGINE_REFERENCE
    lines: frozenset[int]
    #: ``(line, character column)`` of ``runner.llm`` expressions that become
    #: ``weakref.proxy(runner.llm)`` where they stand (an element of a tuple, a container
    #: display or a store method's argument, a walrus's value), beside the statements of
    #: ``lines``.
    exprs: frozenset[tuple[int, int]] = frozenset()


def proxy_plan(module: ModuleAnalysis, row: int, *, yielded: bool,
               expr: ast.expr | None = None) -> ProxyPlan:
    """The plan for the violation at ``row``; with ``yielded`` (GPU002, a fixture's
    ``yield``/``return``), the lines binding the yielded alias go with it; with ``expr``,
    that expression alone is proxied where it stands (:attr:`ProxyPlan.exprs`)."""
    lines = {row}
    if yielded:
        lines |= _alias_lines(module, row)
    if expr is None:
        return ProxyPlan(frozenset(lines))
    text = module.lines[expr.lineno - 1]
    column = len(text.encode("utf-8")[:expr.col_offset].decode("utf-8", "replace"))
    return ProxyPlan(frozenset(lines), frozenset({(expr.lineno, column)}))


def _alias_lines(module: ModuleAnalysis, row: int) -> set[int]:
    """Lines of ``x = runner.llm`` aliases that a fixture yields at ``row``."""
    out: set[int] = set()
    for func in module.functions:
        names = module.function_bindings(func)
        for node in module.nodes_of(func):
            if isinstance(node, (ast.Yield, ast.Return)) and node.lineno == row and \
                    isinstance(node.value, ast.Name) and node.value.id in names.strong_aliases:
                for stmt in module.nodes_of(func):
                    if isinstance(stmt, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == node.value.id
                        for t in stmt.targets
                    ) and isinstance(stmt.value, ast.Attribute):
                        out.add(stmt.lineno)
    return out


def weak_referents(module: ModuleAnalysis,
                   lines: Iterable[int]) -> dict[tuple[int, str], tuple[str, str]]:
    """``weakref.proxy(llm)``/``weakref.ref(llm)`` calls, inside the with-block, on an alias
    that becomes a proxy at one of ``lines``: ``(line, callee) -> (alias, runner.llm
    source)``. A proxy cannot be weakly referenced, so they take the runner's engine instead
    (no proxy of a proxy)."""
    wanted = set(lines)
    out: dict[tuple[int, str], tuple[str, str]] = {}
    for node in walk_breadth(module.tree):
        if not (isinstance(node, ast.Assign) and node.lineno in wanted
                and isinstance(node.value, ast.Attribute)):
            continue
        aliases = {t.id for t in node.targets if isinstance(t, ast.Name)}
        scope: ast.AST | None = module.parent(node)
        while scope is not None and not isinstance(scope, (
                ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = module.parent(scope)
        if scope is None or not aliases:
            continue
        for key in weak_calls(module, [scope], aliases):
            out[key] = (next(iter(aliases)) if len(aliases) == 1 else "",
                        ast.unparse(node.value))
    return out

"""Codemod for GPU001 (with GPU003 and GPU004 of the same test) under
``fix-strategy = "isolate"``: run the test in a new process instead of wrapping its engine.

The test gets ``@create_new_process_for_each_test("spawn")`` as its innermost decorator
(imported from ``lint_gpu_tests.runtime``, or from ``tests.utils`` with ``target = "vllm"``,
unless the module already has the name), its manual cleanup and engine finalizers are
deleted, a ``try/finally`` that only cleaned up is replaced by its body, and ``request`` is
dropped when only a removed finalizer used it. The engine constructions stay as written.
Plans come from :mod:`lint_gpu_tests.fixplan.isolate`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import Context, GpuCodemod, engine_locals
from lint_gpu_tests.codemods._positions import StatementPositions
from lint_gpu_tests.codemods._wrap import WrapTransformer
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixplan.isolate import ISOLATE_CALL, ISOLATE_DECORATOR, IsolatePlan
from lint_gpu_tests.ftypes import FixKind, Violation


class IsolateTestProcess(GpuCodemod[IsolatePlan]):
    """Decorate tests that build engines by hand with process isolation and delete their
    manual cleanup (README, "Fix strategies": ``isolate``)."""

    DESCRIPTION = ("Run tests that build vLLM engines by hand in a new process "
                   "(GPU001, fix-strategy isolate).")
    PLAN = IsolatePlan
    KINDS = (FixKind.ISOLATE_TEST_PROCESS,)
    CODES = frozenset({"GPU001"})

    def __init__(self, context: Context, config: Config | None = None,
                 violations: Iterable[Violation] | None = None,
                 analysis: ModuleAnalysis | None = None) -> None:
        """As :class:`GpuCodemod`; run alone (``python -m libcst.tool codemod``, no
        ``config``), it uses the default settings with ``fix-strategy = "isolate"``."""
        super().__init__(context, config or Config(fix_strategy="isolate"), violations,
                         analysis)

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                todo: Sequence[IsolatePlan]) -> cst.Module:
        plans: dict[int, IsolatePlan] = {}
        for plan in todo:  # the GPU001 of every engine of a test carry the test's plan
            plans.setdefault(plan.function_line, plan)
        if not plans:
            return tree
        positions = StatementPositions(tree, module.tree, self.printer)
        # The shared with-block transformer deletes, unwraps and drops parameters; no
        # statement starts on line 0, so it builds no with-block.
        cleanup = [dataclasses.replace(p, site_line=0, remove_lines=p.remove_lines - p.kept_lines)
                   for p in plans.values()]
        transformer = _Isolate(cleanup, self.config, positions, engine_locals(module))
        new_tree = tree.visit(transformer)
        if not transformer.decorated:
            return tree
        if ISOLATE_DECORATOR not in module.imports:
            import_from = next(iter(plans.values())).import_from
            if import_from.split(".")[0] == "tests":
                self.add_project_import(import_from, ISOLATE_DECORATOR)
            else:
                self._from_imports.add((import_from, ISOLATE_DECORATOR))
        self.remove_unused(module, new_tree)
        return new_tree




class _Isolate(WrapTransformer):
    """The plans' deletions, plus ``@create_new_process_for_each_test("spawn")`` below the
    other decorators of each planned function."""

    decorated = False

    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        updated = super().leave_FunctionDef(original_node, updated_node)
        if self._line(original_node) not in self.by_function:
            return updated
        self.decorated = True
        decorator = cst.Decorator(decorator=cst.parse_expression(ISOLATE_CALL))
        return updated.with_changes(decorators=[*updated.decorators, decorator])

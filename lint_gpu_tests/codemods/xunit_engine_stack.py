"""Codemod for GPU001 on an engine an xunit set-up stores on its class or instance (with the
teardown's GPU004): enter the runner class on an ``ExitStack`` in the set-up, close the stack
in the teardown.

The plan (what goes, where the stack closes, how safe) is
:class:`lint_gpu_tests.fixplan.xunit.XunitPlan`; this module only applies it:

* ``cls.llm = LLM(...)`` becomes ``cls._engine_stack = contextlib.ExitStack()`` followed by
  ``cls.llm = weakref.proxy(cls._engine_stack.enter_context(VllmRunner(...)).llm)``
  (arguments mapped as for every GPU001 fix; ``VllmRunner`` imported from
  ``lint_gpu_tests.runtime``, or with ``target = "vllm"`` from the project's
  ``tests.conftest``);
* the teardown's first cleanup statement becomes ``cls._engine_stack.close()``, and the rest
  of its cleanup run goes; a class without the teardown gets one, after the set-up.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import IMPORTS, GpuCodemod
from lint_gpu_tests.codemods._positions import StatementPositions
from lint_gpu_tests.codemods._stack import XunitStackTransformer
from lint_gpu_tests.fixplan.xunit import XunitPlan
from lint_gpu_tests.ftypes import FixKind


class XunitEngineStack(GpuCodemod[XunitPlan]):
    """Hand one xunit set-up's engine per pass to the runner class on an ``ExitStack``
    closed by its teardown (README, "Fix safety")."""

    DESCRIPTION = ("Enter the runner on an `ExitStack` in the xunit set-up that stores a "
                   "vLLM engine, and close it in the teardown (GPU001).")
    PLAN = XunitPlan
    KINDS = (FixKind.XUNIT_ENGINE_STACK,)
    CODES = frozenset({"GPU001"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[XunitPlan]) -> cst.Module:
        plan = plans[0]
        positions = StatementPositions(tree, module.tree, self.printer)
        runner = self.config.runner_classes[0] if self.config.runner_classes \
            else "VllmRunner"
        transformer = XunitStackTransformer(plan, positions, runner, self.config.target,
                                        self.config.runner_attribute, tree)
        new_tree = tree.visit(transformer)
        if not transformer.changed:
            return tree
        self.add_imports(transformer.needs | {"contextlib", "weakref"})
        if plan.import_from == IMPORTS["VllmRunner"][0]:
            self.add_imports({"VllmRunner"})
        else:  # ``target = "vllm"``: vLLM's runner, from the project's tests/conftest.py
            self.add_project_import(plan.import_from, runner)
        self.remove_unused(module, new_tree)
        return new_tree

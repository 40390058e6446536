"""Codemod for GPU001 on a factory helper that builds an engine and returns it (with its
callers' GPU003/GPU004): make the helper a context manager over the runner and call it in
``with`` statements.

The plan (the unit of the helper and every call of it, how safe) is
:class:`lint_gpu_tests.fixplan.factories.FactoryPlan`; this module only applies it, in one pass:

* the helper gets ``@contextlib.contextmanager`` (its return annotation, which named the engine,
  goes), and its construction becomes ``with VllmRunner(...) as runner:`` (with ``target =
  "vllm"``: ``with vllm_runner(...) as runner:``, the fixture its first parameter, or for a
  unit across modules ``VllmRunner`` imported from the project's tests/conftest.py) yielding
  ``weakref.proxy(runner.llm)`` where it returned the engine;
* each ``llm = setup_engine(...)`` becomes ``with setup_engine(...) as llm:`` over the engine's
  live range (the with-block rewrite of GPU005, the helper being the runner), its hand cleanup
  and shutdown ``try/finally`` removed;
* each ``cls.llm = setup_engine(...)`` of an xunit set-up is entered on an ``ExitStack`` the
  set-up opens and its teardown closes where its hand cleanup began (as
  :mod:`lint_gpu_tests.codemods.xunit_engine_stack` does for an engine the set-up builds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.analysis.mappings import RUNNER_KWARGS_NAME
from lint_gpu_tests.codemods._base import GpuCodemod, engine_locals
from lint_gpu_tests.codemods._mapping import add_helper
from lint_gpu_tests.codemods._positions import StatementPositions
from lint_gpu_tests.codemods._stack import Block, XunitStackTransformer
from lint_gpu_tests.codemods._wrap import WrapTransformer
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixplan.factories import FactoryPlan
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.xunit import XunitPlan
from lint_gpu_tests.ftypes import FixKind

#: The decorator the helper gets.
CONTEXT_MANAGER = "contextlib.contextmanager"


class MakeFactoryContextManager(GpuCodemod[FactoryPlan]):
    """Rewrite one factory helper per pass into a context manager over the runner, and
    every call of it in this module into a with-block (README, "Fix safety")."""

    DESCRIPTION = ("Make helpers that build and return a vLLM engine context managers over "
                   "the runner and call them in `with` statements (GPU001).")
    PLAN = FactoryPlan
    KINDS = (FixKind.FACTORY_CONTEXT_MANAGER,)
    CODES = frozenset({"GPU001"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[FactoryPlan]) -> cst.Module:
        plan = plans[0]
        config = self.config
        as_runner = replace(config, runner_classes=(*config.runner_classes, plan.factory,
                                                    *plan.spellings))
        positions = StatementPositions(tree, module.tree, self.printer)
        transformer = _FactoryTransformer(plan, module.path, as_runner, positions,
                                          engine_locals(module), module.text, tree)
        new_tree = tree.visit(transformer)
        if not transformer.changed:
            return tree
        if RUNNER_KWARGS_NAME in transformer.needs:
            transformer.needs.discard(RUNNER_KWARGS_NAME)
            new_tree = add_helper(new_tree)
        self.add_imports(transformer.needs | ({"contextlib"} if transformer.home else set()))
        if transformer.home and plan.import_from is not None:
            # ``target = "vllm"``, callers in other modules: vLLM's runner class, from the
            # project's tests/conftest.py.
            self.add_project_import(plan.import_from, config.runner_classes[0])
        self.remove_unused(module, new_tree)
        return new_tree


class _FactoryTransformer(WrapTransformer):
    """The with-blocks of the helper and of its callers, plus the helper's decorator and its
    ``return llm`` turned into ``yield llm``."""

    def __init__(self, plan: FactoryPlan, path: str, config: Config,
                 positions: StatementPositions, engine_names: set[str], text: str,
                 tree: cst.Module) -> None:
        callers = [c.plan for c in plan.callers if c.path == path
                   and isinstance(c.plan, WrapPlan)]
        # A unit across modules: the helper's own rewrite only in the helper's module.
        self.home = plan.path == path
        super().__init__([plan.body] * self.home + callers, config, positions, engine_names,
                         text)
        self.factory = plan
        # The calls an xunit set-up stores: entered on the set-up's stack.
        self.stacks = [XunitStackTransformer(c.plan, positions, "", config.target,
                                         config.runner_attribute, tree)
                       for c in plan.callers if c.path == path
                       and isinstance(c.plan, XunitPlan)]
        if self.stacks:
            self.needs.add("contextlib")
            if self.reach is not None:
                self.reach |= {line for x in self.stacks for line in (
                    x.plan.setup_line, x.plan.site_line, x.plan.teardown_line,
                    *x.plan.remove_lines) if line}

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return self._stacks(original_node, super().leave_IndentedBlock(original_node,
                                                                      updated_node))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self._stacks(original_node, super().leave_Module(original_node, updated_node))

    def _stacks(self, original_node: Block, new: Block) -> Block:
        """``new`` with the xunit set-ups' stacks written in it."""
        for stack in self.stacks:
            # The set-up's, the teardown's and their class's or module's blocks hold no
            # caller's with-block: the with-blocks left their statements one for one.
            if len(new.body) == len(original_node.body):
                new = stack.rewrite_block(original_node, new)
                self.changed |= stack.changed
        return new

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine
                                  ) -> cst.SimpleStatementLine:
        line = self.factory.return_line
        if not self.home or line is None or self._line(original_node) != line:
            return updated_node
        ret = updated_node.body[0]
        assert isinstance(ret, cst.Return) and ret.value is not None
        return updated_node.with_changes(body=[cst.Expr(cst.Yield(value=ret.value))])

    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        new = super().leave_FunctionDef(original_node, updated_node)
        if not self.home or self._line(original_node) != self.factory.def_line:
            return new
        self.changed = True
        decorator = cst.Decorator(decorator=cst.parse_expression(CONTEXT_MANAGER))
        return new.with_changes(decorators=[decorator, *new.decorators], returns=None)

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
from lint_gpu_tests.codemods._cst import explode_args, line_length, runner_call, statement_code
from lint_gpu_tests.codemods._positions import StatementPositions
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
        transformer = _XunitTransformer(plan, positions, runner, self.config.target,
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


class _XunitTransformer(cst.CSTTransformer):
    """The set-up's construction split in two, the teardown's cleanup run replaced by the
    stack's ``close()``."""

    def __init__(self, plan: XunitPlan, positions: StatementPositions, runner: str,
                 target: str, attribute: str, tree: cst.Module) -> None:
        super().__init__()
        self.tree = tree
        self.attribute = attribute  # the runner's attribute holding the engine
        self.plan = plan
        self.positions = positions
        self.runner = runner
        self.target = target
        self.needs: set[str] = set()
        self.changed = False

    def _line(self, node: cst.CSTNode) -> int:
        return self.positions.start_line(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        plan = self.plan
        body: list[cst.BaseStatement] = []
        for original, stmt in zip(original_node.body, updated_node.body, strict=True):
            line = self._line(original)
            column = self.positions.start_column(original)
            if line == plan.site_line and isinstance(stmt, cst.SimpleStatementLine):
                body.extend(self._split(stmt, column))
                self.changed = True
            elif line == plan.close_line:
                body.append(self._close(stmt))
                self.changed = True
            elif line in plan.remove_lines:
                self.changed = True
            elif line == plan.setup_line and plan.add_teardown and \
                    isinstance(stmt, cst.FunctionDef):
                body.extend((stmt, self._teardown()))
                self.changed = True
            else:
                body.append(stmt)
        return updated_node.with_changes(body=body)

    def _teardown(self) -> cst.BaseStatement:
        """The teardown the class lacked, closing the stack (after the set-up)."""
        plan = self.plan
        indent = self.tree.default_indent
        receiver = plan.receiver[0]
        code = ("@classmethod\n" if plan.class_method else "") + (
            f"def {plan.add_teardown}({receiver}):\n"
            f"{indent}{receiver}.{plan.stack_attribute}.close()\n")
        return cst.parse_statement(code, config=self.tree.config_for_parsing).with_changes(
            leading_lines=[cst.EmptyLine(indent=False)])

    def _split(self, site: cst.SimpleStatementLine, column: int) -> list[cst.BaseStatement]:
        """``cls.llm = LLM(...)`` -> the stack, then the attribute bound to the proxy of
        the engine of the runner entered on it."""
        plan = self.plan
        assign = site.body[0]
        assert isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)
        receiver = plan.receiver[0]
        stack = f"{receiver}.{plan.stack_attribute}"
        call, uses_cc = runner_call(assign.value, self.runner, target=self.target,
                                    compilation_config=plan.compilation_config)
        if uses_cc:
            self.needs.add("CompilationConfig")
        first = site.with_changes(body=[cst.Assign(
            targets=[cst.AssignTarget(target=cst.Attribute(
                value=cst.Name(receiver), attr=cst.Name(plan.stack_attribute)))],
            value=cst.parse_expression("contextlib.ExitStack()"))])
        entered = cst.Call(func=cst.parse_expression(f"{stack}.enter_context"),
                           args=[cst.Arg(value=call)])
        proxy = cst.Call(func=cst.parse_expression("weakref.proxy"), args=[cst.Arg(
            value=cst.Attribute(value=entered, attr=cst.Name(self.attribute)))])
        second = cst.SimpleStatementLine(body=[assign.with_changes(value=proxy)],
                                         trailing_whitespace=site.trailing_whitespace)
        if "\n" in statement_code(call) or \
                column + len(statement_code(second).splitlines()[0]) > line_length():
            second = second.with_changes(body=[assign.with_changes(value=proxy.with_changes(
                args=[cst.Arg(value=cst.Attribute(value=entered.with_changes(args=[cst.Arg(
                    value=explode_args(call))]), attr=cst.Name(self.attribute)))]))])
        return [first.with_changes(trailing_whitespace=cst.TrailingWhitespace()), second]

    def _close(self, stmt: cst.BaseStatement) -> cst.BaseStatement:
        """The teardown's first cleanup statement -> ``cls._engine_stack.close()``."""
        plan = self.plan
        close = cst.Expr(cst.parse_expression(
            f"{plan.receiver[1]}.{plan.stack_attribute}.close()"))
        assert isinstance(stmt, cst.SimpleStatementLine)  # a cleanup statement
        return stmt.with_changes(body=[close])

"""The xunit set-up's ``ExitStack`` rewrite, shared by the codemod of an engine the set-up
builds (:mod:`lint_gpu_tests.codemods.xunit_engine_stack`) and by a factory unit whose call
the set-up stores (:mod:`lint_gpu_tests.codemods.make_factory_context_manager`)."""

from __future__ import annotations

from typing import TypeVar

import libcst as cst

from lint_gpu_tests.codemods._cst import explode_args, line_length, runner_call, statement_code
from lint_gpu_tests.codemods._positions import StatementPositions
from lint_gpu_tests.fixplan.xunit import XunitPlan

#: A statement block the rewrite walks: a class's or function's body, or the module.
Block = TypeVar("Block", cst.IndentedBlock, cst.Module)


class XunitStackTransformer(cst.CSTTransformer):
    """The set-up's construction split in two, the teardown's cleanup run replaced by the
    stack's ``close()`` (:class:`lint_gpu_tests.fixplan.xunit.XunitPlan`).

    After the visit, ``needs`` holds what the module must import beyond ``contextlib``
    (``CompilationConfig``) and ``changed`` whether anything was rewritten.
    """

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
        return self.rewrite_block(original_node, updated_node)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self.rewrite_block(original_node, updated_node)

    def rewrite_block(self, original_node: Block, updated_node: Block) -> Block:
        """``updated_node`` (the block or module ``original_node`` of the visited tree, as
        rewritten so far) with the plan's statements in it rewritten: the set-up's store
        (and its ``global`` statement), the teardown's cleanup run, the teardown the class
        or module lacked."""
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
            elif line == plan.global_line and isinstance(stmt, cst.SimpleStatementLine):
                body.append(self._declare(stmt))
            elif line == plan.undeclare_line and isinstance(stmt, cst.SimpleStatementLine):
                body.extend(self._undeclare(stmt))
            elif line == plan.setup_line and plan.add_teardown and \
                    isinstance(stmt, cst.FunctionDef):
                body.extend((stmt, self._teardown()))
                self.changed = True
            else:
                body.append(stmt)
        return updated_node.with_changes(body=body)

    def _stack(self, receiver: str) -> str:
        """The stack as ``receiver`` reaches it: ``cls._engine_stack``, or the global."""
        return f"{receiver}.{self.plan.stack_attribute}" if receiver \
            else self.plan.stack_attribute

    def _teardown(self) -> cst.BaseStatement:
        """The teardown the class or module lacked, closing the stack (after the set-up;
        a module's two blank lines from it, a class's one)."""
        plan = self.plan
        indent = self.tree.default_indent
        receiver = plan.receiver[0]
        code = ("@classmethod\n" if plan.class_method else "") + (
            f"def {plan.add_teardown}({receiver}):\n"
            f"{indent}{self._stack(receiver)}.close()\n")
        blank = [cst.EmptyLine(indent=False)] * (1 if plan.in_class else 2)
        return cst.parse_statement(code, config=self.tree.config_for_parsing).with_changes(
            leading_lines=blank)

    def _undeclare(self, stmt: cst.SimpleStatementLine) -> list[cst.SimpleStatementLine]:
        """The teardown's ``global llm`` without the engine's global (gone with nothing
        left to declare)."""
        declared = stmt.body[0]
        assert isinstance(declared, cst.Global)
        names = [n for n in declared.names if n.name.value != self.plan.attribute]
        self.changed = True
        if not names:
            return []
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return [stmt.with_changes(body=[declared.with_changes(names=names)])]

    def _declare(self, stmt: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        """The set-up's ``global llm`` -> ``global llm, _engine_stack``."""
        declared = stmt.body[0]
        assert isinstance(declared, cst.Global)
        names = [*declared.names[:-1], declared.names[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.NameItem(cst.Name(self.plan.stack_attribute))]
        self.changed = True
        return stmt.with_changes(body=[declared.with_changes(names=names)])

    def _split(self, site: cst.SimpleStatementLine, column: int) -> list[cst.BaseStatement]:
        """``cls.llm = LLM(...)`` -> the stack, then the attribute bound to the proxy of
        the engine of the runner entered on it (a factory's call: the call entered on the
        stack, its context manager yielding the proxy)."""
        plan = self.plan
        assign = site.body[0]
        assert isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)
        receiver = plan.receiver[0]
        stack = self._stack(receiver)
        first = site.with_changes(body=[cst.Assign(
            targets=[cst.AssignTarget(target=cst.Attribute(
                value=cst.Name(receiver), attr=cst.Name(plan.stack_attribute))
                if receiver else cst.Name(plan.stack_attribute))],
            value=cst.parse_expression("contextlib.ExitStack()"))],
            trailing_whitespace=cst.TrailingWhitespace())
        if plan.factory:
            entered = cst.Call(func=cst.parse_expression(f"{stack}.enter_context"),
                               args=[cst.Arg(value=assign.value)])
            stored = cst.SimpleStatementLine(body=[assign.with_changes(value=entered)],
                                             trailing_whitespace=site.trailing_whitespace)

            def too_long(line: cst.SimpleStatementLine) -> bool:
                return column + len(statement_code(line).splitlines()[0]) > line_length()

            if too_long(stored) and assign.value.args:  # the factory's arguments first
                stored = stored.with_changes(body=[assign.with_changes(
                    value=entered.with_changes(args=[cst.Arg(
                        value=explode_args(assign.value))]))])
            if too_long(stored):  # then the call entered, on a line of its own
                stored = stored.with_changes(body=[assign.with_changes(
                    value=explode_args(entered))])
            return [first, stored]
        call, uses_cc = runner_call(assign.value, self.runner, target=self.target,
                                    compilation_config=plan.compilation_config)
        if uses_cc:
            self.needs.add("CompilationConfig")
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
        return [first, second]

    def _close(self, stmt: cst.BaseStatement) -> cst.BaseStatement:
        """The teardown's first cleanup statement -> ``cls._engine_stack.close()``."""
        plan = self.plan
        close = cst.Expr(cst.parse_expression(f"{self._stack(plan.receiver[1])}.close()"))
        assert isinstance(stmt, cst.SimpleStatementLine)  # a cleanup statement
        return stmt.with_changes(body=[close])

"""Codemod for GPU001 on a helper class that owns an engine (with its GPU004): make the
class a context manager holding a runner and enter its instances with ``with``.

The plan (what moves, what goes, how safe) is :class:`lint_gpu_tests.fixplan.classes.ClassPlan`;
this module only applies it:

* ``self.llm = LLM(...)`` becomes ``self._runner = VllmRunner(...)`` (arguments mapped as
  for every GPU001 fix) followed by ``self.llm = weakref.proxy(self._runner.llm)``;
  ``VllmRunner`` is imported from ``lint_gpu_tests.runtime``, or with ``target = "vllm"``
  from the project's ``tests.conftest`` (first-party), as vLLM's tests import it;
* ``__enter__`` (enters the runner, returns ``self``) and ``__exit__`` (exits it) are added
  after ``__init__``;
* the cleanup statements of the class and the methods made only of cleanup are deleted;
* each ``tester = Tester(...)`` becomes ``with Tester(...) as tester:`` over the object's
  live range (the GPU005 with-block rewrite), its ``tester.close()`` call deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import IMPORTS, GpuCodemod, engine_locals
from lint_gpu_tests.codemods._cst import (
    explode_args,
    line_length,
    proxy_of,
    runner_call,
    statement_code,
)
from lint_gpu_tests.codemods._positions import StatementPositions
from lint_gpu_tests.codemods._wrap import WrapTransformer
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixplan.classes import ClassPlan
from lint_gpu_tests.ftypes import FixKind


class MakeEngineOwnerContextManager(GpuCodemod[ClassPlan]):
    """Rewrite one engine-owning helper class per pass into a context manager over the
    runner, and its instances of this module into with-blocks (unsafe: README, "Fix safety")."""

    DESCRIPTION = ("Make helper classes that own a vLLM engine context managers over "
                   "`VllmRunner` and enter them with `with` (GPU001).")
    PLAN = ClassPlan
    KINDS = (FixKind.ENGINE_OWNER_CONTEXT_MANAGER,)
    CODES = frozenset({"GPU001"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[ClassPlan]) -> cst.Module:
        plan = plans[0]
        config = self.config
        as_runner = replace(config, runner_classes=(*config.runner_classes, plan.class_name))
        positions = StatementPositions(tree, module.tree, self.printer)
        transformer = _ClassTransformer(plan, as_runner, positions, engine_locals(module), tree)
        new_tree = tree.visit(transformer)
        if not transformer.changed:
            return tree
        self.add_imports(transformer.needs | {"weakref"})
        if plan.import_from == IMPORTS["VllmRunner"][0]:
            self.add_imports({"VllmRunner"})
        else:  # ``target = "vllm"``: vLLM's runner, from the project's tests/conftest.py
            self.add_project_import(plan.import_from, transformer.held_runner_class())
        self.remove_unused(module, new_tree)
        return new_tree


class _ClassTransformer(WrapTransformer):
    """The with-block rewrite of the instances, plus the class's own rewrite."""

    def __init__(self, plan: ClassPlan, config: Config, positions: StatementPositions,
                 engine_names: set[str], tree: cst.Module) -> None:
        super().__init__(plan.uses, config, positions, engine_names)
        self.reach = None  # the class and its instances: every statement is visited
        self.class_plan = plan
        self.tree = tree
        self.remove |= plan.remove_lines
        self.unwrap |= plan.unwrap_try_lines
        self._site: cst.SimpleStatementLine | None = None
        self._init: cst.FunctionDef | None = None
        self._class_body: cst.IndentedBlock | None = None

    # The construction: remembered by identity, split in two inside its block.
    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine
                                  ) -> cst.SimpleStatementLine:
        if self._line(original_node) == self.class_plan.site_line:
            self._site = updated_node
        return updated_node

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        if node.name.value == self.class_plan.class_name and isinstance(
                node.body, cst.IndentedBlock):
            self._class_body = node.body
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        new = super().leave_FunctionDef(original_node, updated_node)
        if self._line(original_node) == self.class_plan.init_line:
            self._init = new
        return new

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        block = super().leave_IndentedBlock(original_node, updated_node)
        body: list[cst.BaseStatement] = []
        for stmt in block.body:
            if self._site is not None and stmt is self._site:
                body.extend(self._split_construction(stmt))
                self.changed = True
            elif self._init is not None and stmt is self._init and \
                    original_node is self._class_body:
                body.append(stmt)
                body.extend(self._context_methods(original_node.body))
                self.changed = True
            else:
                body.append(stmt)
        return block.with_changes(body=body)

    # ------------------------------------------------------------------ pieces
    def _split_construction(self, site: cst.SimpleStatementLine) -> list[cst.BaseStatement]:
        """``self.llm = LLM(...)`` -> ``self._runner = VllmRunner(...)`` and
        ``self.llm = weakref.proxy(self._runner.llm)``."""
        plan = self.class_plan
        if plan.returned_by is not None:
            return self._split_return(site, plan.returned_by)
        assign = site.body[0]
        assert isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)
        target = assign.targets[0].target
        assert isinstance(target, cst.Attribute)
        owner = target.value
        call = self._runner_call(assign.value)
        held = target.with_changes(attr=cst.Name(plan.runner_attribute))
        first = site.with_changes(body=[assign.with_changes(
            targets=[assign.targets[0].with_changes(target=held)], value=call)])
        first = self._fitted(first, call)
        engine = cst.Attribute(value=held, attr=cst.Name(self.config.runner_attribute))
        second = cst.SimpleStatementLine(body=[cst.Assign(
            targets=[cst.AssignTarget(target=target.with_changes(value=owner))],
            value=proxy_of(engine))])
        return [first, second]

    def _runner_call(self, engine_call: cst.Call) -> cst.Call:
        """The engine call as the held runner's (arguments mapped for the target; a
        ``CompilationConfig`` it now names is imported)."""
        call, uses_cc = runner_call(engine_call, self.held_runner_class(),
                                    target=self.config.target,
                                    compilation_config=self.class_plan.compilation_config)
        if uses_cc:
            self.needs.add("CompilationConfig")
        return call

    def held_runner_class(self) -> str:
        """The runner class the helper class holds: the first configured, else ours."""
        return self.config.runner_classes[0] if self.config.runner_classes else "VllmRunner"

    def _fitted(self, first: cst.SimpleStatementLine, call: cst.Call
                ) -> cst.SimpleStatementLine:
        """``first`` (``<held> = <runner call>``), its call one argument a line where the
        one-line form passes the line length at the construction's column, or where its
        continuation lines were aligned with the old opening parenthesis (they would be
        misaligned under the new one)."""
        column = self.columns.get(self.class_plan.site_line, 0)
        aligned = "\n" in statement_code(call) and not isinstance(
            call.whitespace_before_args, cst.ParenthesizedWhitespace)
        if aligned or "\n" not in statement_code(call) and \
                column + len(statement_code(first).splitlines()[-1]) > line_length():
            return first.with_changes(body=[first.body[0].with_changes(
                value=explode_args(call))])
        return first

    def _split_return(self, site: cst.SimpleStatementLine, owner: str
                      ) -> list[cst.BaseStatement]:
        """``return LLM(...)`` (in the method whose result ``__init__`` stores) ->
        ``self._runner = VllmRunner(...)`` and ``return weakref.proxy(self._runner.llm)``."""
        plan = self.class_plan
        ret = site.body[0]
        assert isinstance(ret, cst.Return) and isinstance(ret.value, cst.Call)
        call = self._runner_call(ret.value)
        held = cst.Attribute(value=cst.Name(owner), attr=cst.Name(plan.runner_attribute))
        first = site.with_changes(body=[cst.Assign(
            targets=[cst.AssignTarget(target=held)], value=call)])
        first = self._fitted(first, call)
        engine = cst.Attribute(value=held, attr=cst.Name(self.config.runner_attribute))
        second = cst.SimpleStatementLine(body=[ret.with_changes(value=proxy_of(engine))])
        return [first, second]

    def _context_methods(self, original_body: Sequence[cst.BaseStatement]
                         ) -> list[cst.BaseStatement]:
        """``__enter__`` and ``__exit__``, spaced like the method after ``__init__``."""
        held = self.class_plan.runner_attribute
        indent = self.tree.default_indent
        init_index = next(i for i, s in enumerate(original_body)
                          if isinstance(s, cst.FunctionDef)
                          and self._line(s) == self.class_plan.init_line)
        following = original_body[init_index + 1] if init_index + 1 < len(original_body) \
            else None
        spacing = list(following.leading_lines) if isinstance(following, cst.FunctionDef) \
            and following.leading_lines else []
        # Empty lines only: ``EmptyLine()`` indents to the block, which writes a line of
        # nothing but spaces.
        spacing = [cst.EmptyLine(indent=False) for line in spacing
                   if line.comment is None] or [cst.EmptyLine(indent=False)]
        code = (f"def __enter__(self):\n{indent}self.{held}.__enter__()\n{indent}return self\n",
                f"def __exit__(self, *exc_info):\n{indent}self.{held}.__exit__(*exc_info)\n")
        return [cst.parse_statement(c, config=self.tree.config_for_parsing).with_changes(
            leading_lines=spacing) for c in code]

"""Codemod for GPU008: set and remove engine environment variables through ``monkeypatch``.

The rule module decides everything (:func:`find_mutations`, :func:`plan_fix`); this command
replaces each planned statement by its ``<receiver>.setenv(...)``/``delenv(...)`` calls, adds
the ``monkeypatch`` parameter, or opens ``with pytest.MonkeyPatch.context() as mp:`` over the
rest of a wide-scoped fixture's body.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.codemods._base import GpuCodemod
from lint_gpu_tests.codemods._cst import (
    add_param,
    fit_call,
    fit_signature,
    leading_lines,
    line_length,
)
from lint_gpu_tests.codemods._imports import has_blank
from lint_gpu_tests.codemods._positions import ReachedStatements, StatementPositions
from lint_gpu_tests.fixplan.env import CONTEXT_NAME, MONKEYPATCH, EnvFixPlan
from lint_gpu_tests.ftypes import FixKind

CONTEXT_EXPR = "pytest.MonkeyPatch.context()"


class UseMonkeypatchEnv(GpuCodemod[EnvFixPlan]):
    """``os.environ["VLLM_X"] = v`` -> ``monkeypatch.setenv("VLLM_X", v)`` and the like."""

    DESCRIPTION = "Set engine environment variables through monkeypatch (GPU008)."
    PLAN = EnvFixPlan
    KINDS = (FixKind.USE_MONKEYPATCH_ENV,)
    CODES = frozenset({"GPU008"})

    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[EnvFixPlan]) -> cst.Module:
        # statement line -> its plan
        edits = {plan.statement_line: plan for plan in plans if not plan.fixture}
        moves = [plan for plan in plans if plan.fixture]
        positions = StatementPositions(tree, module.tree, self.printer)
        transformer = _UseMonkeypatch(edits, positions)
        new_tree = tree.visit(transformer) if edits else tree
        moved = _move_into_fixture(tree, new_tree, positions, moves) if moves else None
        if moved is not None:
            new_tree = moved
        elif not transformer.changed:
            return tree
        self.add_imports({need for plan in plans for need in plan.needs})
        self._remove_unused_os(module, new_tree)
        return new_tree

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """As the base class; then a module whose first import was removed does not start
        with the blank line that separated it from the next section."""
        new = super().transform_module(tree)
        if new is tree or not new.body or not tree.body or tree.body[0].leading_lines:
            return new
        lead = list(new.body[0].leading_lines)
        while lead and lead[0].comment is None:
            lead.pop(0)
        if len(lead) == len(new.body[0].leading_lines):
            return new
        first = new.body[0].with_changes(leading_lines=lead)
        return new.with_changes(body=[first, *new.body[1:]])

    def _remove_unused_os(self, module: ModuleAnalysis, new_tree: cst.Module) -> None:
        """Schedule removal of ``import os`` / ``from os import environ`` when the rewrite
        left them unused (LibCST's visitor keeps an import that is still referenced; one that
        ``new_tree`` still reads is not scheduled, :func:`names_read`)."""
        considered = {local for local, qualified in module.imports.items()
                      if (qualified == "os" and local == "os")
                      or qualified in ("os.environ", "os.putenv", "os.unsetenv")}
        still_read = self.still_read(module, new_tree, considered)
        for local, qualified in module.imports.items():
            if local not in considered or local in still_read:
                continue
            if qualified == "os" and local == "os":
                self.remove_import("os")
            elif qualified in ("os.environ", "os.putenv", "os.unsetenv"):
                obj = qualified.split(".")[1]
                self.remove_import("os", obj, local if local != obj else None)


class _UseMonkeypatch(ReachedStatements):
    def __init__(self, edits: dict[int, EnvFixPlan],
                 positions: StatementPositions) -> None:
        self.edits = edits
        self.params = {plan.function_line for plan in edits.values() if plan.add_param}
        self.wraps = {plan.function_line: plan.wrap_line for plan in edits.values()
                      if plan.wrap_line is not None}
        self.preludes = {plan.function_line: plan for plan in edits.values()
                         if plan.prelude_line is not None}
        super().__init__(positions, {*edits, *self.params, *self.wraps, *self.preludes})
        self.expanded: dict[int, int] = {}
        self.changed = False

    def _line(self, node: cst.CSTNode) -> int:
        return self.positions.start_line(node)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        plan = self.edits.get(self._line(original_node))
        if plan is None:
            return updated_node
        calls = _replacement_calls(updated_node.body[0], plan.receiver)
        if not calls:
            return updated_node
        column = self.positions.start_column(original_node)
        lines = [cst.SimpleStatementLine(body=[cst.Expr(fit_call(call, column))])
                 for call in calls]
        lines[0] = lines[0].with_changes(leading_lines=updated_node.leading_lines)
        lines[-1] = lines[-1].with_changes(trailing_whitespace=updated_node.trailing_whitespace)
        self.changed = True
        self.expanded[self._line(original_node)] = len(lines)
        return lines[0] if len(lines) == 1 else cst.FlattenSentinel(lines)

    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        line = self._line(original_node)
        if line in self.params:
            updated_node = fit_signature(
                updated_node.with_changes(params=add_param(updated_node.params, MONKEYPATCH)),
                self.positions.start_column(original_node),
                updated_node)
        wrap_line = self.wraps.get(line)
        if wrap_line is not None and isinstance(updated_node.body, cst.IndentedBlock) and \
                isinstance(original_node.body, cst.IndentedBlock):
            lines = [self._line(s) for s in original_node.body.body]
            if wrap_line in lines:
                # Statements before the wrap point may have become several (``update``).
                start = sum(self.expanded.get(n, 1) for n in lines[:lines.index(wrap_line)])
                body = _wrap_from(updated_node.body.body, start)
                updated_node = updated_node.with_changes(
                    body=updated_node.body.with_changes(body=body))
        prelude = self.preludes.get(line)
        if prelude is not None and isinstance(updated_node.body, cst.IndentedBlock) and \
                isinstance(original_node.body, cst.IndentedBlock):
            lines = [self._line(s) for s in original_node.body.body]
            if prelude.prelude_line in lines:
                start = sum(self.expanded.get(n, 1)
                            for n in lines[:lines.index(prelude.prelude_line)])
                body = _insert_before(updated_node.body.body, start, prelude.prelude)
                updated_node = updated_node.with_changes(
                    body=updated_node.body.with_changes(body=body))
        return updated_node


def _move_into_fixture(original: cst.Module, updated: cst.Module,
                       positions: StatementPositions,
                       plans: Sequence[EnvFixPlan]) -> cst.Module | None:
    """``updated`` (``original`` with the other fixes made, the same top-level statements)
    with the top-level statements of ``plans`` moved, in order, into one module-scoped
    autouse fixture placed before the statement at the plans' ``fixture_line`` (at the
    end for ``0``): each becomes its ``mp.setenv``/``delenv`` calls in
    ``with pytest.MonkeyPatch.context() as mp:`` around the fixture's ``yield``, its
    comments above them (above the fixture when one would be too long there). The
    fixture is set off by two blank lines, as is the statement after it; a removed
    statement's blank lines go to the statement after it. ``None`` when nothing moved."""
    if len(original.body) != len(updated.body):
        return None
    lines = {plan.statement_line for plan in plans}
    where = plans[0].fixture_line
    calls: list[cst.SimpleStatementLine] = []
    body: list[cst.BaseStatement] = []
    fixture_at: int | None = None
    spare: list[cst.EmptyLine] = []  # blank lines of removed statements
    above: list[cst.EmptyLine] = []  # comments that go above the fixture
    for before, stmt in zip(original.body, updated.body, strict=True):
        line = positions.start_line(before)
        if line == where:
            fixture_at = len(body)
        if line not in lines or not isinstance(stmt, cst.SimpleStatementLine):
            if spare and not has_blank(stmt):
                stmt = stmt.with_changes(leading_lines=[*spare[:2], *leading_lines(stmt)])
            spare = []
            body.append(stmt)
            continue
        new = [cst.SimpleStatementLine(body=[cst.Expr(fit_call(call, 8))])
               for call in _replacement_calls(stmt.body[0], CONTEXT_NAME)]
        if not new:
            return None
        comments = [e for e in stmt.leading_lines if e.comment is not None]
        spare = [e for e in stmt.leading_lines if e.comment is None] or spare
        if any(len(e.comment.value) + 8 > line_length() for e in comments if e.comment):
            above += comments  # too wide inside the fixture: they stay at column 0
            comments = []
        new[0] = new[0].with_changes(leading_lines=comments)
        new[-1] = new[-1].with_changes(trailing_whitespace=stmt.trailing_whitespace)
        calls += new
    if not calls:
        return None
    spelled = plans[0].pytest_name
    fixture = cst.parse_statement(
        f'@{spelled}.fixture(scope="module", autouse=True)\ndef {plans[0].fixture}():\n'
        f"    with {spelled}.MonkeyPatch.context() as {CONTEXT_NAME}:\n        yield\n")
    assert isinstance(fixture, cst.FunctionDef) and isinstance(fixture.body, cst.IndentedBlock)
    block = fixture.body.body[0]
    assert isinstance(block, cst.With) and isinstance(block.body, cst.IndentedBlock)
    block = block.with_changes(body=block.body.with_changes(
        body=[*calls, *block.body.body]))
    fixture = fixture.with_changes(
        body=fixture.body.with_changes(body=[block]),
        leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *above])
    index = len(body) if fixture_at is None else fixture_at
    if index < len(body):
        after = body[index]
        lead = list(leading_lines(after))
        blanks = next((i for i, e in enumerate(lead) if e.comment is not None), len(lead))
        body[index] = after.with_changes(
            leading_lines=[cst.EmptyLine()] * max(0, 2 - blanks) + lead)
    body.insert(index, fixture)
    return updated.with_changes(body=body)


def _insert_before(updated: Sequence[cst.BaseStatement], index: int,
                   statements: Sequence[str]) -> list[cst.BaseStatement]:
    """``updated`` with ``statements`` inserted before the one at ``index``, which gives
    them its leading comments and blank lines."""
    body = list(updated)
    lead = leading_lines(body[index])
    body[index] = body[index].with_changes(leading_lines=[])
    new = [cst.parse_statement(text + "\n") for text in statements]
    new[0] = new[0].with_changes(leading_lines=lead)
    return [*body[:index], *new, *body[index:]]


def _wrap_from(updated: Sequence[cst.BaseStatement], start: int) -> list[cst.BaseStatement]:
    """``updated`` with the statements from index ``start`` to the end moved into
    ``with pytest.MonkeyPatch.context() as mp:``; the first moved statement's leading
    comments and blank lines go above the ``with``."""
    moved = list(updated[start:])
    lead = leading_lines(moved[0])
    moved[0] = moved[0].with_changes(leading_lines=[])
    block = cst.With(
        items=[cst.WithItem(item=cst.parse_expression(CONTEXT_EXPR),
                            asname=cst.AsName(name=cst.Name(CONTEXT_NAME)))],
        body=cst.IndentedBlock(body=moved),
        leading_lines=lead,
    )
    return [*updated[:start], block]


def _call(receiver: str, method: str, *args: cst.BaseExpression,
          raising: bool = True) -> cst.Call:
    """``receiver.method(args...)`` (``raising=False`` appended when asked), built from the
    original expression nodes so their inner layout and comments stay as written."""
    arguments = [cst.Arg(value=a) for a in args]
    if not raising:
        arguments.append(cst.Arg(keyword=cst.Name("raising"), value=cst.Name("False"),
                                 equal=cst.AssignEqual(
                                     whitespace_before=cst.SimpleWhitespace(""),
                                     whitespace_after=cst.SimpleWhitespace(""))))
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    arguments = [a.with_changes(comma=comma) for a in arguments[:-1]] + arguments[-1:]
    return cst.Call(func=cst.Attribute(value=cst.Name(receiver), attr=cst.Name(method)),
                    args=arguments)


def _subscript_key(node: cst.BaseExpression) -> cst.BaseExpression | None:
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and \
            isinstance(node.slice[0].slice, cst.Index):
        return node.slice[0].slice.value
    return None


def _keyword_key(name: cst.Name) -> cst.SimpleString:
    return cst.SimpleString(f'"{name.value}"')


def _replacement_calls(small: cst.BaseSmallStatement, receiver: str) -> list[cst.Call]:
    """The ``monkeypatch`` calls that replace one planned small statement (the shapes
    :func:`find_mutations` gives a rewrite), or ``[]`` for anything else."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        key = _subscript_key(small.targets[0].target)
        return [] if key is None else [_call(receiver, "setenv", key, small.value)]
    if isinstance(small, cst.Del):
        targets = [e.value for e in small.target.elements] if isinstance(
            small.target, cst.Tuple) else [small.target]
        keys = [_subscript_key(t) for t in targets]
        return [_call(receiver, "delenv", k) for k in keys if k is not None]
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return []
    call = small.value
    method = call.func.attr.value if isinstance(call.func, cst.Attribute) else \
        call.func.value if isinstance(call.func, cst.Name) else ""
    args = [a.value for a in call.args if a.keyword is None and not a.star]
    if method == "putenv" and len(args) == 2:
        return [_call(receiver, "setenv", *args)]
    if method == "unsetenv" and len(args) == 1:
        return [_call(receiver, "delenv", args[0], raising=False)]
    if method == "pop" and args:
        return [_call(receiver, "delenv", args[0], raising=len(args) == 1)]
    if method == "setdefault" and len(args) == 2 and isinstance(call.func, cst.Attribute):
        current = cst.Call(func=cst.Attribute(value=call.func.value, attr=cst.Name("get")),
                           args=[cst.Arg(value=args[0], comma=cst.Comma(
                               whitespace_after=cst.SimpleWhitespace(" "))),
                                 cst.Arg(value=args[1])])
        return [_call(receiver, "setenv", args[0], current)]
    if method != "update":
        return []
    out: list[cst.Call] = []
    for arg in call.args:
        if arg.keyword is not None:
            out.append(_call(receiver, "setenv", _keyword_key(arg.keyword), arg.value))
        elif isinstance(arg.value, cst.Dict):
            out += [_call(receiver, "setenv", e.key, e.value) for e in arg.value.elements
                    if isinstance(e, cst.DictElement)]
        elif isinstance(arg.value, cst.Call):
            out += [_call(receiver, "setenv", _keyword_key(a.keyword), a.value)
                    for a in arg.value.args if a.keyword is not None]
    return out

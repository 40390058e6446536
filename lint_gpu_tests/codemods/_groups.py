"""The ``contextlib.ExitStack()`` rewrite of engine groups and factory fixtures.

Applies a :class:`lint_gpu_tests.fixplan.plan.WrapPlan` whose ``group`` is set
(:mod:`lint_gpu_tests.fixplan.groups` says which shapes): the engine call becomes
``weakref.proxy(stack.enter_context(<runner>(...)).llm)`` where it stands (in the
comprehension, the loop body or the factory), and the statements of the plan's range go
into ``with contextlib.ExitStack() as stack:``. For a factory fixture, its final
``return make`` becomes ``yield make``, so the stack closes at the fixture's teardown.
"""

from __future__ import annotations

import libcst as cst

from lint_gpu_tests.codemods._cst import (
    explode_args,
    line_length,
    proxy_of,
    runner_call,
    statement_code,
)
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixplan.plan import WrapPlan


def _yield_instead(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """``return make`` -> ``yield make`` (the factory fixture's last statement)."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(
            stmt.body[0], cst.Return) and stmt.body[0].value is not None:
        return stmt.with_changes(body=[cst.Expr(cst.Yield(value=stmt.body[0].value))])
    return stmt


def _entering_line(stmt: cst.CSTNode) -> str:
    """The line of ``stmt`` (as written at indentation 0) that enters a runner."""
    return next((line for line in statement_code(stmt).splitlines()
                 if ".enter_context(" in line), "")


def _too_long(stmt: cst.CSTNode, column: int) -> bool:
    """Whether the line of ``stmt`` that enters a runner, written in the with-block at
    ``column`` + 4, passes :func:`line_length`."""
    return column + 4 + len(_entering_line(stmt)) > line_length()


def _broken(value: cst.BaseExpression, extra: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[],
                                       indent=True, last_line=cst.SimpleWhitespace(extra))


def _break_comprehension(stmt: cst.BaseStatement, exploded: bool = False) -> cst.BaseStatement:
    """``x = [elt for ...]`` written on one line (but for the runner's arguments, when
    ``exploded``) -> the element and the ``for`` clause each on a line of their own inside
    the brackets, as black lays out a long comprehension; ``stmt`` itself for anything
    else."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)):
        return stmt
    value = stmt.body[0].value
    if "\n" in statement_code(value) and not exploded:
        return stmt
    inner, outer = _broken(value, "    "), _broken(value, "")
    new: cst.BaseExpression
    if isinstance(value, cst.ListComp):
        new = value.with_changes(
            lbracket=value.lbracket.with_changes(whitespace_after=inner),
            for_in=value.for_in.with_changes(whitespace_before=inner),
            rbracket=value.rbracket.with_changes(whitespace_before=outer))
    elif isinstance(value, cst.DictComp):
        new = value.with_changes(
            lbrace=value.lbrace.with_changes(whitespace_after=inner),
            for_in=value.for_in.with_changes(whitespace_before=inner),
            rbrace=value.rbrace.with_changes(whitespace_before=outer))
    else:
        return stmt
    return stmt.with_changes(body=[stmt.body[0].with_changes(value=new)])


def build_group_with(plan: WrapPlan, site: cst.BaseStatement, call: cst.Call | None,
                     rest: list[cst.BaseStatement], config: Config,
                     needs: set[str], column: int = 0) -> cst.With:
    """The with-block for ``plan`` (``plan.group`` set) over ``site`` and ``rest``.

    Args:
        plan: the group plan; ``plan.group.runner`` names what enters each engine.
        site: the (already transformed) statement where the block starts.
        call: the engine call inside ``site`` (the first one, outermost first).
        rest: the statements after it that the block covers, in order.
        config: the run's settings (target, runner attribute, runner classes).
        needs: the imports the module needs; this adds to it.
        column: the site's column (0-based); a line that enters a runner and would pass
            :func:`line_length` in the block gets the runner's arguments one per line, as
            the single-engine rewrite lays out a long with-header.

    Raises:
        AssertionError: ``site`` holds no engine call (the plan does not fit the tree).
    """
    group = plan.group
    assert group is not None
    assert call is not None, "planned group holds no engine call"
    new_call, uses_cc = runner_call(call, group.runner, target=config.target,
                                    compilation_config=plan.compilation_config,
                                    takes_model_keyword=group.runner != "vllm_runner_factory")
    if "\n" in statement_code(call) and not isinstance(call.whitespace_before_args,
                                                       cst.ParenthesizedWhitespace):
        # Continuation lines aligned with the old parenthesis: one argument per line.
        new_call = explode_args(new_call)
    if uses_cc:
        needs.add("CompilationConfig")
    if plan.use_class and config.target == "bundled":
        needs.add("VllmRunner")
    needs.update({"contextlib", "weakref"})

    def entered(runner: cst.Call) -> cst.BaseStatement:
        attribute: cst.BaseExpression = cst.Call(
            func=cst.Attribute(value=cst.Name(group.stack), attr=cst.Name("enter_context")),
            args=[cst.Arg(value=runner)])
        if config.engine_at:
            attribute = cst.Attribute(value=attribute, attr=cst.Name(config.runner_attribute))
        replaced = site.deep_replace(call, proxy_of(attribute))
        assert isinstance(replaced, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        return replaced

    new_site = entered(new_call)
    if "\n" not in statement_code(new_call) and _too_long(new_site, column):
        # Too long for the block: a comprehension is broken at its brackets first, then
        # the runner's arguments go one per line (more indented inside those brackets).
        broken = _break_comprehension(new_site) if group.kind == "comprehension" \
            else new_site
        we_broke, new_site = broken is not new_site, broken
        if _too_long(new_site, column):
            line = _entering_line(new_site)
            extra = line[:len(line) - len(line.lstrip())] if group.kind == "comprehension" \
                else ""
            new_site = entered(explode_args(new_call, extra + "    ", extra))
            if we_broke:
                new_site = _break_comprehension(new_site, exploded=True)
    assert isinstance(new_site, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    if group.kind == "comprehension" and isinstance(new_site, cst.SimpleStatementLine) and \
            isinstance(new_site.body[0], cst.Assign) and not any(
                _reads(stmt, group.container) for stmt in rest):
        # Only cleanup used the group (``del llms``, a shutdown loop), which went with the
        # rewrite: the runners stay entered on the stack, the proxies need no name.
        new_site = new_site.with_changes(body=[cst.Expr(new_site.body[0].value)])
    body: list[cst.BaseStatement] = [new_site.with_changes(leading_lines=[]), *rest]
    if group.kind == "factory":
        body[-1] = _yield_instead(body[-1])
    return cst.With(
        items=[cst.WithItem(item=cst.parse_expression("contextlib.ExitStack()"),
                            asname=cst.AsName(name=cst.Name(group.stack)))],
        body=cst.IndentedBlock(body=body),
        leading_lines=new_site.leading_lines,
    )


class _NameSeen(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.seen = False

    def visit_Name(self, node: cst.Name) -> None:
        self.seen = self.seen or node.value == self.name


def _reads(node: cst.CSTNode, name: str) -> bool:
    """True when a ``Name`` node ``name`` occurs in ``node``."""
    finder = _NameSeen(name)
    node.visit(finder)
    return finder.seen

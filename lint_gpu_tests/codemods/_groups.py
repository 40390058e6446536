"""The ``contextlib.ExitStack()`` rewrite of issue 11's groups and factory fixtures.

Applies a :class:`lint_gpu_tests.fixplan.plan.WrapPlan` whose ``group`` is set
(:mod:`lint_gpu_tests.fixplan.groups` says which shapes): the engine call becomes
``weakref.proxy(stack.enter_context(<runner>(...)).llm)`` where it stands (in the
comprehension, the loop body or the factory), and the statements of the plan's range go
into ``with contextlib.ExitStack() as stack:``. For a factory fixture, its final
``return make`` becomes ``yield make``, so the stack closes at the fixture's teardown.
"""

from __future__ import annotations

import libcst as cst

from lint_gpu_tests.codemods._cst import explode_args, proxy_of, runner_call, statement_code
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixplan.plan import WrapPlan


def _yield_instead(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """``return make`` -> ``yield make`` (the factory fixture's last statement)."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(
            stmt.body[0], cst.Return) and stmt.body[0].value is not None:
        return stmt.with_changes(body=[cst.Expr(cst.Yield(value=stmt.body[0].value))])
    return stmt


def build_group_with(plan: WrapPlan, site: cst.BaseStatement, call: cst.Call | None,
                     rest: list[cst.BaseStatement], config: Config,
                     needs: set[str]) -> cst.With:
    """The with-block for ``plan`` (``plan.group`` set) over ``site`` and ``rest``.

    Args:
        plan: the group plan; ``plan.group.runner`` names what enters each engine.
        site: the (already transformed) statement where the block starts.
        call: the engine call inside ``site`` (the first one, outermost first).
        rest: the statements after it that the block covers, in order.
        config: the run's settings (target, runner attribute, runner classes).
        needs: the imports the module needs; this adds to it.

    Raises:
        AssertionError: ``site`` holds no engine call (the plan does not fit the tree).
    """
    group = plan.group
    assert group is not None
    assert call is not None, "planned group holds no engine call"
    new_call, uses_cc = runner_call(call, group.runner, target=config.target,
                                    compilation_config=plan.compilation_config)
    if "\n" in statement_code(call) and not isinstance(call.whitespace_before_args,
                                                       cst.ParenthesizedWhitespace):
        # Continuation lines aligned with the old parenthesis: one argument per line.
        new_call = explode_args(new_call)
    if uses_cc:
        needs.add("CompilationConfig")
    if plan.use_class and config.target == "bundled":
        needs.add("VllmRunner")
    needs.update({"contextlib", "weakref"})
    entered = cst.Attribute(
        value=cst.Call(func=cst.Attribute(value=cst.Name(group.stack),
                                          attr=cst.Name("enter_context")),
                       args=[cst.Arg(value=new_call)]),
        attr=cst.Name(config.runner_attribute))
    new_site = site.deep_replace(call, proxy_of(entered))
    assert isinstance(new_site, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    body: list[cst.BaseStatement] = [new_site.with_changes(leading_lines=[]), *rest]
    if group.kind == "factory":
        body[-1] = _yield_instead(body[-1])
    return cst.With(
        items=[cst.WithItem(item=cst.parse_expression("contextlib.ExitStack()"),
                            asname=cst.AsName(name=cst.Name(group.stack)))],
        body=cst.IndentedBlock(body=body),
        leading_lines=new_site.leading_lines,
    )

"""``LLM(**mapping)`` onto vLLM's ``VllmRunner`` (``target = "vllm"``).

The planner (:func:`lint_gpu_tests.analysis.mappings.plan_mapping`) decides; this module only builds
the nodes: the ``**mapping`` argument becomes ``**_runner_kwargs(mapping, <defaults>)`` and the
module gets the ``_runner_kwargs`` helper once, before its first function or class.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis.mappings import RUNNER_KWARGS_HELPER, RUNNER_KWARGS_NAME
from lint_gpu_tests.codemods._cst import line_length, statement_code


def through_helper(call: cst.Call, defaults: Sequence[str]) -> cst.Call:
    """``call`` with its ``**mapping`` argument replaced by ``**_runner_kwargs(mapping,
    *defaults)`` (``defaults`` are ``k=v`` sources).

    Raises:
        ValueError: ``call`` has no ``**`` argument (the planner only plans calls with one).
    """
    index = next((i for i, a in enumerate(call.args) if a.star == "**"), None)
    if index is None:
        raise ValueError(f"no `**` argument in {statement_code(call)!r}")
    star = call.args[index]
    helper = cst.parse_expression(f"{RUNNER_KWARGS_NAME}(x, {', '.join(defaults)})"
                                  if defaults else f"{RUNNER_KWARGS_NAME}(x)")
    assert isinstance(helper, cst.Call)
    helper = helper.with_changes(args=[helper.args[0].with_changes(value=star.value),
                                       *helper.args[1:]])
    args = list(call.args)
    args[index] = star.with_changes(value=helper)
    return call.with_changes(args=args)


def _break(extra: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[],
                                       indent=True, last_line=cst.SimpleWhitespace(extra))


def explode_helper(call: cst.Call, column: int) -> cst.Call:
    """When ``**_runner_kwargs(...)`` on a line of its own (at ``column`` + 4, where an
    exploded runner call puts its arguments) passes :func:`line_length`, its arguments go one
    per line (at + 8, the closing parenthesis back at + 4), as black lays it out."""
    args = list(call.args)
    for index, arg in enumerate(args):
        helper = arg.value
        if not (arg.star == "**" and isinstance(helper, cst.Call)
                and statement_code(helper.func) == RUNNER_KWARGS_NAME):
            continue
        if column + 4 + len(statement_code(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT))
                            ) + 1 <= line_length():
            return call
        inner = [a.with_changes(comma=cst.Comma(whitespace_after=_break(
            "    " if i == len(helper.args) - 1 else "        ")))
            for i, a in enumerate(helper.args)]
        args[index] = arg.with_changes(value=helper.with_changes(
            whitespace_before_args=_break("        "), args=inner))
        return call.with_changes(args=args)
    return call


def add_helper(tree: cst.Module) -> cst.Module:
    """``tree`` with the ``_runner_kwargs`` helper before its first top-level function or
    class (after the imports and constants; at the end when it has none), two blank lines
    above it; unchanged when it already defines the helper."""
    body = list(tree.body)
    if any(isinstance(s, cst.FunctionDef) and s.name.value == RUNNER_KWARGS_NAME for s in body):
        return tree
    helper = cst.parse_statement(RUNNER_KWARGS_HELPER, config=tree.config_for_parsing)
    assert isinstance(helper, cst.FunctionDef)
    at = next((i for i, s in enumerate(body) if isinstance(s, (cst.FunctionDef, cst.ClassDef))),
              len(body))
    blank = [cst.EmptyLine(), cst.EmptyLine()] if at else []
    body.insert(at, helper.with_changes(leading_lines=blank))
    return tree.with_changes(body=body)

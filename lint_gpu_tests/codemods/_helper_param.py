"""The runner fixture as a helper's first parameter and its callers' first argument (a helper
that builds the engine; planned by :func:`lint_gpu_tests.analysis.helper_calls.helper_callers`).

Both keep the layout of the list they join: after ``(`` on the same line, or on a line of its
own when the list starts on the next line.
"""

from __future__ import annotations

import libcst as cst


def _comma_before(opening: cst.BaseParenthesizableWhitespace) -> cst.Comma:
    """The comma after a new first element: the line break of a list that starts on the line
    after ``(`` (so the old first element keeps its own line), else one space."""
    if isinstance(opening, cst.ParenthesizedWhitespace):
        return cst.Comma(whitespace_after=opening)
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def prepend_param(params: cst.Parameters, name: str,
                  opening: cst.BaseParenthesizableWhitespace) -> cst.Parameters:
    """``params`` with a plain parameter ``name`` first (positional-only when the list has
    positional-only parameters). ``opening`` is ``FunctionDef.whitespace_before_params``."""
    new = cst.Param(name=cst.Name(name))
    for field in ("posonly_params", "params"):
        existing = list(getattr(params, field))
        if existing:
            return params.with_changes(**{field: [new.with_changes(
                comma=_comma_before(opening)), *existing]})
    more = params.star_arg != cst.MaybeSentinel.DEFAULT or bool(params.kwonly_params) \
        or params.star_kwarg is not None
    return params.with_changes(params=[new.with_changes(comma=_comma_before(opening))
                                       if more else new])


def prepend_arg(call: cst.Call, name: str) -> cst.Call:
    """``call`` with the name ``name`` as its first argument."""
    new = cst.Arg(value=cst.Name(name))
    if call.args:
        new = new.with_changes(comma=_comma_before(call.whitespace_before_args))
    return call.with_changes(args=[new, *call.args])

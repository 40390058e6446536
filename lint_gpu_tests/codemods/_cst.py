"""LibCST building blocks shared by the codemods: call rewriting, parameters, blocks.

Nothing here decides *whether* to fix: :mod:`lint_gpu_tests.fixplan` does that on the
``ast`` tree. These helpers only build nodes, keeping the original formatting of every
node they do not replace.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import libcst as cst

from lint_gpu_tests.config import DEFAULT_LINE_LENGTH
from lint_gpu_tests.fixplan.plan import RENAMED_KWARGS, VLLM_TARGET_DEFAULTS


def _comma() -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def reorder_args(original: Sequence[cst.Arg], new: list[cst.Arg]) -> list[cst.Arg]:
    """Give ``new`` (a rearrangement of ``original`` plus added args) the commas of
    ``original`` position by position, so line breaks and a trailing comma survive."""
    if not new:
        return new
    commas: list[cst.Comma | cst.MaybeSentinel] = [a.comma for a in original]
    last_comma: cst.Comma | cst.MaybeSentinel = commas[-1] if commas else cst.MaybeSentinel.DEFAULT
    out: list[cst.Arg] = []
    for i, arg in enumerate(new):
        is_last = i == len(new) - 1
        if is_last:
            comma = last_comma
        elif i < len(commas) - 1:
            comma = commas[i]
        elif len(commas) >= 2 and isinstance(commas[-2], cst.Comma):
            comma = commas[-2]
        else:
            comma = _comma()
        if not is_last and not isinstance(comma, cst.Comma):
            comma = _comma()
        out.append(arg.with_changes(comma=comma))
    return out


def runner_call(
    call: cst.Call, func_name: str, *, target: str, compilation_config: str | None = None,
    add_defaults: bool = True, takes_model_keyword: bool = True,
) -> tuple[cst.Call, bool]:
    """Turn an engine call into a runner call (the argument mapping of README, "Fix safety").

    Every argument keeps its place and its comments. The bundled runner takes ``LLM``'s
    keywords as they are (``model=``, ``tokenizer=``); for vLLM's runner (``target="vllm"``)
    ``model=`` becomes the first positional argument where it is the first keyword (else
    ``model_name=``) and ``tokenizer=`` becomes ``tokenizer_name=``.
    ``takes_model_keyword=False`` (the bundled ``vllm_runner_factory``, whose first parameter
    is ``model_name``) maps ``model=`` so under the bundled target too. With
    ``target="vllm"`` each default in which vLLM's ``VllmRunner`` differs from ``LLM`` is
    added when not set, before any ``**kwargs``, and a given ``compilation_config`` is
    replaced by ``compilation_config`` (source of the planner's equivalent,
    :func:`lint_gpu_tests.fixplan.safety.compilation_config_equivalent`) unless that is ``None``;
    ``add_defaults=False`` leaves the defaults out (they travel with a ``**mapping``,
    :mod:`lint_gpu_tests.codemods._mapping`).

    Returns:
        The new call, and whether ``CompilationConfig`` is now referenced.
    """
    args = list(call.args)
    if target == "vllm" or not takes_model_keyword:
        # vLLM's runner takes the model as ``model_name`` and the tokenizer as
        # ``tokenizer_name``; each argument keeps its place.
        for i, arg in enumerate(args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "model":
                if all(a.keyword is None and a.star == "" for a in args[:i]):
                    args[i] = arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
                else:
                    args[i] = arg.with_changes(keyword=cst.Name("model_name"))
            elif keyword in RENAMED_KWARGS and target == "vllm":
                args[i] = arg.with_changes(keyword=cst.Name(RENAMED_KWARGS[keyword]))
    uses_compilation_config = False
    if target == "vllm":
        given = {a.keyword.value for a in args if a.keyword is not None}
        star_at = next((i for i, a in enumerate(args) if a.star == "**"), len(args))
        extra: list[cst.Arg] = []
        for key, default in VLLM_TARGET_DEFAULTS:
            if key not in given and add_defaults:
                extra.append(cst.Arg(
                    keyword=cst.Name(key),
                    value=cst.parse_expression(default),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                          whitespace_after=cst.SimpleWhitespace("")),
                ))
                uses_compilation_config |= key == "compilation_config"
        fixed: list[cst.Arg] = []
        for arg in args:
            if arg.keyword is not None and arg.keyword.value == "compilation_config" and \
                    compilation_config is not None:
                # The planner's explicit equivalent of a falsy or run-time value.
                arg = arg.with_changes(value=cst.parse_expression(compilation_config))
                uses_compilation_config |= "CompilationConfig" in compilation_config
            fixed.append(arg)
        args = fixed[:star_at] + extra + fixed[star_at:]
    new_args = reorder_args(call.args, args)
    return call.with_changes(func=cst.parse_expression(func_name), args=new_args), \
        uses_compilation_config


def add_param(params: cst.Parameters, name: str,
              opening: cst.BaseParenthesizableWhitespace | None = None) -> cst.Parameters:
    """Append a positional-or-keyword parameter ``name`` after the existing ones, in the
    layout of the list: on its own line, at the other parameters' indentation, when they
    are one per line, and with the trailing comma and closing-bracket spacing the last
    parameter had.

    ``opening`` is the whitespace after the ``def``'s opening parenthesis
    (``FunctionDef.whitespace_before_params``): in a signature broken after ``(``, its last
    line is the parameters' indentation, which a parameter put on a new line takes (a new
    line at column 0 is flake8's E122).
    """
    existing = list(params.params)
    new = cst.Param(name=cst.Name(name))
    broken = isinstance(opening, cst.ParenthesizedWhitespace)
    first_default = next((i for i, p in enumerate(existing) if p.default is not None), None)
    if first_default is not None:
        # A parameter without a default cannot follow one with a default: the fixture goes
        # before them (pytest passes fixtures by name, so the order does not matter), on a
        # line of its own when the parameter it precedes starts one.
        comma: cst.Comma | cst.MaybeSentinel = _comma()
        if first_default > 0:
            comma = existing[first_default - 1].comma
        elif broken:
            comma = cst.Comma(whitespace_after=opening)  # type: ignore[arg-type]
        if not isinstance(comma, cst.Comma):
            comma = _comma()
        existing.insert(first_default, new.with_changes(comma=comma))
        return params.with_changes(params=existing)
    more_after = (
        params.star_arg != cst.MaybeSentinel.DEFAULT
        or bool(params.kwonly_params)
        or params.star_kwarg is not None
    )
    if not existing:
        if more_after:
            new = new.with_changes(comma=_comma())
        return params.with_changes(params=[new])
    last = existing[-1]
    separator: cst.Comma = _comma()
    if len(existing) >= 2 and isinstance(existing[-2].comma, cst.Comma):
        separator = existing[-2].comma
    elif isinstance(last.comma, cst.Comma) and isinstance(
            last.comma.whitespace_after, cst.ParenthesizedWhitespace) and not more_after \
            and broken:
        # One parameter on its own line, the closing parenthesis on the next: the new one
        # goes on a line of its own at that parameter's indentation.
        separator = last.comma.with_changes(whitespace_after=opening)
    new = new.with_changes(comma=last.comma, whitespace_after_param=last.whitespace_after_param)
    existing[-1] = last.with_changes(comma=separator,
                                     whitespace_after_param=cst.SimpleWhitespace(""))
    return params.with_changes(params=[*existing, new])


def drop_param(params: cst.Parameters, name: str) -> cst.Parameters:
    """Remove the parameter ``name``, keeping the others' commas and layout."""
    existing = list(params.params)
    index = next((i for i, p in enumerate(existing) if p.name.value == name), None)
    if index is None:
        return params
    removed = existing.pop(index)
    if existing and index == len(existing):
        existing[-1] = existing[-1].with_changes(comma=removed.comma)
    return params.with_changes(params=existing)


def statement_code(node: cst.CSTNode) -> str:
    """Source of a node, for comparisons."""
    return cst.Module([]).code_for_node(node)



def opening_block(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """``stmt`` as the first statement of a block: without the blank lines above it (and
    above its first comment), as ruff format leaves none at a block's start."""
    lines = list(leading_lines(stmt))
    while lines and lines[0].comment is None:
        lines.pop(0)
    if len(lines) == len(leading_lines(stmt)):
        return stmt
    return stmt.with_changes(leading_lines=lines)


def leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """The blank and comment lines above a statement of a module or block body.

    libcst's ``BaseStatement`` does not declare ``leading_lines``; both of its kinds
    (``SimpleStatementLine`` and ``BaseCompoundStatement``) have them. Raises ``TypeError``
    for any other subclass.
    """
    if isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return stmt.leading_lines
    raise TypeError(f"{type(stmt).__name__} has no leading lines")


def weak_referent(call: cst.Call, engine: cst.BaseExpression) -> cst.BaseExpression:
    """A weak-reference call on an alias that is now ``weakref.proxy(engine)``: a proxy
    cannot be weakly referenced, so ``weakref.proxy(alias)`` becomes ``alias`` itself (it
    already is the proxy) and ``weakref.ref(alias, ...)`` takes ``engine``."""
    first = call.args[0]
    if statement_code(call.func).endswith("proxy") and len(call.args) == 1:
        return first.value.with_changes(
            lpar=call.lpar, rpar=call.rpar) if call.lpar else first.value
    return call.with_changes(args=[first.with_changes(value=engine), *call.args[1:]])


def proxy_of(expr: cst.BaseExpression) -> cst.Call:
    """``weakref.proxy(expr)``."""
    return cst.Call(func=cst.parse_expression("weakref.proxy"), args=[cst.Arg(value=expr)])


#: The width past which a rewritten line is split (one argument a line, as black and ruff
#: format it): the file's ``line-length`` (:attr:`lint_gpu_tests.config.Config.line_length`),
#: set by :func:`wrapping_at` for the codemod rewriting it.
_LINE_LENGTH: ContextVar[int] = ContextVar("line_length", default=DEFAULT_LINE_LENGTH)
#: Whether the file's project may use parenthesized with-items (``with (a, b):``, which
#: Python 3.9's parser takes): set by :func:`wrapping_at`, false when the project declares
#: an older Python (:func:`lint_gpu_tests.config.oldest_python`).
_PARENTHESIZED_WITH: ContextVar[bool] = ContextVar("parenthesized_with", default=True)


def line_length() -> int:
    """The width rewritten lines must fit in (88 outside :func:`wrapping_at`)."""
    return _LINE_LENGTH.get()


@contextmanager
def wrapping_at(width: int, parenthesized_with: bool = True) -> Iterator[None]:
    """Make :func:`line_length` return ``width`` inside the block, and let
    :func:`merge_with` use parenthesized with-items or not."""
    token = _LINE_LENGTH.set(width)
    allowed = _PARENTHESIZED_WITH.set(parenthesized_with)
    try:
        yield
    finally:
        _PARENTHESIZED_WITH.reset(allowed)
        _LINE_LENGTH.reset(token)


class _Reindent(cst.CSTTransformer):
    """Moves the indentation of every continuation line inside a node, and of its comment
    lines, by ``by`` spaces: to the right, or to the left by at most the spaces there
    are."""

    def __init__(self, by: int) -> None:
        super().__init__()
        self.by = by

    def _moved(self, value: str) -> str:
        if self.by >= 0:
            return " " * self.by + value
        return value[min(len(value) - len(value.lstrip(" ")), -self.by):]

    def leave_ParenthesizedWhitespace(
        self, original_node: cst.ParenthesizedWhitespace,
        updated_node: cst.ParenthesizedWhitespace,
    ) -> cst.ParenthesizedWhitespace:
        if not updated_node.indent:
            return updated_node
        return updated_node.with_changes(
            last_line=cst.SimpleWhitespace(self._moved(updated_node.last_line.value)))

    def leave_EmptyLine(self, original_node: cst.EmptyLine,
                        updated_node: cst.EmptyLine) -> cst.EmptyLine:
        if not updated_node.indent or updated_node.comment is None:
            return updated_node
        return updated_node.with_changes(
            whitespace=cst.SimpleWhitespace(self._moved(updated_node.whitespace.value)))


def merge_with(outer: cst.With, inner: cst.With, column: int,
               flat_call: cst.Call | None = None) -> cst.With | None:
    """``with a:`` whose whole body is ``with b:`` (``inner``, a block the fix wrote) as one
    ``with a, b:`` statement (ruff's SIM117), the outer ``with`` at ``column``: on one line
    when it fits :func:`line_length`, else one item a line in parentheses with a trailing
    comma, as ruff format lays them out. ``None`` (keep them nested) when either is ``async
    with``, when a comment sits between the two headers or after the inner block, when an
    outer item spans lines and so would need re-laying out, or when the long form needs
    parentheses the project's Python does not take. ``flat_call``, when given, is the inner
    item's call on one line, laid out again for its new place (one line, arguments on a line
    of their own, or one argument a line)."""
    body = outer.body
    if outer.asynchronous is not None or inner.asynchronous is not None or \
            not isinstance(body, cst.IndentedBlock) or len(body.body) != 1 or \
            body.body[0] is not inner or not isinstance(inner.body, cst.IndentedBlock):
        return None
    if any(line.comment is not None for line in inner.leading_lines) or \
            body.header.comment is not None and inner.body.header.comment is not None:
        return None
    if body.footer and any(line.comment is not None for line in body.footer):
        return None
    if any("\n" in statement_code(item) for item in outer.items):
        return None
    header = inner.body.header if inner.body.header.comment is not None else body.header
    new_body = inner.body.with_changes(header=header, footer=body.footer)
    inner_items = list(inner.items)
    if flat_call is not None and len(inner_items) == 1:
        inner_items[0] = inner_items[0].with_changes(item=flat_call)
    items = [item.with_changes(comma=cst.MaybeSentinel.DEFAULT)
             for item in (*outer.items, *inner_items)]
    flat = [item.with_changes(comma=_comma()) for item in items[:-1]] + items[-1:]
    one_line = outer.with_changes(items=flat, body=new_body, lpar=cst.MaybeSentinel.DEFAULT,
                                  rpar=cst.MaybeSentinel.DEFAULT)
    first = statement_code(one_line.with_changes(leading_lines=[])).split("\n", 1)[0]
    if not any("\n" in statement_code(item) for item in items) and \
            column + len(first.rstrip()) <= line_length():
        return one_line
    if not _PARENTHESIZED_WITH.get():
        return None
    if flat_call is not None and len(inner_items) == 1:
        last = items[-1]
        width = column + 4 + len(statement_code(last)) + 1
        if width > line_length():
            call = hug_args(flat_call, column + 4) or explode_args(flat_call)
            items[-1] = last.with_changes(item=call)
    stacked = [cst.ensure_type(item.visit(_Reindent(4)), cst.WithItem).with_changes(
        comma=cst.Comma(whitespace_after=_line_break("" if i == len(items) - 1 else "    ")))
        for i, item in enumerate(items)]
    return outer.with_changes(
        items=stacked, body=new_body,
        lpar=cst.LeftParen(whitespace_after=_line_break("    ")),
        rpar=cst.RightParen(), whitespace_after_with=cst.SimpleWhitespace(" "))


def explode_args(call: cst.Call, indent: str = "    ", close: str = "") -> cst.Call:
    """Put each argument of ``call`` on its own line, with a trailing comma, the closing
    parenthesis back at the statement's indentation (black's style). ``indent`` and
    ``close`` are what the argument lines and the closing line add to the block's
    indentation (more inside a bracket already broken over lines)."""
    if not call.args:
        return call

    def break_(extra: str) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
            last_line=cst.SimpleWhitespace(extra))

    columns = _argument_columns(call)
    args = []
    for i, arg in enumerate(call.args):
        last = i == len(call.args) - 1
        comma = cst.Comma(whitespace_after=break_(close if last else indent))
        moved = arg
        if columns[i] is not None and columns[i] != len(indent):
            # its own continuation lines move with it (``2 *\n 4``, a dict over lines)
            shifted = arg.value.visit(_Reindent(len(indent) - columns[i]))  # type: ignore[operator]
            assert isinstance(shifted, cst.BaseExpression)
            moved = arg.with_changes(value=shifted)
        args.append(moved.with_changes(comma=comma))
    return call.with_changes(whitespace_before_args=break_(indent), args=args)


def _argument_columns(call: cst.Call) -> list[int | None]:
    """Where each argument of ``call`` starts, as spaces past the block's indentation, when
    a line break puts it at the start of a line (``None`` otherwise); the first argument,
    on the line of the parenthesis, at the column of the next one (continuation lines
    aligned with the parenthesis put every argument there)."""
    def after(ws: cst.BaseParenthesizableWhitespace) -> int | None:
        if isinstance(ws, cst.ParenthesizedWhitespace) and ws.indent and \
                not ws.last_line.value.strip(" "):
            return len(ws.last_line.value)
        return None

    columns = [after(call.whitespace_before_args)] + [
        after(arg.comma.whitespace_after) if isinstance(arg.comma, cst.Comma) else None
        for arg in call.args[:-1]]
    if columns[0] is None and len(columns) > 1:
        columns[0] = columns[1]
    return columns


def _line_break(extra: str) -> cst.ParenthesizedWhitespace:
    """A new line at the enclosing block's indentation plus ``extra``."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
        last_line=cst.SimpleWhitespace(extra))


def _header(node: cst.FunctionDef) -> str:
    """The ``def`` line of ``node`` from ``def`` (or ``async``) to its colon, without the
    decorators, the body, or a comment after the colon."""
    stub = node.with_changes(body=cst.SimpleStatementSuite(body=[cst.Pass()]), decorators=[],
                             leading_lines=[], lines_after_decorators=[])
    return statement_code(stub).rstrip("\r\n").removesuffix(" pass")


def _signature_width(node: cst.FunctionDef, column: int) -> tuple[bool, int] | None:
    """How the signature of ``node`` (its ``def`` at ``column``) is laid out: whether on one
    line, and the width of its widest line; ``None`` for a layout other than one line or
    the parameters on one line of their own after ``(`` (black's and ruff's two
    layouts before one parameter a line)."""
    header = _header(node)
    if "\n" not in header:
        return True, column + len(header)
    flat = statement_code(node.params).strip()
    if isinstance(node.whitespace_before_params, cst.ParenthesizedWhitespace) and \
            "\n" not in flat:
        return False, column + 4 + len(flat)
    return None


def fit_signature(node: cst.FunctionDef, column: int,
                  original: cst.FunctionDef | None = None) -> cst.FunctionDef:
    """Wrap the signature of ``node`` (its ``def`` at ``column``) as ruff format and black
    do when it passes :func:`line_length` where ``original`` (the function before a fixture
    parameter was added) did not. A one-line signature gets its parameters on one line of
    their own, indented 4 more, when they fit there; else, and when that line of parameters
    is what passes, they go one a line with a trailing comma. The closing parenthesis (and
    any return annotation) is back at the ``def``'s indentation. A signature that fits, that
    is laid out otherwise, or that was too long already (the user's layout, left as it is)
    is returned as it is."""
    layout = _signature_width(node, column)
    if layout is None or layout[1] <= line_length():
        return node
    if original is not None:
        before = _signature_width(original, column)
        if before is None or before[1] > line_length():
            return node
    one_line = layout[0]
    params = node.params
    fields = ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params",
              "star_kwarg")
    items: list[tuple[str, int | None, cst.CSTNode]] = []
    for name in fields:
        value = getattr(params, name)
        if isinstance(value, Sequence):
            items += [(name, i, p) for i, p in enumerate(value)]
        elif isinstance(value, (cst.Param, cst.ParamStar, cst.ParamSlash)):
            items.append((name, None, value))
    if not items:
        return node
    flat = statement_code(params).strip().rstrip(",")
    hug = one_line and column + 4 + len(flat) <= line_length()
    changes: dict[str, Any] = {}
    for index, (name, position, item) in enumerate(items):
        last = index == len(items) - 1
        if last and hug:
            comma: cst.Comma | cst.MaybeSentinel = cst.MaybeSentinel.DEFAULT
        else:
            comma = cst.Comma(whitespace_after=_line_break("" if last else "    "))
        if hug and not last:
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        update: dict[str, Any] = {"comma": comma}
        if isinstance(item, cst.Param):
            update["whitespace_after_param"] = _line_break("") if last and hug else \
                cst.SimpleWhitespace("")
        elif isinstance(item, cst.ParamSlash):
            update["whitespace_after"] = cst.SimpleWhitespace("")
        new = item.with_changes(**update)
        if position is None:
            changes[name] = new
        else:
            changes.setdefault(name, list(getattr(params, name)))[position] = new
    return node.with_changes(params=params.with_changes(**changes),
                             whitespace_before_params=_line_break("    "))


def fit_call(call: cst.Call, column: int) -> cst.Call:
    """Wrap a one-line call statement at ``column`` as ruff format does when it passes
    :func:`line_length`: its arguments on one line of their own, indented 4 more, when they
    fit there, else one a line with a trailing comma (:func:`explode_args`)."""
    text = statement_code(call)
    if "\n" in text or column + len(text) <= line_length() or not call.args:
        return call
    return hug_args(call, column) or explode_args(call)


def fit_last_call(small: cst.BaseSmallStatement, call: cst.Call,
                  column: int) -> cst.BaseSmallStatement:
    """``small`` (a one-line statement at ``column`` that ends with ``call``, such as
    ``llm = weakref.proxy(runner.llm)``) with ``call`` laid out as ruff format does when the
    statement passes :func:`line_length`: its arguments on a line of their own, indented 4
    more, when they fit there, else one a line (:func:`explode_args`). A statement that fits
    or already spans lines is returned as it is."""
    text = statement_code(small)
    if "\n" in text or column + len(text) <= line_length() or not call.args:
        return small
    laid_out = hug_args(call, column) or explode_args(call)
    replaced: cst.CSTNode = small.deep_replace(call, laid_out)
    assert isinstance(replaced, cst.BaseSmallStatement)
    return replaced


def hug_args(call: cst.Call, column: int) -> cst.Call | None:
    """``call`` (in a statement at ``column``) with its arguments on one line of their own,
    indented 4 more, the closing parenthesis back at ``column``, as ruff format lays out a
    call too long for its line; ``None`` when that line of arguments passes
    :func:`line_length`, holds a comment, or there is no argument."""
    flat = statement_code(call.with_changes(func=cst.Name("f"))).strip()[2:-1].rstrip(", ")
    if not call.args or "\n" in flat or "#" in flat or column + 4 + len(flat) > line_length():
        return None
    args = list(call.args)
    args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT,
                                     whitespace_after_arg=_line_break(""))
    return call.with_changes(whitespace_before_args=_line_break("    "), args=args)

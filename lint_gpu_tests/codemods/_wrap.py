"""The with-block rewrite shared by GPU001 (engines) and GPU005 (bare runners).

:class:`WrapTransformer` applies :class:`lint_gpu_tests.fixplan.plan.WrapPlan` objects to a
LibCST module. Plans address statements by the 1-based line where they start, as the
``ast`` tree they were made from reports them; the transformer reads the same lines from
:class:`~lint_gpu_tests.codemods._positions.StatementPositions` (LibCST's positions, computed
only for the top-level statements the plans reach) and does not descend into the other
top-level statements.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import libcst as cst

from lint_gpu_tests.analysis.mappings import RUNNER_KWARGS_NAME
from lint_gpu_tests.codemods._cst import (
    add_param,
    drop_param,
    explode_args,
    fit_last_call,
    fit_signature,
    hug_args,
    leading_lines,
    line_length,
    merge_with,
    opening_block,
    proxy_of,
    runner_call,
    statement_code,
    weak_referent,
)
from lint_gpu_tests.codemods._groups import build_group_with
from lint_gpu_tests.codemods._helper_param import prepend_arg, prepend_param
from lint_gpu_tests.codemods._mapping import explode_helper, through_helper
from lint_gpu_tests.codemods._positions import StatementPositions
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixplan.plan import PlanKind, WrapPlan
from lint_gpu_tests.parsing.source import physical_lines, walk_breadth

Stmt = cst.BaseStatement | cst.BaseSmallStatement



class _NameFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # ``x.llm``: the attribute name is not a use of ``llm``
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def ast_identifiers(nodes: Sequence[ast.AST]) -> set[str]:
    """What :func:`_identifiers` finds in the LibCST nodes of the same code, read from the
    ``ast`` nodes ``nodes``: every name token not after a dot (``ast.Name``, parameters,
    keyword arguments, the names a ``def``, ``class``, ``import``, ``global``, ``except``
    or ``case`` binds, the first part of an imported module's dotted name, and ``None``,
    ``True`` and ``False``).
    ``tests/test_statement_positions.py`` holds the two equal on every statement of the
    fixtures and the corpus."""
    found: set[str] = set()
    add = found.add
    for node in (n for root in nodes for n in walk_breadth(root)):
        if isinstance(node, ast.Name):
            add(node.id)
        elif isinstance(node, ast.arg):
            add(node.arg)
        elif isinstance(node, ast.keyword):
            if node.arg is not None:
                add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            add(node.name)
        elif isinstance(node, ast.alias):
            if node.name != "*":
                add(node.name.split(".")[0])
            if node.asname is not None:
                add(node.asname)
        elif isinstance(node, ast.ImportFrom):
            if node.module is not None:
                add(node.module.split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            if node.name is not None:
                add(node.name)
        elif isinstance(node, ast.MatchMapping):
            if node.rest is not None:
                add(node.rest)
        elif isinstance(node, ast.MatchClass):
            found.update(node.kwd_attrs)
        elif isinstance(node, (ast.Constant, ast.MatchSingleton)) and (
                node.value is None or node.value is True or node.value is False):
            add(repr(node.value))  # ``None``, ``True``, ``False``: LibCST's names
    return found


def _identifiers(nodes: Sequence[cst.CSTNode]) -> set[str]:
    """The identifiers that occur anywhere inside ``nodes`` (an attribute's own name
    excepted), found in one walk."""
    finder = _NameFinder()
    for node in nodes:
        node.visit(finder)
    return finder.names

class WrapTransformer(cst.CSTTransformer):
    """Rewrites each plan's statement range into a with-block.

    After ``transform``, ``needs`` holds what the module must import (``weakref``,
    ``VllmRunner``, ``CompilationConfig``).
    """

    def __init__(self, plans: Sequence[WrapPlan], config: Config,
                 positions: StatementPositions, engine_locals: set[str],
                 text: str | None = None) -> None:
        """Args:
            plans: the with-block plans to apply (at most one per function).
            config: the run's settings.
            positions: the positions of the tree this transformer visits.
            engine_locals: the names that refer to engine classes.
            text: the source of that tree, where the caller has it (a function whose text
                does not name ``runner`` needs no walk to know the name is free).
        """
        super().__init__()
        self.text_lines = physical_lines(text) if text is not None else None
        self.engine_locals = engine_locals
        self.skip_blocks: set[int] = set()
        self.columns: dict[int, int] = {}
        self.plans = list(plans)
        self.config = config
        self.positions = positions
        self.by_site = {p.site_line: p for p in plans}
        self.by_function = {p.function_line: p for p in plans}
        self.remove = set().union(*(p.remove_lines for p in plans)) if plans else set()
        self.unwrap = set().union(*(p.unwrap_try_lines for p in plans)) if plans else set()
        self.needs: set[str] = set()
        self.runner_names: dict[int, str] = {}
        self.changed = False
        self.plan_stack: list[WrapPlan | None] = []
        # The with-statements this pass wrote (by id), which an enclosing ``with`` whose
        # whole body they are takes into its header (ruff's SIM117); held, so that no id is
        # reused.
        self.built: dict[int, cst.With] = {}
        # The blocks this pass emptied of every statement (their ``pass`` is its own), held
        # by id: a ``try`` whose body or ``finally`` it emptied has nothing left to guard.
        self.emptied: dict[int, cst.IndentedBlock] = {}
        # The runner call of each with-statement written from a one-line call, before it
        # was laid out over lines: laid out again where it moves into a combined header.
        self.flat_calls: dict[int, cst.Call] = {}
        # Helpers that get the runner fixture from their callers (target vllm).
        self.helpers = {p.helper_calls.name for p in plans
                        if p.helper_calls is not None and not p.helper_calls.passed}
        self.callers = set().union(*(p.helper_calls.callers for p in plans
                                     if p.helper_calls is not None))
        # The lines the plans reach: a compound statement that spans none of them is not
        # visited, nor a simple statement without a weak reference to rewrite (a helper's
        # calls may be anywhere: then every statement is).
        self.reach: set[int] | None = None if self.helpers else _reached_lines(plans)
        self.weak_lines = {line for p in plans for line, _ in p.weak_calls}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return super().on_visit(node)
        try:
            first, last = self.positions.lines_of(node)
            top = True
        except KeyError:  # a nested statement
            first, last = self.positions.span(node)
            top = False
        if self.reach is not None:
            lines = self.weak_lines if isinstance(node, cst.SimpleStatementLine) \
                else self.reach
            if not any(first <= line <= last for line in lines):
                super().on_visit(node)  # its visit_ runs, as its leave_ will
                return False
        if top and any(first <= line <= last for line in self.weak_lines):
            # before its visit_: the calls of its weak references are found by line
            self.positions.prepare(node)
        return super().on_visit(node)

    # ------------------------------------------------------------------ helpers
    def _line(self, node: cst.CSTNode) -> int:
        return self.positions.start_line(node)

    def _flatten(
        self, originals: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]
    ) -> list[tuple[int, cst.BaseStatement]]:
        """Pair each statement with its start line, unwrapping planned try statements."""
        out: list[tuple[int, cst.BaseStatement]] = []
        for orig, new in zip(originals, updated, strict=True):
            line = self._line(orig)
            self.columns[line] = self.positions.start_column(orig)
            if line in self.unwrap and isinstance(orig, cst.Try) and isinstance(new, cst.Try):
                inner_orig = orig.body.body
                inner_new = new.body.body
                first = True
                for pair in self._flatten(inner_orig, inner_new):  # type: ignore[arg-type]
                    stmt = pair[1]
                    if first:
                        stmt = stmt.with_changes(
                            leading_lines=[*new.leading_lines, *leading_lines(stmt)])
                        first = False
                    out.append((pair[0], stmt))
                self.changed = True
                continue
            out.append((line, new))
        return out

    def _rewrite_block(
        self, originals: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]
    ) -> list[cst.BaseStatement]:
        pairs = self._flatten(originals, updated)
        kept: list[tuple[int, cst.BaseStatement]] = []
        # The blank lines above a removed statement right after an import, for the next
        # statement kept (ruff format keeps a blank line after a block's imports).
        carried: list[cst.EmptyLine] = []
        for line, stmt in pairs:
            if line in self.remove:
                self.changed = True
                if kept and _imports_only(kept[-1][1]) and not carried:
                    carried = [e for e in leading_lines(stmt) if e.comment is None][:1]
                continue
            if carried and not leading_lines(stmt):
                stmt = stmt.with_changes(leading_lines=carried)
            carried = []
            if isinstance(stmt, cst.Try) and not stmt.orelse:
                left = self._emptied_try(stmt)
                if left is not None:
                    self.changed = True
                    kept.extend((line, s) for s in left)
                    continue
            kept.append((line, stmt))
        out: list[cst.BaseStatement] = []
        i = 0
        while i < len(kept):
            line, stmt = kept[i]
            plan = self.by_site.get(line)
            if plan is None:
                out.append(stmt)
                i += 1
                continue
            j = i
            while j + 1 < len(kept) and kept[j + 1][0] <= plan.end_line:
                j += 1
            if plan.guarded:
                assert isinstance(stmt, cst.Try)
                guarded, built = self._build_guarded(plan, stmt,
                                                     [s for _, s in kept[i + 1: j + 1]])
                out.append(guarded)
            else:
                built = self._build_with(plan, stmt, [s for _, s in kept[i + 1: j + 1]])
            only = built.body.body[0] if isinstance(built.body, cst.IndentedBlock) and \
                len(built.body.body) == 1 else None
            if isinstance(only, cst.With):
                # ``with vllm_runner(...):`` over nothing but ``with b:`` is ``with
                # vllm_runner(...), b:`` (ruff's SIM117), where it can be written so.
                built = merge_with(built, only, self.columns.get(plan.site_line, 0)) or built
            self.built[id(built)] = built
            out.append(built)
            self.changed = True
            i = j + 1
        return out

    def _emptied_try(self, stmt: cst.Try) -> list[cst.BaseStatement] | None:
        """What is left of a ``try`` (no ``else``) whose statements this pass removed, or
        ``None`` to keep it: nothing for a body emptied, without a ``finally`` (its
        handlers ran only on the removed statements' exceptions); its body for a ``finally``
        emptied, without handlers (the first statement takes the ``try``'s leading
        lines); the ``try`` less its ``finally`` for a ``finally`` emptied, with handlers."""
        if id(stmt.body) in self.emptied and stmt.finalbody is None:
            return []
        if stmt.finalbody is not None and id(stmt.finalbody.body) in self.emptied and \
                stmt.handlers:
            return [stmt.with_changes(finalbody=None)]  # its handlers still guard its body
        if stmt.finalbody is not None and id(stmt.finalbody.body) in self.emptied and \
                not stmt.handlers and isinstance(stmt.body, cst.IndentedBlock):
            body = list(stmt.body.body)
            body[0] = body[0].with_changes(
                leading_lines=[*stmt.leading_lines, *leading_lines(body[0])])
            return body
        return None

    def _names_in(self, stmts: Sequence[cst.BaseStatement], names: set[str]) -> set[str]:
        """Those of ``names`` that occur as identifiers in ``stmts`` (an attribute's own
        name excepted). A statement this pass left as it was parsed, whose source lines do
        not hold any of them as a word, holds none, and is not walked."""
        walk: list[cst.BaseStatement] = []
        found: set[str] = set()
        pattern = re.compile("|".join(rf"(?<!\w){re.escape(n)}(?!\w)" for n in sorted(names)))
        text = self.text_lines
        for stmt in stmts:
            lines = self.positions.source_lines(stmt)
            if lines is None or text is None:
                walk.append(stmt)
            elif pattern.search("".join(text[lines[0] - 1:lines[1]])):
                nodes = self.positions.ast_of(stmt)
                assert nodes is not None  # a statement as it was parsed
                found |= ast_identifiers(nodes) & names
        return found | (_identifiers(walk) & names)

    def _first_line_width(self, stmt: cst.BaseStatement) -> int:
        """The width of the first line of ``stmt``'s code (its indentation and leading
        lines left out): read from the source where ``stmt`` is a simple statement as it
        was parsed (its first line is the rest of its first token's line), else
        generated."""
        lines = self.positions.source_lines(stmt) \
            if isinstance(stmt, cst.SimpleStatementLine) else None
        if lines is not None and self.text_lines is not None:
            rest = self.text_lines[lines[0] - 1][self.positions.start_column(stmt):]
            return len((rest.splitlines() or [""])[0])
        return len(statement_code(stmt.with_changes(leading_lines=[])).splitlines()[0])

    def _runner_name(self, plan: WrapPlan) -> str:
        return self.runner_names.get(plan.site_line, "runner")

    def _engine_ref(self, plan: WrapPlan) -> cst.BaseExpression:
        return cst.parse_expression(f"{self._runner_name(plan)}{self.config.engine_at}")

    def _build_with(
        self, plan: WrapPlan, site: cst.BaseStatement, rest: list[cst.BaseStatement]
    ) -> cst.With:
        if plan.group is not None:  # one ExitStack for a group or a factory
            group_finder = _CallFinder(self.config, self.engine_locals)
            site.visit(group_finder)
            return build_group_with(plan, site, group_finder.found, rest, self.config,
                                    self.needs, self.columns.get(plan.site_line, 0))
        assert isinstance(site, cst.SimpleStatementLine) and len(site.body) == 1
        small = site.body[0]
        finder = _CallFinder(self.config, self.engine_locals)
        small.visit(finder)
        call = finder.found
        assert call is not None, "planned statement holds no engine or runner call"
        runner = self._runner_name(plan)
        new_call = self._engine_runner_call(plan, call) if plan.kind is PlanKind.ENGINE \
            else call
        body: list[cst.BaseStatement] = []
        as_name = runner
        as_target: cst.Tuple | None = None
        if plan.bound_name is not None and isinstance(small, (cst.Assign, cst.AnnAssign)):
            used = self._names_in(rest, {plan.bound_name, runner}) \
                if plan.kind is not PlanKind.RUNNER else set()
            if plan.kind is PlanKind.RUNNER:
                as_name = plan.bound_name
                target = small.targets[0].target if isinstance(small, cst.Assign) else None
                if isinstance(target, cst.Tuple):
                    # A factory returning the engine in a tuple: ``as (llm, params)``.
                    as_target = target if target.lpar else target.with_changes(
                        lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            elif plan.bound_name not in used and runner not in used:
                # Only cleanup used the name (``llm = LLM(...); del llm``): build, tear down.
                as_name = ""
            elif not plan.yield_proxy and plan.bound_name in used:
                body.append(self._proxy_line(plan, plan.bound_name))
        elif isinstance(small, cst.Expr) and small.value is call:
            # A construction whose result is dropped: build it, tear it down.
            body.append(cst.SimpleStatementLine(body=[cst.Pass()]))
            as_name = ""
        else:
            replacement: cst.BaseExpression
            if plan.kind is PlanKind.ENGINE and plan.stored_on:
                # The attribute the engine was stored on holds its proxy (a factory's
                # context manager yields one: its with-item's name is stored as it is).
                self.needs.add("weakref")
                replacement = proxy_of(self._engine_ref(plan))
            elif plan.kind is PlanKind.ENGINE:
                replacement = self._engine_ref(plan)
            else:
                replacement = cst.Name(runner)
            new_small = _replace_node(small, call, replacement)
            if plan.kind is PlanKind.ENGINE and isinstance(small, cst.Return) and \
                    isinstance(small.value, cst.Tuple):
                # A factory returning its engine in a tuple (``return LLM(...), params``)
                # yields the tuple with the engine's proxy in its place.
                self.needs.add("weakref")
                new_small = _replace_node(small, call, proxy_of(replacement))
                assert isinstance(new_small, cst.Return) and new_small.value is not None
                new_small = cst.Expr(cst.Yield(value=new_small.value))
            elif isinstance(new_small, cst.Return) or (
                isinstance(new_small, cst.Expr) and isinstance(new_small.value, cst.Yield)
            ):
                value = replacement
                if plan.kind is PlanKind.ENGINE:
                    self.needs.add("weakref")
                    value = proxy_of(replacement)
                new_small = cst.Expr(cst.Yield(value=value))
            body.append(site.with_changes(body=[new_small], leading_lines=[],
                                          trailing_whitespace=_moved_comment(site)))
        body = self._block_body(plan, body, rest)
        node = cst.With(
            items=[cst.WithItem(item=new_call, asname=cst.AsName(
                name=as_target if as_target is not None else cst.Name(as_name))
                if as_name else None)],
            body=cst.IndentedBlock(body=body, header=site.trailing_whitespace),
            leading_lines=site.leading_lines,
        )
        column = self.columns.get(plan.site_line, 0)
        multi_line = "\n" in statement_code(call)
        # Continuation lines aligned with the old opening parenthesis would be misaligned
        # under the new one: such a call is laid out one argument per line too.
        aligned = multi_line and not isinstance(call.whitespace_before_args,
                                                cst.ParenthesizedWhitespace)
        if not multi_line and plan.mapping_defaults is None:
            self.flat_calls[id(node)] = new_call
        if multi_line and not aligned:
            return node
        # The widths of first lines: the header alone is generated (a body's code would
        # only be cut off), with and without its trailing comment.
        # generated once: without its trailing comment, a header of one line is the same
        # line less the comment (a longer one ends with the comment, off its first line)
        header = statement_code(node.with_changes(leading_lines=[],
                                                  body=node.body.with_changes(body=[])))
        full_width = column + len(header.splitlines()[0])
        lines = physical_lines(header)  # the header's, then the ``pass`` of no body
        first = lines[0].rstrip("\r\n")
        trailing = site.trailing_whitespace
        suffix = trailing.whitespace.value + (
            trailing.comment.value if trailing.comment is not None else "")
        if len(lines) == 2 and suffix and first.endswith(suffix):
            first = first[:len(first) - len(suffix)]
        code_width = column + len((first.splitlines() or [""])[0])
        site_width = column + self._first_line_width(site)
        if not aligned and (code_width <= line_length() and (
                full_width <= line_length() or site_width > line_length())):
            # It fits; or only its trailing comment passes the width, as it did before.
            return node
        laid_out = None if aligned or plan.mapping_defaults is not None else \
            hug_args(new_call, column)
        if laid_out is None:
            laid_out = explode_helper(explode_args(new_call), column)
        new_node = node.with_changes(items=[node.items[0].with_changes(item=laid_out)])
        if id(node) in self.flat_calls:
            self.flat_calls[id(new_node)] = self.flat_calls.pop(id(node))
        return new_node

    def _engine_runner_call(self, plan: WrapPlan, call: cst.Call) -> cst.Call:
        """The runner's call that builds the engine of ``call`` (an ``LLM(...)`` call) for
        ``plan``: the runner class's (helpers, wide-scoped fixtures) or the runner fixture's,
        with the target's arguments; notes the imports it needs."""
        if plan.use_class:
            func_name = self.config.runner_classes[0] if self.config.runner_classes \
                else "VllmRunner"
            if self.config.target == "bundled":
                self.needs.add("VllmRunner")
        else:
            func_name = self.config.runner_fixture
        new_call, uses_cc = runner_call(call, func_name, target=self.config.target,
                                        compilation_config=plan.compilation_config,
                                        add_defaults=plan.mapping_defaults is None)
        if plan.mapping_defaults is not None:
            new_call = through_helper(new_call, plan.mapping_defaults)
            self.needs.add(RUNNER_KWARGS_NAME)
            uses_cc |= any("CompilationConfig" in d for d in plan.mapping_defaults)
        if uses_cc:
            self.needs.add("CompilationConfig")
        return new_call

    def _build_guarded(self, plan: WrapPlan, site: cst.Try, rest: list[cst.BaseStatement]
                       ) -> tuple[cst.Try, cst.With]:
        """The ``try`` of a guarded construction (:attr:`WrapPlan.guarded`) with the runner
        built in it and bound to a name (an engine's construction becomes ``runner =
        vllm_runner(...)``; a runner's stays as it is), and the with-statement after it that
        enters that name over ``rest``."""
        body = site.body
        assert isinstance(body, cst.IndentedBlock) and len(body.body) == 1
        line = body.body[0]
        assert isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
        small = line.body[0]
        assert isinstance(small, cst.Assign)
        column = self.columns.get(plan.site_line, 0)
        inner: list[cst.BaseStatement] = []
        entered = plan.bound_name or ""
        if plan.kind is PlanKind.ENGINE:
            finder = _CallFinder(self.config, self.engine_locals)
            small.visit(finder)
            call = finder.found
            assert call is not None, "planned statement holds no engine call"
            new_call = self._engine_runner_call(plan, call)
            entered = self._runner_name(plan)
            if "\n" in statement_code(call) and not isinstance(
                    call.whitespace_before_args, cst.ParenthesizedWhitespace):
                # continuation lines aligned with the old parenthesis: one argument a line
                new_call = explode_args(new_call)
            assign = fit_last_call(cst.Assign(
                targets=[cst.AssignTarget(target=cst.Name(entered))], value=new_call),
                new_call, column + 4)
            site = site.with_changes(body=body.with_changes(body=[line.with_changes(
                body=[assign])]))
            if plan.bound_name is not None and not plan.yield_proxy and \
                    plan.bound_name in self._names_in(rest, {plan.bound_name}):
                inner.append(self._proxy_line(plan, plan.bound_name))
        node = cst.With(items=[cst.WithItem(item=cst.Name(entered))],
                        body=cst.IndentedBlock(body=self._block_body(plan, inner, rest)))
        return site, node

    def _proxy_line(self, plan: WrapPlan, name: str) -> cst.SimpleStatementLine:
        """``name = weakref.proxy(runner.llm)``, the first line of ``plan``'s block (laid out
        to fit the line at the block's indentation)."""
        self.needs.add("weakref")
        proxy = proxy_of(self._engine_ref(plan))
        return cst.SimpleStatementLine(body=[fit_last_call(cst.Assign(
            targets=[cst.AssignTarget(target=cst.Name(name))], value=proxy,
        ), proxy, self.columns.get(plan.site_line, 0) + 4)])

    def _block_body(self, plan: WrapPlan, head: list[cst.BaseStatement],
                    rest: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """The statements of ``plan``'s with-block: ``head`` (what the rewrite puts first),
        then ``rest`` with a fixture's ``yield``/``return`` of the engine handing out its
        proxy; ``pass`` for none; no blank line above the first."""
        body = list(head)
        for stmt in rest:
            if plan.yield_proxy and plan.bound_name is not None:
                stmt = self._proxy_handout(plan, stmt, self.columns.get(plan.site_line, 0) + 4)
            body.append(stmt)
        if not body:
            body.append(cst.SimpleStatementLine(body=[cst.Pass()]))
        body[0] = opening_block(body[0])
        return body

    def _proxy_handout(self, plan: WrapPlan, stmt: cst.BaseStatement,
                       column: int) -> cst.BaseStatement:
        """``yield llm``/``return llm`` -> ``yield weakref.proxy(runner.llm)`` (``stmt`` at
        ``column``, laid out over lines past the line length); for a runner (GPU005)
        ``return r`` -> ``yield r``."""
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
            return stmt
        small = stmt.body[0]
        value: cst.BaseExpression | None = None
        if isinstance(small, cst.Return):
            value = small.value
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield):
            value = small.value.value  # type: ignore[assignment]
        if plan.kind is PlanKind.RUNNER:
            # A runner (GPU005) is handed out as it is: the fixture's users expect the
            # runner, which the with-statement now binds to the same name.
            if isinstance(small, cst.Return) and isinstance(value, cst.Name) and \
                    value.value == plan.bound_name:
                return stmt.with_changes(body=[cst.Expr(cst.Yield(value=value))])
            return stmt
        if isinstance(value, cst.Call) and statement_code(value.func) == "weakref.proxy" \
                and len(value.args) == 1:
            # Already a proxy of the engine: handed out as one proxy, not two.
            value = value.args[0].value
        if isinstance(value, cst.Name) and value.value == plan.bound_name:
            self.needs.add("weakref")
            proxy = proxy_of(self._engine_ref(plan))
            return stmt.with_changes(
                body=[fit_last_call(cst.Expr(cst.Yield(value=proxy)), proxy, column)])
        return stmt

    # ------------------------------------------------------------------ visitors
    def leave_Call(self, original_node: cst.Call,
                   updated_node: cst.Call) -> cst.BaseExpression:
        """A weak reference to an alias that becomes a proxy (a proxy cannot be weakly
        referenced): ``weakref.proxy(llm)`` becomes ``llm``, ``weakref.ref(llm)`` becomes
        ``weakref.ref(runner.llm)``."""
        if isinstance(updated_node.func, cst.Name) and updated_node.func.value in self.helpers:
            return prepend_arg(updated_node, self.config.runner_fixture)
        plan = next((p for p in reversed(self.plan_stack) if p is not None), None)
        if plan is None or not plan.weak_calls or not updated_node.args:
            return updated_node
        first = updated_node.args[0]
        key = (self._line(original_node), statement_code(updated_node.func))
        if key in plan.weak_calls and isinstance(first.value, cst.Name) and \
                first.value.value in plan.aliases:
            return weak_referent(updated_node, self._engine_ref(plan))
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        plan = self.by_function.get(self._line(node))
        self.plan_stack.append(plan)
        if plan is not None and (plan.kind is PlanKind.ENGINE or plan.stored_on):
            text = self._text_of(node)
            used: set[str] | None = None
            base = "engine" if self.config.runner_yields == "engine" or \
                plan.kind is not PlanKind.ENGINE else "runner"
            name, k = base, 2
            while True:
                # A name the function's text does not hold as a word is no name in it.
                if text is not None and not re.search(rf"(?<!\w){name}(?!\w)", text):
                    break
                if used is None:
                    collector = _FreeNameCollector(self.positions, plan.site_line,
                                                   self.config, plan.end_line)
                    node.visit(collector)
                    used = collector.used
                # Nor the attribute the engine is stored on (a module's is its global).
                if name not in used and name != plan.stored_on.rpartition(".")[2]:
                    break
                name = f"{base}{k}"
                k += 1
            self.runner_names[plan.site_line] = name
        return True

    def _text_of(self, node: cst.FunctionDef) -> str | None:
        """The source lines of ``node``, its decorators included (``None`` without the
        text)."""
        if self.text_lines is None:
            return None
        first, last = self.positions.with_decorators(node)
        return "".join(self.text_lines[first - 1:last])

    def leave_With(self, original_node: cst.With,
                   updated_node: cst.With) -> cst.With:
        """``with a:`` whose body is now only a with-block this pass wrote becomes one
        ``with a, vllm_runner(...):`` (ruff's SIM117 asks for it; the same statement)."""
        body = updated_node.body
        if not (isinstance(body, cst.IndentedBlock) and len(body.body) == 1 and
                self.built.get(id(body.body[0])) is body.body[0]):
            return updated_node
        inner = body.body[0]
        assert isinstance(inner, cst.With)
        merged = merge_with(updated_node, inner, self.positions.start_column(original_node),
                            self.flat_calls.get(id(inner)))
        if merged is None:
            return updated_node
        self.built[id(merged)] = merged
        return merged

    def visit_Try(self, node: cst.Try) -> bool:
        if self._line(node) in self.unwrap:
            self.skip_blocks.add(id(node.body))
        return True

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        self.plan_stack.pop()
        line = self._line(original_node)
        plan = self.by_function.get(line)
        params = updated_node.params
        if plan is not None:
            for name in sorted(plan.drop_params):
                params = drop_param(params, name)
            if plan.add_param and plan.helper_calls is not None:
                params = prepend_param(params, plan.add_param,
                                       updated_node.whitespace_before_params)
            elif plan.add_param:
                params = add_param(params, plan.add_param,
                                   updated_node.whitespace_before_params)
        fixture = self.config.runner_fixture
        if line in self.callers and fixture not in {
                p.name.value for p in (*params.posonly_params, *params.params,
                                       *params.kwonly_params)}:
            params = add_param(params, fixture, updated_node.whitespace_before_params)
        if params is updated_node.params:
            return updated_node
        return fit_signature(updated_node.with_changes(params=params),
                             self.positions.start_column(original_node), updated_node)

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if id(original_node) in self.skip_blocks:
            return updated_node
        body = self._rewrite_block(original_node.body, updated_node.body)
        if not body:
            emptied = updated_node.with_changes(
                body=[cst.SimpleStatementLine(body=[cst.Pass()])])
            self.emptied[id(emptied)] = emptied
            return emptied
        return updated_node.with_changes(body=body)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(
            body=self._rewrite_block(original_node.body, updated_node.body))


class _CallFinder(cst.CSTVisitor):
    """Finds the first engine-or-runner-looking call in a statement (outermost first)."""

    def __init__(self, config: Config, engine_locals: set[str]) -> None:
        super().__init__()
        self.config = config
        self.found: cst.Call | None = None
        self.engine_names = {q.rsplit(".", 1)[-1] for q in config.engine_classes} | engine_locals
        self.runner_names = {config.runner_fixture, *config.runner_classes}

    def visit_Call(self, node: cst.Call) -> bool:
        if self.found is not None:
            return False
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else None)
        if name is not None and (name in self.runner_names or name in self.engine_names):
            self.found = node
            return False
        return True


class _FreeNameCollector(cst.CSTVisitor):
    """Names a new ``runner`` binding could clash with: every name in the function except
    inside runner with-blocks that neither enclose the site nor fall inside the new block
    (their ``runner`` is dead by then)."""

    def __init__(self, positions: StatementPositions, site_line: int,
                 config: Config, end_line: int = 0) -> None:
        super().__init__()
        self.positions = positions
        self.site_line = site_line
        self.end_line = end_line
        self.runner_callables = {config.runner_fixture, *config.runner_classes}
        self.used: set[str] = set()

    def visit_With(self, node: cst.With) -> bool:
        start, end = self.positions.span(node)
        encloses = start <= self.site_line <= end
        inside = self.site_line <= start <= self.end_line
        if encloses or inside:
            return True
        for item in node.items:
            call = item.item
            if not isinstance(call, cst.Call):
                return True
            func = call.func
            name = func.attr.value if isinstance(func, cst.Attribute) else (
                func.value if isinstance(func, cst.Name) else None)
            if name not in self.runner_callables:
                return True
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.used.add(node.value)

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False


def _imports_only(stmt: cst.BaseStatement) -> bool:
    """True for a line of ``import``/``from ... import`` statements only."""
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in stmt.body)


def _moved_comment(site: cst.SimpleStatementLine) -> cst.TrailingWhitespace:
    """The end of the line of the statement at ``site`` once the with-statement's header,
    which keeps ``site``'s own end of line, is written above it: its comment, a pragma
    (``# noqa: E501``, ``# type: ignore``) too, stays on the header alone, as for an engine
    bound to a name."""
    return cst.TrailingWhitespace(newline=site.trailing_whitespace.newline)


def _reached_lines(plans: Sequence[WrapPlan]) -> set[int]:
    """Every line a plan names: its function, its site to its end, the statements it
    removes or unwraps, its call, its weak references."""
    lines: set[int] = set()
    for plan in plans:
        lines.update((plan.function_line, plan.site_line, plan.end_line, plan.call_line))
        lines.update(range(plan.site_line, plan.end_line + 1))
        lines.update(plan.remove_lines, plan.unwrap_try_lines)
        lines.update(line for line, _ in plan.weak_calls)
        if plan.helper_calls is not None:
            lines.update(plan.helper_calls.callers)
    lines.discard(0)
    return lines


def _replace_node(
    small: cst.BaseSmallStatement, target: cst.CSTNode, replacement: cst.BaseExpression
) -> cst.BaseSmallStatement:
    """``small`` with ``target`` (a node inside it, matched by identity) replaced."""
    new = small.deep_replace(target, replacement)
    if not isinstance(new, cst.BaseSmallStatement):  # only when ``small`` is ``target``
        raise TypeError(f"cannot replace the whole statement {statement_code(small)!r}")
    return new

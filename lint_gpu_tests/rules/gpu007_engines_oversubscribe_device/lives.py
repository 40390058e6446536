"""GPU007's detection, engines' live ranges in one function: where each engine a function builds,
enters or requests starts and stops holding device memory (:class:`EngineLives`), and what
share of the device it asks for. An engine's life ends at ``del`` of its last name, at the
rebinding of the name, at the end of its runner's block, and at an explicit shutdown that
GPU003/GPU004 recognise (:func:`~lint_gpu_tests.fixplan.cleanup.ends_engine`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from lint_gpu_tests.analysis.analysis import (
    FUNCTION_DEFS,
    NESTED_SCOPES,
    FunctionInfo,
    FunctionKind,
    ModuleAnalysis,
    guarded_with,
    literal_value,
    local_names,
    module_constants,
)
from lint_gpu_tests.fixplan.cleanup import ends_engine
from lint_gpu_tests.fixplan.groups import engine_group
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import dotted_name, last_name

SHARE_KEYWORD = "gpu_memory_utilization"
#: Keywords that size the KV cache in bytes instead (vllm/config/cache.py: the share is
#: then ignored), so the engine's share cannot be told.
BYTES_KEYWORDS = frozenset({"kv_cache_memory_bytes"})
#: The bundled runtime's factory fixture (lint_gpu_tests/runtime/plugin.py): each call
#: builds one more engine, alive until its with-block ends or the test does.
RUNNER_FACTORY_FIXTURE = "vllm_runner_factory"
#: Sums are compared with this slack, so 0.5 + 0.5 (or 0.1 * 10) is not "past 1.0".
EPSILON = 1e-9

Position = tuple[int, int]
Branches = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class EngineLife:
    """One engine's stretch of a function's source during which it holds device memory.

    Attributes:
        node: where a report about it points (the call, or the fixture's parameter).
        start, end: ``(line, column)`` of the first and last position it is alive at.
        share: its ``gpu_memory_utilization``; ``None`` when known only at run time.
        defaulted: ``share`` is the configured default (the call does not set it).
        label: how the message names it (``LLM(...)`` at line 7, fixture `llm`).
        branches: ``(id(node), branch)`` of each ``if``/``match`` it sits in: two lives in
            different branches of one statement never run together.
    """

    node: ast.AST
    start: Position
    end: Position
    share: float | None
    defaulted: bool
    label: str
    branches: Branches = ()

    def term(self) -> str:
        """This engine's part of the message: ``LLM(...) line 7: 0.92 (default)``."""
        if self.share is None:
            return f"{self.label}: unknown"
        return f"{self.label}: {self.share:g}" + (" (default)" if self.defaulted else "")


def exclusive(first: EngineLife, second: EngineLife) -> bool:
    """True when the two sit in different branches of one ``if``/``match``."""
    branches = dict(first.branches)
    return any(key in branches and branches[key] != branch for key, branch in second.branches)


class EngineLives:
    """Computes each function's engine lives (cached per function: fixtures are asked
    again for every test that requests them)."""

    def __init__(self, module: ModuleAnalysis) -> None:
        self.module = module
        self.constants = module_constants(module)
        self.default = module.config.engine_memory_share
        self.cache: dict[int, list[EngineLife]] = {}
        self.fixtures = {f.fixture_name: f for f in module.functions
                         if f.fixture_name is not None}
        self.factories = module.handed_out_factories()
        self.forwarders = factory_forwarders(module)

    def of(self, func: FunctionInfo, depth: int = 0) -> list[EngineLife]:
        """Every engine ``func`` holds: built in it, entered in it, or requested."""
        key = id(func.node)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        self.cache[key] = []  # a fixture requesting itself (never valid) ends here
        module = self.module
        out: list[EngineLife] = []
        for site in module.engines:
            if site.function is not func or site.under_main_guard or site.in_raises:
                continue
            locals_ = local_names(module, func)  # cached per function by the analysis
            share, defaulted = self.share(site.call, locals_)
            group = engine_group(module, site.call, site.statement, func)
            if group is not None and group.kind == "comprehension":
                end = self._group_end(func, group.container, site.statement)
            else:
                end = self._bound_end(func, site.bound_name, site.statement)
            out += self._lives(func, site.call, end, share, defaulted,
                               f"`{last_name(site.call.func) or 'LLM'}(...)` line "
                               f"{site.call.lineno}", locals_)
        for call in module.runner_calls:
            if call.function is not func or call.under_main_guard or \
                    call.context == "returned":
                continue
            locals_ = local_names(module, func)
            share, defaulted = self.share(call.call, locals_)
            held = guarded_with(module, call.call) if call.context == "guarded" else None
            if call.context == "bare":
                statement = module.statement_of(call.call)
                end = self._bound_end(func, _bound(statement, call.call), statement)
            elif held is not None:  # ``try: runner = vllm_runner(...)`` then ``with runner:``
                end = (held.end_lineno or held.lineno, held.end_col_offset or 0)
            else:
                end = self._block_end(func, call.call)
            out += self._lives(func, call.call, end, share, defaulted,
                               f"`{last_name(call.call.func)}(...)` line {call.call.lineno}",
                               locals_)
        out += self._from_other_modules(func)
        if func.kind in (FunctionKind.TEST, FunctionKind.FIXTURE) and depth < 8:
            out += self._requested(func, depth)
        self.cache[key] = out
        return out

    def share(self, call: ast.Call, locals_: frozenset[str]) -> tuple[float | None, bool]:
        """The call's ``gpu_memory_utilization`` and whether it is the default; ``None``
        when it is known only at run time."""
        if self.module.is_engine_factory_call(call):
            return None, False
        given = self._keyword_share(call, locals_)
        if given is not None:
            return given
        if any(kw.arg in BYTES_KEYWORDS for kw in call.keywords) or any(
                isinstance(arg, ast.Starred) for arg in call.args):
            return None, False
        return self.default, True

    def _keyword_share(self, call: ast.Call,
                       locals_: frozenset[str]) -> tuple[float | None, bool] | None:
        """The share the call's keywords set (unknown for ``**kwargs``), or ``None`` when
        they do not set it."""
        for kw in call.keywords:
            if kw.arg == SHARE_KEYWORD:
                value = literal_value(kw.value, self.constants, locals_)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    return float(value), False
                return None, False
        for kw in call.keywords:
            if kw.arg is None:
                keys = self._spread_keys(kw.value, call, 0)
                if keys is None or SHARE_KEYWORD in keys or keys & BYTES_KEYWORDS:
                    return None, False
        return None

    def _spread_keys(self, value: ast.expr, at: ast.AST, depth: int
                     ) -> frozenset[str] | None:
        """The keys a ``**value`` spread into a call at ``at`` can hold, where every one is
        known: a dict display with string keys, a name the function (or the module)
        binds only to such values and never changes in place, or a call of a module-level
        function whose every ``return`` is one (``**_processor_kwargs(model)``); else
        ``None``."""
        if depth > 4:
            return None
        if isinstance(value, ast.Dict):
            keys = [k.value for k in value.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            return frozenset(keys) if len(keys) == len(value.keys) else None
        module = self.module
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            helper = next((f for f in module.functions if f.name == value.func.id
                           and f.parent is None and f.owner_class is None), None)
            if helper is None or isinstance(helper.node, ast.AsyncFunctionDef) or any(
                    isinstance(n, (ast.Yield, ast.YieldFrom)) for n in module.nodes_of(helper)):
                return None
            returns = [n.value for n in module.nodes_of(helper) if isinstance(n, ast.Return)]
            return self._union([self._spread_keys(r, r, depth + 1) if r is not None
                                else None for r in returns])
        if not isinstance(value, ast.Name):
            return None
        scope = module.enclosing(at, FUNCTION_DEFS)
        if scope is not None and value.id in local_names(
                module, next(f for f in module.functions if f.node is scope)):
            nodes: list[ast.AST] = list(walk_breadth(scope))
        else:
            nodes = list(module.tree.body)
            nodes += [n for s in module.tree.body for n in walk_breadth(s)
                      if not isinstance(s, NESTED_SCOPES)]
        bound: list[ast.expr] = []
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name) and node.targets[0].id == value.id:
                bound.append(node.value)
            elif isinstance(node, ast.Name) and node.id == value.id and \
                    not isinstance(node.ctx, ast.Load) and \
                    not isinstance(module.parent(node), ast.Assign):
                return None  # bound otherwise (a loop, a with, an augmented assignment)
            elif isinstance(node, (ast.Subscript, ast.Attribute)) and \
                    isinstance(node.value, ast.Name) and node.value.id == value.id and \
                    (not isinstance(node.ctx, ast.Load) or isinstance(node, ast.Attribute)):
                return None  # changed in place (``kw["x"] = ...``, ``kw.update(...)``)
        return self._union([self._spread_keys(b, b, depth + 1) for b in bound])

    @staticmethod
    def _union(found: list[frozenset[str] | None]) -> frozenset[str] | None:
        """The union of ``found``; ``None`` when it is empty or any is unknown."""
        if not found or any(keys is None for keys in found):
            return None
        return frozenset().union(*found)  # type: ignore[arg-type]

    def _life(self, func: FunctionInfo, node: ast.AST, end: Position, share: float | None,
              defaulted: bool, label: str) -> EngineLife:
        return EngineLife(node, (node.lineno, node.col_offset), end,  # type: ignore[attr-defined]
                          share, defaulted, label, self._branches(func, node))

    def _lives(self, func: FunctionInfo, call: ast.Call, end: Position, share: float | None,
               defaulted: bool, label: str, locals_: frozenset[str]) -> list[EngineLife]:
        """One life per engine ``call`` builds: as many as the comprehension it is the
        element of has elements (:meth:`_copies`), each labelled ``(#k)``; one otherwise."""
        copies = self._copies(func, call, locals_)
        if copies == 1:
            return [self._life(func, call, end, share, defaulted, label)]
        return [self._life(func, call, end, share, defaulted, f"{label} (#{k + 1})")
                for k in range(copies)]

    def _copies(self, func: FunctionInfo, call: ast.Call, locals_: frozenset[str]) -> int:
        """How many engines ``call`` builds at once: for the element of a list, set or dict
        comprehension (``[LLM(m) for m in MODELS]``) whose ``for`` clauses run over a
        literal, a module constant or ``range()`` of literals, and have no ``if``, the
        number of elements; 1 for anything else, a comprehension of unknown length
        included (counted as one engine, as the rule counts an engine built in a loop)."""
        parent = self.module.parent(call)
        while parent is not None and parent is not func.node and not isinstance(
                parent, (ast.stmt, ast.ListComp, ast.SetComp, ast.DictComp)):
            parent = self.module.parent(parent)
        if not isinstance(parent, (ast.ListComp, ast.SetComp, ast.DictComp)) or not any(
                n is call for n in walk_breadth(parent.value if isinstance(parent, ast.DictComp)
                                            else parent.elt)):
            return 1
        total = 1
        for clause in parent.generators:
            if clause.ifs or clause.is_async:
                return 1
            length = self._length(clause.iter, locals_)
            if length is None:
                return 1
            total *= length
        return max(total, 1)

    def _length(self, node: ast.expr, locals_: frozenset[str]) -> int | None:
        """The number of items of a literal container, a module constant holding one, or
        ``range(...)`` of literal integers; ``None`` when known only at run time."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "range" and "range" not in locals_ and not node.keywords:
            bounds = [b for b in (literal_value(a, self.constants, locals_) for a in node.args)
                      if isinstance(b, int) and not isinstance(b, bool)]
            if 1 <= len(bounds) <= 3 and len(bounds) == len(node.args):
                return len(range(*bounds))
            return None
        value = literal_value(node, self.constants, locals_)
        return len(value) if isinstance(value, (list, tuple, set, frozenset, dict, str)) \
            else None

    def _group_end(self, func: FunctionInfo, container: str, statement: ast.stmt) -> Position:
        """Where engines kept in ``container`` die: as :meth:`_bound_end` for the container,
        or at a loop over it that shuts each one down (``for llm in llms: llm.shutdown()``),
        whichever comes first."""
        ends = [self._bound_end(func, container, statement)]
        for node in self.module.nodes_of(func):
            if not (isinstance(node, ast.For) and isinstance(node.target, ast.Name)
                    and node.lineno > statement.lineno):
                continue
            source = node.iter.func.value if isinstance(node.iter, ast.Call) and isinstance(
                node.iter.func, ast.Attribute) else node.iter
            if isinstance(source, ast.Name) and source.id == container and any(
                    ends_engine(self.module, n, {node.target.id}) for n in walk_breadth(node)):
                ends.append((node.lineno, node.col_offset))
        return min(ends)

    def _branches(self, func: FunctionInfo, node: ast.AST) -> Branches:
        out: list[tuple[int, int]] = []
        child: ast.AST = node
        parent = self.module.parent(child)
        while parent is not None and parent is not func.node:
            if isinstance(parent, ast.If):
                if child in parent.body:
                    out.append((id(parent), 0))
                elif child in parent.orelse:
                    out.append((id(parent), 1))
            elif isinstance(parent, ast.match_case):
                match = self.module.parent(parent)
                if isinstance(match, ast.Match):
                    out.append((id(match), match.cases.index(parent)))
            child, parent = parent, self.module.parent(parent)
        return tuple(out)

    @staticmethod
    def _function_end(func: FunctionInfo) -> Position:
        node = func.node
        return (node.end_lineno or node.lineno, node.end_col_offset or 0)

    def _bound_end(self, func: FunctionInfo, name: str | None, statement: ast.stmt) -> Position:
        """Where a bound engine dies: its ``del``, the statement rebinding its name (the new
        engine is built while the old one still holds memory), a ``name....shutdown()``,
        ``name....close()`` or ``name.__exit__(...)`` call (in a ``finally`` too); else the
        end of the function. An unbound engine lives
        for its statement only."""
        if name is None:
            return (statement.end_lineno or statement.lineno, statement.end_col_offset or 0)
        start = (statement.lineno, statement.col_offset)
        ends: list[Position] = []
        for node in self.module.nodes_of(func):
            # Only statements and expressions can end an engine (a del, an assignment, a call).
            if not isinstance(node, (ast.stmt, ast.expr)) or \
                    (node.lineno, node.col_offset) <= start:
                continue
            if isinstance(node, ast.Delete) and any(
                    isinstance(t, ast.Name) and t.id == name for t in node.targets):
                ends.append((node.lineno, node.col_offset))
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in node.targets):
                ends.append((node.end_lineno or node.lineno, node.end_col_offset or 0))
            elif ends_engine(self.module, node, {name}):
                ends.append((node.lineno, node.col_offset))
        return min(ends, default=self._function_end(func))

    def _block_end(self, func: FunctionInfo, call: ast.Call) -> Position:
        """The end of the innermost with-statement around a runner entered in it (its own,
        or the ``ExitStack``'s for ``enter_context``), or the end of the function; or, when
        it comes first, an explicit shutdown (:func:`ends_engine`) of the runner through
        the name it is bound to (``first.llm.shutdown()`` inside ``with ... as first:``), or
        ``stack.close()`` of the ``ExitStack`` it was entered in."""
        module = self.module
        ends = [self._function_end(func)]
        current = module.parent(call)
        while current is not None and current is not func.node:
            if isinstance(current, (ast.With, ast.AsyncWith)):
                ends = [(current.end_lineno or current.lineno, current.end_col_offset or 0)]
                break
            current = module.parent(current)
        names: set[str] = set()
        stacks: set[str] = set()
        parent = module.parent(call)
        if isinstance(parent, ast.withitem) and isinstance(parent.optional_vars, ast.Name):
            names.add(parent.optional_vars.id)
        elif isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and \
                parent.func.attr == "enter_context":
            if isinstance(parent.func.value, ast.Name):
                stacks.add(parent.func.value.id)
            bound = _bound(module.statement_of(parent), parent)
            if bound is not None:
                names.add(bound)
        if names or stacks:
            start = (call.lineno, call.col_offset)
            ends += [(node.lineno, node.col_offset) for node in module.nodes_of(func)
                     if isinstance(node, ast.Call) and (node.lineno, node.col_offset) > start
                     and (ends_engine(module, node, names)
                          or ends_engine(module, node, stacks, chain=False))]
        return min(ends)

    def _from_other_modules(self, func: FunctionInfo) -> list[EngineLife]:
        """Engines ``func`` gets from a helper of another module of the tree that builds and
        returns one (:meth:`~lint_gpu_tests.analysis.analysis.ModuleAnalysis.helper_called`): each
        lives as an engine built there would, with the call's own
        ``gpu_memory_utilization``, else the one the helper writes, else the default."""
        module = self.module
        if not module.imported_helpers:
            return []
        out: list[EngineLife] = []
        for node in module.nodes_of(func):
            helper = module.helper_called(node)
            if helper is None or helper.kind != "f":
                continue
            call: ast.Call = node  # type: ignore[assignment]
            locals_ = local_names(module, func)
            given = self._keyword_share(call, locals_)
            if given is not None:
                share, defaulted = given
            elif helper.extra == "default":
                share, defaulted = self.default, True
            else:
                share, defaulted = (float(helper.extra), False) if helper.extra else \
                    (None, False)
            statement = module.statement_of(call)
            out += self._lives(func, call, self._bound_end(func, _bound(statement, call),
                                                           statement),
                               share, defaulted, f"`{dotted_name(call.func)}(...)` line "
                               f"{call.lineno}", locals_)
        return out

    def _requested(self, func: FunctionInfo, depth: int) -> list[EngineLife]:
        """Engines of the fixtures ``func`` requests (alive for all of ``func``), and those
        it builds through factory fixtures (alive until ``func`` ends: the factory keeps
        them)."""
        module = self.module
        out: list[EngineLife] = []
        start = (func.node.lineno, func.node.col_offset)
        end = self._function_end(func)
        args = {a.arg: a for a in (*func.node.args.posonlyargs, *func.node.args.args,
                                   *func.node.args.kwonlyargs)}
        for name, arg in args.items():
            fixture = self.fixtures.get(name)
            inner = self.factories.get(name)
            # A conftest's factory fixture: the share its engine or runner call writes.
            written = module.conftest_factory_shares.get(name) if fixture is None else None
            if inner is not None or written is not None or \
                    (name == RUNNER_FACTORY_FIXTURE and fixture is None):
                locals_ = local_names(module, func)
                # A factory that keeps none of its engines hands each to the caller, in
                # whose name it lives as one the caller built.
                keeps_none = module.factory_fixtures.get(name) == (
                    fixture.node.lineno if fixture is not None else 0)
                for node in module.nodes_of(func):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                            node.func.id == name or self._forwards(node, name)):
                        share, defaulted = self._factory_share(node, inner, locals_) \
                            if written is None else self._written_share(node, written,
                                                                        locals_)
                        statement = module.statement_of(node)
                        bound = _bound(statement, node)
                        until = self._bound_end(func, bound, statement) \
                            if bound is not None and keeps_none \
                            else self._factory_end(func, node)
                        out += self._lives(func, node, until,
                                           share, defaulted,
                                           f"`{node.func.id}(...)` line {node.lineno}",
                                           locals_)
                continue
            out += self._fixture_lives(name, arg, start, end, depth)
        # ``@pytest.mark.usefixtures("llm")`` on the function or its class: alive throughout.
        for constant in _used_fixtures(module, func):
            if str(constant.value) not in args:
                out += self._fixture_lives(str(constant.value), constant, start, end, depth)
        return out

    def _forwards(self, call: ast.Call, factory: str) -> bool:
        """True for ``call``, a call of a module function that returns what its parameter
        returns when called (:func:`factory_forwarders`), given the factory fixture
        ``factory`` for that parameter."""
        assert isinstance(call.func, ast.Name)
        forwarded = self.forwarders.get(call.func.id)
        if forwarded is None:
            return False
        index, parameter = forwarded
        given = call.args[index] if index < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[:index + 1]) else next(
            (kw.value for kw in call.keywords if kw.arg == parameter), None)
        return isinstance(given, ast.Name) and given.id == factory

    def _fixture_lives(self, name: str, node: ast.AST, start: Position, end: Position,
                       depth: int) -> list[EngineLife]:
        """The engines of the engine fixture ``name`` a function requests (at ``node``), alive
        from ``start`` to ``end``: those its definition in the module holds where it hands
        out its value, else one of a share known only at run time."""
        if name not in self.module.engine_fixtures:
            return []
        fixture = self.fixtures.get(name)
        held = self._held_at_handout(fixture, depth) if fixture is not None else []
        if not held:
            held = [EngineLife(node, start, end, None, False, f"fixture `{name}`")]
        return [EngineLife(node, start, end, life.share, life.defaulted, f"fixture `{name}`")
                for life in held]

    def _held_at_handout(self, fixture: FunctionInfo, depth: int) -> list[EngineLife]:
        """The fixture's engines alive where it yields or returns its value (also one
        built in the ``yield``/``return`` itself: ``return LLM(...)``)."""
        handouts = [n for n in self.module.nodes_of(fixture)
                    if isinstance(n, (ast.Yield, ast.Return))]
        if not handouts:
            return []
        first = handouts[0]
        point = (first.lineno, first.col_offset)
        last = (first.end_lineno or first.lineno, first.end_col_offset or 0)
        return [life for life in self.of(fixture, depth + 1)
                if life.start <= last and point <= life.end]

    def _factory_end(self, func: FunctionInfo, call: ast.Call) -> Position:
        """A factory's engine lives until the test ends (the factory holds it), or to the
        end of the with-statement it is entered in, itself or through an ``ExitStack``'s
        ``enter_context`` (the bundled factory's runners)."""
        parent = self.module.parent(call)
        if isinstance(parent, ast.withitem) or isinstance(parent, ast.Call) and last_name(
                parent.func) == "enter_context" and any(a is call for a in parent.args):
            return self._block_end(func, call)
        return self._function_end(func)

    def _factory_share(self, call: ast.Call, inner: ast.Call | None,
                       locals_: frozenset[str]) -> tuple[float | None, bool]:
        """A factory call's share: its own ``gpu_memory_utilization`` keyword, else the
        engine call's inside the factory (``inner``; ``None`` for the bundled runner
        factory), else the default."""
        given = self._keyword_share(call, locals_)
        if given is not None:
            return given
        explicit = [kw for kw in inner.keywords if kw.arg == SHARE_KEYWORD] if inner else []
        if inner is not None and explicit:
            return self._keyword_share(ast.Call(func=inner.func, args=[], keywords=explicit),
                                       frozenset()) or (None, False)
        return self.default, True

    def _written_share(self, call: ast.Call, written: str, locals_: frozenset[str]
                       ) -> tuple[float | None, bool]:
        """The share of a call of a conftest's factory fixture: its own
        ``gpu_memory_utilization`` keyword, else the one the factory's engine call writes
        (``written``, as :data:`~lint_gpu_tests.analysis.analysis.FACTORY_SHARE` entries
        carry it)."""
        given = self._keyword_share(call, locals_)
        if given is not None:
            return given
        if written == "default":
            return self.default, True
        return (float(written), False) if written else (None, False)


def _used_fixtures(module: ModuleAnalysis, func: FunctionInfo) -> list[ast.Constant]:
    """The fixture names (string constants) of the ``pytest.mark.usefixtures(...)``
    decorators of ``func`` and of the class it is a method of."""
    decorators = list(func.node.decorator_list)
    if func.owner_class is not None:
        decorators += func.owner_class.decorator_list
    return [arg for deco in decorators if isinstance(deco, ast.Call)
            and module.qualified(deco.func) == "pytest.mark.usefixtures"
            for arg in deco.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]


def _bound(statement: ast.stmt, call: ast.Call) -> str | None:
    """``x`` for ``x = call`` (a single plain name), else ``None``."""
    if isinstance(statement, ast.Assign) and statement.value is call and \
            len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    return None


def factory_forwarders(module: ModuleAnalysis) -> dict[str, tuple[int, str]]:
    """The module's functions whose every ``return`` gives the call of one parameter
    (``def make_chunked(make_runner, ...): return make_runner(..., chunked=True)``), by
    name: the parameter's position and name. Given a factory fixture for that parameter,
    a call of such a function builds one engine as the factory's own call does, with the
    share the call gives (none of the returned calls sets one)."""
    out: dict[str, tuple[int, str]] = {}
    for node in module.tree.body:
        if not isinstance(node, FUNCTION_DEFS):
            continue
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        returns = [n for n in walk_breadth(node) if isinstance(n, ast.Return)]
        called = {n.value.func.id if isinstance(n.value, ast.Call) and isinstance(
            n.value.func, ast.Name) and not any(
            kw.arg == SHARE_KEYWORD for kw in n.value.keywords) else None for n in returns}
        if len(called) == 1 and (name := called.pop()) in params and not any(
                isinstance(n, NESTED_SCOPES) and n is not node for n in walk_breadth(node)):
            out[node.name] = (params.index(name), name)
    return out

"""Fix planning on the ``ast`` tree: which statements a rewrite covers and how safe it is.

The checker decides here, without LibCST, whether each violation has a safe, unsafe or
no fix (SPEC §4), and records *what* the rewrite must do as a :class:`WrapPlan`: the
block and the range of statements the ``with`` covers (construction to last use), the
cleanup statements to delete, the parameters to add or drop. The codemods in
``lint_gpu_tests/codemods/`` apply plans mechanically, locating statements by their line numbers, so
the decision lives in one place and ``check`` can print ``[*]`` before anything is
rewritten.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from lint_gpu_tests.analysis import (
    EngineSite,
    FunctionInfo,
    ModuleAnalysis,
    RunnerCall,
    dotted_name,
    last_name,
    names_in,
)
from lint_gpu_tests.fixplan_groups import (
    CLASS_CALLS,
    FACTORY_REASON,
    GROUP_TITLE,
    IDENTITY_CALLS,
    FactoryParts,
    GroupShape,
    after_loop_cleanup,
    engine_group,
    factory_fixture,
    group_cleanup_loop,
    identity_problem,
    identity_reason,
    inside_loop,
    other_branch_statements,
)
from lint_gpu_tests.ftypes import Applicability, FixInfo
from lint_gpu_tests.helper_calls import HelperCallers, runner_through_callers
from lint_gpu_tests.mappings import hides_model, plan_mapping
from lint_gpu_tests.noqa import Noqa, parse_noqa
from lint_gpu_tests.source import walk_nodes

WRAP_TITLE = "Wrap in `with {runner}(...)`"
THREAD_CALLS = frozenset(
    {"Thread", "Process", "submit", "map", "apply_async", "run_in_executor", "start_new_thread"}
)
#: Calls that observe when the engine object itself is freed (``weakref`` module).
WEAKREF_CALLS = frozenset({"ref", "finalize", "getweakrefcount", "getweakrefs"})
#: Methods that hash their argument (a set's); a ``weakref.proxy`` is unhashable.
HASHING_METHODS = frozenset({"add", "discard", "fromkeys"})
FINALIZER_CALLS = frozenset({"addfinalizer", "register", "callback"})
#: Keyword arguments of ``vllm.LLM`` renamed by the runner (vLLM tests/conftest.py).
RENAMED_KWARGS = {"tokenizer": "tokenizer_name"}
#: Defaults of vLLM's ``tests/conftest.py`` ``VllmRunner`` that differ from ``vllm.LLM``
#: (SPEC §4, read from vLLM in 2026): added when the call does not set them.
VLLM_TARGET_DEFAULTS = (
    ("trust_remote_code", "False"),
    ("max_model_len", "None"),
    ("block_size", "None"),
    ("enable_chunked_prefill", "None"),
    ("compilation_config", "CompilationConfig()"),
)


@dataclass
class WrapPlan:
    """How to wrap one engine (or bare runner) in a ``with`` block.

    Line numbers are 1-based starts of statements as ``ast`` reports them.

    Attributes:
        kind: ``"engine"`` (GPU001) or ``"runner"`` (GPU005).
        site_line: line of the statement that builds the engine/runner.
        function_line: line of the owning ``def`` (for parameters).
        end_line: start line of the last statement inside the new ``with``.
        bound_name: ``llm`` for ``llm = LLM(...)``; ``None`` when unbound.
        remove_lines: start lines of cleanup statements to delete.
        unwrap_try_lines: start lines of ``try`` statements replaced by their body.
        add_param: name of the fixture parameter to add (``vllm_runner``), or ``None``.
        drop_params: parameters to drop (``request`` once its finalizer is gone).
        use_class: build with the runner class (helpers, wide-scope fixtures) instead of
            the fixture.
        yield_proxy: the single use is ``yield``/``return`` of the engine in a fixture:
            emit ``yield weakref.proxy(runner.llm)``.
        applicability / reason: fix safety and why.
        call_line: line of the engine (runner) call that GPU001 (GPU005) reports; the
            fixes of GPU002-GPU004 that ride on this rewrite depend on that report.
        aliases: the names bound to the engine itself (they become weak proxies).
        weak_calls: ``(line, callee)`` of ``weakref.proxy(llm)``/``weakref.ref(llm)``/
            ``weakref.finalize(llm, ...)`` calls on an alias inside the block: the alias is
            a proxy after the rewrite and a proxy cannot be weakly referenced, so their
            first argument becomes ``runner.llm``.
        compilation_config: with target ``vllm``, the expression that replaces the call's
            own ``compilation_config=`` value (``None``: keep it).
        mapping_defaults: with target ``vllm`` and the model in a ``**mapping``: the
            ``k=v`` defaults handed with the mapping to the module's ``_runner_kwargs`` helper
            (:mod:`lint_gpu_tests.mappings`), which replaces the mapping in the call;
            ``None``: no mapping to map.
        helper_calls: with target ``vllm``, a helper that gets the runner fixture as its
            first parameter from every caller (:mod:`lint_gpu_tests.helper_calls`).
        group: engines kept in a container or made by a factory fixture
            (:mod:`lint_gpu_tests.fixplan_groups`): the block is a
            ``contextlib.ExitStack()`` entering one runner per engine.
    """

    kind: str
    site_line: int
    function_line: int
    end_line: int
    bound_name: str | None
    remove_lines: set[int] = field(default_factory=set)
    unwrap_try_lines: set[int] = field(default_factory=set)
    add_param: str | None = None
    drop_params: set[str] = field(default_factory=set)
    use_class: bool = False
    yield_proxy: bool = False
    applicability: Applicability = Applicability.SAFE
    reason: str = ""
    title: str = ""
    call_line: int = 0
    aliases: set[str] = field(default_factory=set)
    weak_calls: set[tuple[int, str]] = field(default_factory=set)
    compilation_config: str | None = None
    mapping_defaults: tuple[str, ...] | None = None
    helper_calls: HelperCallers | None = None
    group: GroupShape | None = None

    @property
    def anchor(self) -> tuple[str, int]:
        """``(code, row)`` of the violation whose fix this plan is (GPU001 or GPU005)."""
        return ("GPU001" if self.kind == "engine" else "GPU005", self.call_line)

    def fix_info(self, title: str | None = None) -> FixInfo:
        """The :class:`FixInfo` for violations this plan fixes (``title`` overrides the
        plan's own, e.g. for GPU004 "Remove the manual cleanup")."""
        return FixInfo(self.applicability, title or self.title, self.reason)


def _none(reason: str, title: str) -> FixInfo:
    return FixInfo(Applicability.NONE, title, reason)


def _stmt_block(module: ModuleAnalysis, stmt: ast.stmt) -> list[ast.stmt] | None:
    """The statement list that directly holds ``stmt``."""
    parent = module.parent(stmt)
    if parent is None:
        return None
    for attr in ("body", "orelse", "finalbody"):
        block = getattr(parent, attr, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    for handler in getattr(parent, "handlers", []) or []:
        if any(s is stmt for s in handler.body):
            return handler.body  # type: ignore[no-any-return]
    if isinstance(parent, ast.match_case) and any(s is stmt for s in parent.body):
        return parent.body
    return None


def _loads(node: ast.AST, name: str) -> list[ast.Name]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load)]


class Planner:
    """Builds and caches fix plans for one analysed module."""

    def __init__(self, module: ModuleAnalysis) -> None:
        self.module = module
        self._engine_plans: dict[int, WrapPlan | FixInfo] = {}
        self._helpers: Helpers | None = None
        self._runner_plans: dict[int, WrapPlan | FixInfo] = {}
        self._noqa: Noqa | None = None

    @property
    def helpers(self) -> Helpers:
        """The module's own functions (:func:`module_helpers`), indexed on first use: most
        modules never follow a value into a helper."""
        if self._helpers is None:
            self._helpers = module_helpers(self.module.tree)
        return self._helpers

    # ---------------------------------------------------------------- cleanup
    def user_kept(self, line: int) -> bool:
        """Whether the user suppressed GPU004 on the statement starting at ``line``
        (``# noqa: GPU004``, a bare ``# noqa``, a file-level directive): the rewrite keeps
        such a statement as an ordinary one, as ruff leaves alone what the user
        suppressed."""
        if "noqa" not in self.module.text.lower():
            return False
        if self._noqa is None:
            self._noqa = parse_noqa(self.module.text)
        return self._noqa.suppresses(line, "GPU004")

    def is_cleanup_statement(self, stmt: ast.stmt, names: set[str]) -> bool:
        """True when ``stmt`` only does manual cleanup of an engine in ``names`` (or the
        process-wide cleanup SPEC §3 lists for GPU004), or registers such a finalizer."""
        module = self.module
        if isinstance(stmt, ast.Delete):
            return all(isinstance(t, ast.Name) and t.id in names for t in stmt.targets)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            kind = module.cleanup_call_kind(call)
            if kind is not None:
                if kind == "engine_core.shutdown()":
                    return bool(names_in(call.func) & names)
                args_names = set().union(*(names_in(a) for a in call.args)) if call.args else set()
                return not args_names or bool(args_names & names)
            if last_name(call.func) in ("shutdown", "__exit__") and isinstance(
                    call.func, ast.Attribute):
                return isinstance(call.func.value, ast.Name) and call.func.value.id in names
            if self.finalizer_engine(call, names):
                return True
        return False

    def finalizer_engine(self, call: ast.Call, names: set[str]) -> bool:
        """True for ``request.addfinalizer(f)``/``atexit.register(f)``/``stack.callback(f)``
        where ``f`` shuts down an engine in ``names`` (attribute chain, lambda or partial)."""
        name = last_name(call.func)
        if name not in FINALIZER_CALLS or not call.args:
            return False
        if name == "register" and self.module.qualified(call.func) != "atexit.register":
            return False
        target = call.args[0]
        mentioned = set().union(*(names_in(a) for a in call.args))
        if not (mentioned & names):
            return False
        if isinstance(target, ast.Attribute):
            return target.attr in ("shutdown", "__exit__", "close")
        if isinstance(target, ast.Lambda):
            body = target.body
            return isinstance(body, ast.Call) and (
                last_name(body.func) in ("shutdown", "__exit__")
                or self.module.cleanup_call_kind(body) is not None
            )
        return False

    def finally_only_cleans(self, node: ast.Try, names: set[str]) -> bool:
        """True for ``try/finally`` (no ``except``/``else``) whose finally only cleans up."""
        return (
            not node.handlers
            and not node.orelse
            and bool(node.finalbody)
            and all(self.is_cleanup_statement(s, names) for s in node.finalbody)
        )

    # ---------------------------------------------------------------- engines
    def engine_plan(self, site: EngineSite) -> WrapPlan | FixInfo:
        """Plan the GPU001 rewrite of one engine construction (cached).

        Returns a :class:`WrapPlan` when a fix exists (safe or unsafe), else the
        :class:`FixInfo` of a missing fix with its reason.
        """
        key = id(site.call)
        if key not in self._engine_plans:
            self._engine_plans[key] = self._plan_site(site.call, site.statement, site.function,
                                                      site.bound_name, "engine")
        return self._engine_plans[key]

    def runner_plan(self, call: RunnerCall) -> WrapPlan | FixInfo:
        """Plan the GPU005 rewrite of a runner built outside a ``with`` (cached)."""
        key = id(call.call)
        if key not in self._runner_plans:
            stmt = self.module.statement_of(call.call)
            bound = None
            if isinstance(stmt, ast.Assign) and stmt.value is call.call and len(stmt.targets) == 1:
                if isinstance(stmt.targets[0], ast.Name):
                    bound = stmt.targets[0].id
            self._runner_plans[key] = self._plan_site(call.call, stmt, call.function, bound,
                                                      "runner")
        return self._runner_plans[key]

    def _title(self, kind: str, func: FunctionInfo | None, use_class: bool = False) -> str:
        runner = self.module.config.runner_fixture
        if kind == "runner":
            return "Wrap in a with-statement"
        if self.module.config.target == "vllm" and not use_class:
            pass  # vLLM's runner class is never imported: its fixture is passed in
        elif use_class or (func is not None and func.kind in ("helper", "method")):
            runner = self.module.config.runner_classes[0] if self.module.config.runner_classes \
                else runner
        return WRAP_TITLE.format(runner=runner)

    def _plan_site(
        self,
        call: ast.Call,
        stmt: ast.stmt,
        func: FunctionInfo | None,
        bound: str | None,
        kind: str,
    ) -> WrapPlan | FixInfo:
        module = self.module
        config = module.config
        title = self._title(kind, func)
        if func is None:
            return _none("built at module or class level: it lives as long as the module", title)
        if func.kind == "method" and func.name == "__init__":
            return _none("built in a helper class: the engine outlives `__init__`", title)
        # Issue 11: engines kept in a container (shape 1), made by a factory fixture
        # (shape 6): fixplan_groups says where their ExitStack block starts.
        group = engine_group(module, call, stmt, func) if kind == "engine" else None
        if group is None and kind == "engine":
            factory = factory_fixture(module, call, stmt, func, self.is_cleanup_statement)
            if factory is not None:
                return self._factory_plan(call, factory, title)
        if group is not None:
            stmt, bound, title = group.statement, group.container, GROUP_TITLE
        block = _stmt_block(module, stmt)
        if block is None:
            return _none("built inside an expression the fix cannot restructure", title)
        if self.shares_line(stmt) or self.on_header_line(stmt):
            return _none("the statement shares its line with another statement", title)
        # The call must be a direct part of a simple statement, not inside a lambda or
        # comprehension, and alone of its kind in the statement.
        if group is None and not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr,
                                                   ast.Return)):
            return _none("built inside a compound statement header", title)
        if group is None and self._inside_deferred(call, stmt):
            return _none("built inside a lambda or comprehension", title)
        if not module.is_engine_call(call) and kind == "engine":
            return _none("built by a factory method the runner cannot call", title)
        sites = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)
                 and (module.builds_engine(n) or module.is_runner_call(n))]
        if len(sites) != 1:
            return _none("several engines are built in one statement", title)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is call and not bound:
            return _none("the engine is stored in an attribute or container and outlives "
                         "the block", title)
        is_fixture = func.kind == "fixture"
        is_return_value = isinstance(stmt, ast.Return) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Yield, ast.YieldFrom))
        )
        handed = stmt.value if isinstance(stmt, ast.Return) else (
            stmt.value.value if isinstance(stmt, ast.Expr) and isinstance(
                stmt.value, (ast.Yield, ast.YieldFrom)) else None)
        if is_return_value and is_fixture and handed is not call:
            return _none("the fixture hands out something derived from the engine, which "
                         "would outlive the runner's block", title)
        if is_fixture and isinstance(stmt, ast.Return) and sum(
                isinstance(n, ast.Return) for n in module.nodes_of(func)) > 1:
            return _none("the fixture returns on other paths too: turning this return into a "
                         "yield would leave those paths without a value", title)
        if is_return_value and not is_fixture:
            return _none("the engine is returned to the caller, so it must outlive this "
                         "function", title)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.YieldFrom):
            return _none("built in a `yield from`", title)

        names: set[str] = {bound} if bound else set()
        all_engines = names | module.engine_names(func)
        parent = module.parent(stmt)
        if isinstance(parent, ast.Try) and any(s is stmt for s in parent.body) and \
                self.finally_only_cleans(parent, all_engines) and self._unwrappable(parent) \
                and not any(names_in(s) & (all_engines - names) for s in parent.finalbody):
            outer = _stmt_block(module, parent)
            if outer is None:
                return _none("built inside an expression the fix cannot restructure", title)
            k = next(i for i, s in enumerate(outer) if s is parent)
            block = [*outer[:k], *parent.body, *outer[k + 1:]]
            unwrap_parent: int | None = parent.lineno
            remove_finally = {s.lineno for s in parent.finalbody}
        else:
            unwrap_parent = None
            remove_finally = set()
        index = next(i for i, s in enumerate(block) if s is stmt)
        # Aliases bound later in the block (``engine = llm``) count as the same engine.
        for later in block[index + 1:]:
            if isinstance(later, ast.Assign) and isinstance(later.value, ast.Name) \
                    and later.value.id in names:
                names.update(t.id for t in later.targets if isinstance(t, ast.Name))

        # Segment: the statements from the construction up to the next top-level
        # rebinding of its name. Every value that can reach the engine (aliases, containers,
        # generators, partials, bound methods, closures, wrappers) is followed through it.
        stop = len(block)
        for j in range(index + 1, len(block)):
            if bound and any(s.id == bound for s in _stores_top(block[j])):
                stop = j
                break
        in_loop = isinstance(module.parent(stmt), (ast.For, ast.AsyncFor, ast.While))
        flow = value_flow(func.node, block[index:stop], names, None if bound else call,
                          loop_body=in_loop, helpers=self.helpers)
        if flow.problem is not None and flow.problem.startswith("none:"):
            return _none(flow.problem[5:], title)
        use_names = flow.tainted
        # Segment: from the construction to the last statement using the engine, stopping
        # before the next top-level rebinding of its name. Generic cleanup (gc.collect(),
        # empty_cache(), ...) belongs to this engine up to the next construction.
        next_site = len(block)
        for j in range(index + 1, stop):
            if module.is_engine_call_stmt(block[j]):
                next_site = j
                break
        remove: set[int] = set(remove_finally)
        unwrap: set[int] = {unwrap_parent} if unwrap_parent is not None else set()
        end = index
        for j in range(index + 1, stop):
            later = block[j]
            loop = group_cleanup_loop(module, later, group.container, self.is_cleanup_statement
                                      ) if group is not None else []
            if loop and not any(self.shares_line(s) or self.user_kept(s.lineno) for s in loop):
                remove.update(s.lineno for s in loop)  # ``for llm in llms: llm.shutdown()``
                continue
            if not self.shares_line(later) and not self.user_kept(later.lineno) and \
                    self.is_cleanup_statement(later, all_engines if names else set()):
                mine = bool(names_in(later) & names)
                generic = not (names_in(later) & all_engines)
                if mine and self._del_uses_earlier_binding(
                        func.node, stmt, block[index + 1:stop], names):
                    # ``x = ...; ...; x = LLM(); del x``: the cleanup is the only use of
                    # the name, and what uses its earlier binding as pyflakes sees it: it
                    # stays, inside the block, on the engine's proxy.
                    end = j
                    continue
                if mine or (generic and j < next_site):
                    remove.add(later.lineno)
                continue
            if isinstance(later, ast.Try) and names and self.finally_only_cleans(
                    later, all_engines) and self._unwrappable(later) and not any(
                    names_in(s) & (all_engines - names) for s in later.finalbody):
                # (A finally that tears down another engine is that engine's, not ours.)
                if any(_loads(s, n) for s in later.body for n in names) or any(
                        names_in(s) & names for s in later.finalbody):
                    unwrap.add(later.lineno)
                    remove.update(s.lineno for s in later.finalbody)
                    end = j
                    continue
            if flow.touches(later, j - index) or (
                    isinstance(later, (ast.FunctionDef, ast.AsyncFunctionDef,
                                       ast.ClassDef)) and later.name in use_names):
                end = j
                for node in ast.walk(later):
                    if isinstance(node, ast.Try):
                        for s in node.finalbody:
                            if self.is_cleanup_statement(s, names) and not \
                                    self.on_header_line(s) and not self.shares_line(s):
                                remove.add(s.lineno)
        # An engine built inside the range must be torn down first: the range grows to
        # cover its uses too (nested with-blocks).
        grown = True
        while grown:
            grown = False
            for j in range(index + 1, end + 1):
                inner = block[j]
                inner_names = {t.id for t in _stores_top(inner)} if isinstance(
                    inner, ast.Assign) and module.builds_engine(inner.value) else set()
                if not inner_names:
                    continue
                inner_names = value_flow(func.node, block[j:], inner_names, None,
                                         helpers=self.helpers).tainted
                for k in range(len(block) - 1, end, -1):
                    if _touches(block[k], inner_names):
                        end, grown = k, True
                        break
        # A generic cleanup call (``gc.collect()`` between two rounds) before a later use
        # of the engine is not its teardown (GPU004 does not report it): it stays.
        last_use = max((j for j in range(index + 1, end + 1) if block[j].lineno not in remove
                        and any(_loads(block[j], n) for n in names)), default=index)
        remove -= {block[j].lineno for j in range(index + 1, last_use)
                   if isinstance(block[j], ast.Expr) and block[j].lineno in remove
                   and not names_in(block[j]) & all_engines}
        segment = block[index: end + 1]
        remove |= self._nested_cleanup(segment, names, all_engines, use_names, remove)
        remove |= after_loop_cleanup(module, stmt, lambda s: self.is_cleanup_statement(
            s, set()) and not self.shares_line(s) and not self.on_header_line(s))
        remove = {line for line in remove if not self.user_kept(line)}
        # Every use of the engine must lie in the segment.
        func_node = func.node
        inside = {id(n) for s in segment for n in ast.walk(s)}
        inside |= {id(n) for s in block[stop:] for n in ast.walk(s)}
        if not inside_loop(module, stmt):
            # Earlier statements of the block see an earlier binding of the name (in a loop,
            # also this engine's, from the iteration before: then they are uses).
            inside |= {id(n) for s in block[:index] for n in ast.walk(s)}
        inside |= {id(n) for s in block if s.lineno in remove for n in ast.walk(s)}
        if bound:  # shape 5: other branches of an ``if`` that build their own engine
            inside |= {id(n) for s in other_branch_statements(module, stmt, bound)
                       for n in ast.walk(s)}
        top_rebindings = {id(n) for s in block for n in _stores_top(s)}
        region_index = {id(n): k for k, s in enumerate(block[index:stop]) for n in ast.walk(s)}
        for node in ast.walk(func_node):
            if not (isinstance(node, ast.Name) and node.id in use_names) or id(node) in inside:
                continue
            if isinstance(node.ctx, (ast.Load, ast.Del)):
                if not flow.live(node.id, region_index.get(id(node))):
                    continue
                return _none(f"`{node.id}` is used outside the block that builds it", title)
            if isinstance(node.ctx, ast.Store) and id(node) not in top_rebindings:
                return _none(f"`{node.id}` is rebound elsewhere in the function", title)
        for s in segment:
            if s.lineno != stmt.lineno and self.shares_line(s):
                return _none("a statement in its range shares its line with another", title)
            for node in ast.walk(s):
                if isinstance(node, (ast.Global, ast.Nonlocal)) and set(node.names) & names:
                    return _none("the engine's name is global or nonlocal", title)

        applicability = Applicability.SAFE
        reasons: list[str] = []

        def unsafe(reason: str) -> None:
            nonlocal applicability
            applicability = Applicability.UNSAFE
            if reason not in reasons:
                reasons.append(reason)

        for s in segment:
            if s.lineno in remove:
                continue
            escape = self.escape(s, names, use_names, is_fixture)
            if escape is not None:
                if escape.startswith("none:"):
                    return _none(escape[5:], title)
                unsafe(escape)
        if flow.problem is not None:
            unsafe(flow.problem)
        extra = _cleanup_beyond_the_runner(module, func.node, remove)
        if extra is not None:
            unsafe(extra)
        if config.target == "bundled" and module.own_runner_fixture is not None:
            unsafe(f"the project defines its own `{config.runner_fixture}` fixture (in "
                   f"{module.own_runner_fixture}), which replaces the bundled one whose "
                   "defaults are `LLM`'s, and its defaults may differ (set `target = "
                   "\"vllm\"` if it is vLLM's `VllmRunner`)")
        if group is not None:
            identity = identity_problem(segment, use_names)
            if identity is not None:
                unsafe(identity)
        unfollowed = flow.unfollowed_call([s for s in segment if s.lineno not in remove])
        if unfollowed is not None:
            unsafe(unfollowed)
        if names:
            last_own = max((j for j in range(index, end + 1) if _touches(block[j], names)),
                           default=index)
            if any(module.is_engine_call_stmt(block[j]) for j in range(last_own + 1, end + 1)):
                # Only a value derived from the engine keeps it past the next engine's
                # construction: the two engines are now alive together.
                unsafe("a value that may hold the engine is used after the next engine is "
                       "built, so the block covers both and they are alive together")
        if is_fixture and func.fixture_scope not in (None, "function"):
            unsafe(f"a {func.fixture_scope}-scoped fixture: the engine's lifetime follows the "
                   "fixture's scope and the runner must allow it")
        use_class = func.kind in ("helper", "method") or func.in_base_class or (
            is_fixture and func.fixture_scope not in (None, "function")
            and config.target == "bundled"
        ) or kind == "runner" and last_name(call.func) in config.runner_classes
        compilation: str | None = None
        mapping_defaults: tuple[str, ...] | None = None
        helper_calls: HelperCallers | None = None
        if kind == "engine":
            if config.target == "vllm" and hides_model(call):
                mapping_defaults, arg_problem = plan_mapping(
                    module, func, call, VLLM_TARGET_DEFAULTS, compilation_config_equivalent)
            else:
                arg_problem = self._argument_problem(call)
            if arg_problem is not None:
                if arg_problem.startswith("none:"):
                    return _none(arg_problem[5:], title)
                unsafe(arg_problem)
            if config.target == "vllm":
                given = next((k.value for k in call.keywords if k.arg == "compilation_config"),
                             None)
                if given is not None:
                    compilation, cc_problem = compilation_config_equivalent(given, module)
                    if cc_problem is not None:
                        if cc_problem.startswith("none:"):
                            return _none(cc_problem[5:], title)
                        unsafe(cc_problem)
            if use_class and config.target == "vllm":
                passed = runner_through_callers(module, func, config.runner_fixture)
                if isinstance(passed, str):
                    return _none(passed, title)
                use_class, helper_calls = False, passed
                if passed.public and not passed.passed:
                    unsafe(f"`{passed.name}()` is public: a module that imports it must now "
                           f"pass `{config.runner_fixture}` too")
        yield_proxy = False
        if is_fixture and bound and group is None:
            uses = [s for s in segment[1:] if s.lineno not in remove
                    and any(_loads(s, n) for n in names)]
            # A name bound before the construction keeps its own binding used (pyflakes).
            earlier = any(isinstance(n, ast.Name) and n.id == bound and isinstance(
                n.ctx, ast.Store) and n.lineno < stmt.lineno for n in ast.walk(func.node))
            if len(uses) == 1 and _is_plain_handout(uses[0], bound, module) and not earlier:
                yield_proxy = True
        if is_fixture and not yield_proxy and any(
                isinstance(n, ast.Return) for s in segment[1:] for n in ast.walk(s)):
            return _none("the fixture returns inside the engine's range", title)
        drop: set[str] = set()
        if "request" in func.params:
            removed_nodes = [s for s in ast.walk(func_node) if isinstance(s, ast.stmt)
                             and s.lineno in remove]
            other = [n for n in _loads(func_node, "request")
                     if not any(_contains(r, n) for r in removed_nodes)]
            if not other and removed_nodes and any(
                _loads(r, "request") for r in removed_nodes
            ):
                drop.add("request")
        add_param = None
        if not use_class and config.runner_fixture not in func.params:
            add_param = config.runner_fixture
        if group is not None:
            group = replace(group, runner=self._group_runner(use_class))
            add_param = None if use_class or group.runner in func.params else group.runner
        return WrapPlan(
            kind=kind,
            site_line=stmt.lineno,
            function_line=func_node.lineno,
            end_line=block[end].end_lineno or block[end].lineno,
            bound_name=bound,
            remove_lines=remove,
            unwrap_try_lines=unwrap,
            add_param=add_param,
            drop_params=drop,
            use_class=use_class,
            yield_proxy=yield_proxy,
            aliases=set(names),
            compilation_config=compilation,
            mapping_defaults=mapping_defaults,
            helper_calls=helper_calls,
            weak_calls=weak_calls(module, segment, names) if names and not yield_proxy
            else set(),
            applicability=applicability,
            reason="; ".join(reasons),
            title=title if group is not None else self._title(kind, func, use_class),
            call_line=call.lineno,
            group=group,
        )

    def _group_runner(self, use_class: bool) -> str:
        """What enters each engine of a group on the ``ExitStack``: the runner class
        (helpers, wide-scoped fixtures), else with target bundled the
        ``vllm_runner_factory`` fixture (its memory wait runs once, after the last runner
        exits), else the runner fixture."""
        config = self.module.config
        if use_class:
            return config.runner_classes[0] if config.runner_classes else "VllmRunner"
        return "vllm_runner_factory" if config.target == "bundled" else config.runner_fixture

    def _factory_plan(self, call: ast.Call, parts: FactoryParts | str,
                      title: str) -> WrapPlan | FixInfo:
        """Shape 6 of issue 11: the fixture's body from the factory's ``def`` to its
        ``return`` goes into a ``contextlib.ExitStack()`` (always unsafe, with
        :data:`FACTORY_REASON`)."""
        if isinstance(parts, str):
            return _none(parts, title)
        module, config = self.module, self.module.config
        fixture, shape = parts.fixture, parts.shape
        if shape.statement.decorator_list or self.shares_line(shape.statement):  # type: ignore[attr-defined]
            return _none("the factory is decorated or shares its line", title)
        reasons = [FACTORY_REASON]
        problem = self._argument_problem(call)
        if problem is not None:
            if problem.startswith("none:"):
                return _none(problem[5:], title)
            reasons.append(problem)
        compilation: str | None = None
        given = next((k.value for k in call.keywords if k.arg == "compilation_config"), None)
        if config.target == "vllm" and given is not None:
            compilation, cc_problem = compilation_config_equivalent(given, module)
            if cc_problem is not None:
                if cc_problem.startswith("none:"):
                    return _none(cc_problem[5:], title)
                reasons.append(cc_problem)
        wide = fixture.fixture_scope not in (None, "function")
        if wide:
            reasons.append(f"a {fixture.fixture_scope}-scoped fixture: the engines live as "
                           "long as its scope")
        use_class = wide and config.target == "bundled"
        runner = self._group_runner(use_class)
        removed = [s for s in ast.walk(fixture.node) if isinstance(s, ast.stmt)
                   and s.lineno in parts.remove_lines]
        drop = {"request"} if "request" in fixture.params and removed and not [
            n for n in _loads(fixture.node, "request")
            if not any(_contains(r, n) for r in removed)] else set()
        return WrapPlan(
            kind="engine",
            site_line=shape.statement.lineno,
            function_line=fixture.node.lineno,
            end_line=parts.end_line,
            bound_name=None,
            remove_lines=set(parts.remove_lines),
            add_param=None if use_class or runner in fixture.params else runner,
            drop_params=drop,
            use_class=use_class,
            applicability=Applicability.UNSAFE,
            reason="; ".join(reasons),
            title=GROUP_TITLE,
            call_line=call.lineno,
            compilation_config=compilation,
            group=replace(shape, runner=runner),
        )

    def _nested_cleanup(self, segment: list[ast.stmt], names: set[str], all_engines: set[str],
                        use_names: set[str], remove: set[int]) -> set[int]:
        """Cleanup statements nested in the segment's compound statements (``del llm``
        inside ``with llm.deprecate_legacy_api():``, after the fixture's ``yield``) that
        come after every use of the engine: the runner does them, so they go too."""
        candidates: list[ast.stmt] = []
        for top in segment:
            if top.lineno in remove:
                continue
            for node in walk_statements(top):
                if node is top or not isinstance(node, (ast.Delete, ast.Expr)):
                    continue
                if self.on_header_line(node) or self.shares_line(node):
                    continue
                if self.is_cleanup_statement(node, all_engines if names else set()) and (
                        names_in(node) & names or not names_in(node) & all_engines) \
                        and not self._in_loop(node, top):
                    candidates.append(node)
        if not candidates:
            return set()
        inside = {id(n) for c in candidates for n in ast.walk(c)}
        last_use = max((n.lineno for top in segment if top.lineno not in remove
                        for n in ast.walk(top) if isinstance(n, ast.Name)
                        and n.id in use_names and id(n) not in inside), default=0)
        return {c.lineno for c in candidates if c.lineno > last_use}

    def _del_uses_earlier_binding(self, func: ast.AST, site: ast.stmt, rest: list[ast.stmt],
                                  names: set[str]) -> bool:
        """True when the engine's name was bound before ``site`` and nothing after the site
        but cleanup reads it: the cleanup is then what uses that earlier binding."""
        earlier = any(isinstance(n, ast.Name) and n.id in names
                      and isinstance(n.ctx, ast.Store) and n.lineno < site.lineno
                      for n in ast.walk(func))
        return earlier and not any(_loads(s, n) for s in rest for n in names
                                   if not self.is_cleanup_statement(s, names))

    def _in_loop(self, node: ast.AST, top: ast.stmt) -> bool:
        """True when ``node`` sits in a loop inside ``top`` (it runs between uses)."""
        current = self.module.parent(node)
        while current is not None and current is not top:
            if isinstance(current, (ast.For, ast.AsyncFor, ast.While)):
                return True
            current = self.module.parent(current)
        return isinstance(top, (ast.For, ast.AsyncFor, ast.While))

    def on_header_line(self, stmt: ast.stmt) -> bool:
        """True for a statement that does not start its line: written after a compound
        header (``with pytest.raises(E): llm = LLM(...)``, ``finally: x``) or a ``;``."""
        lines = self.module.lines
        if not 1 <= stmt.lineno <= len(lines):
            return False
        return bool(lines[stmt.lineno - 1].encode("utf-8")[:stmt.col_offset].strip())

    @staticmethod
    def _unwrappable(node: ast.Try) -> bool:
        """A ``try`` whose body sits on lines of its own can be replaced by its body."""
        return bool(node.body) and node.body[0].lineno != node.lineno

    def shares_line(self, stmt: ast.stmt) -> bool:
        """True when ``stmt`` shares its line with another statement of its block."""
        block = _stmt_block(self.module, stmt)
        if block is None:
            return False
        return sum(1 for s in block if s.lineno == stmt.lineno or (
            getattr(s, "end_lineno", None) == stmt.lineno and s is not stmt
            and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.If, ast.For, ast.While, ast.With, ast.Try,
                                   ast.AsyncFor, ast.AsyncWith)))) > 1

    def _inside_deferred(self, call: ast.Call, stmt: ast.stmt) -> bool:
        current: ast.AST | None = self.module.parent(call)
        while current is not None and current is not stmt:
            if isinstance(current, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                    ast.GeneratorExp)):
                return True
            current = self.module.parent(current)
        return False

    def escape(self, stmt: ast.stmt, names: set[str], tainted: set[str],
               is_fixture: bool) -> str | None:
        """Why using the engine in ``stmt`` makes the fix unsafe (``"none:..."`` when it
        rules the fix out), or ``None``. ``names`` are the engine's own names, ``tainted``
        every name that can reach it (:func:`value_flow`; stores into containers and
        attributes are judged there)."""
        if not tainted:
            return None
        for node in ast.walk(stmt):
            if isinstance(node, ast.Return) and node.value is not None and not is_fixture:
                if names_in(node.value) & tainted:
                    return "none:the engine is returned to the caller, so it must outlive " \
                           "this function"
            identity = identity_reason(node, names, "the engine")
            if isinstance(node, ast.Call):
                callee = last_name(node.func)
                args = [*node.args, *(k.value for k in node.keywords)]
                if callee in THREAD_CALLS and any(names_in(a) & tainted for a in args):
                    return "the engine is passed to a thread or process, which may use it " \
                           "after the block"
                if identity is not None:
                    return identity
                plain = any(_is_plain(a, names) for a in node.args)
                dotted = dotted_name(node.func) or ""
                if plain and callee in WEAKREF_CALLS and dotted.startswith(("weakref.", callee)):
                    return (f"`weakref.{callee}()` of the engine observes when it is freed, "
                            "which the runner moves to the end of its block")
                if plain and (callee == "hash" or (
                        callee in HASHING_METHODS and isinstance(node.func, ast.Attribute))):
                    return (f"none:`{callee}()` hashes the engine, and the `weakref.proxy` the "
                            "fix binds is unhashable")
            if isinstance(node, ast.Dict) and any(
                    k is not None and _is_plain(k, names) for k in node.keys) or isinstance(
                    node, ast.Set) and any(_is_plain(e, names) for e in node.elts):
                return ("none:the engine is a dict key or set member, and the `weakref.proxy` "
                        "the fix binds is unhashable")
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                    and _is_plain(node.slice, names):
                return ("none:the engine is used as a key, and the `weakref.proxy` the fix "
                        "binds is unhashable")
            if identity is not None:  # an identity comparison (`is`)
                return identity
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if names_in(node) & tainted:
                    return "the engine is captured by a nested function that may run after " \
                           "the block"
        return None

    def _argument_problem(self, call: ast.Call) -> str | None:
        """Whether the call's arguments can be mapped onto the runner's (SPEC §4)."""
        config = self.module.config
        has_star = any(k.arg is None for k in call.keywords) or any(
            isinstance(a, ast.Starred) for a in call.args)
        if config.target == "vllm":
            if len(call.args) > 1:
                return "none:positional engine arguments after the model do not map onto " \
                       "vLLM's `VllmRunner`"
            if has_star:
                return "`**kwargs` may already set a default the fix adds"
        elif len(call.args) > 1:
            return "none:positional engine arguments after the model do not map onto the " \
                   "runner's keyword arguments"
        return None


def compilation_config_equivalent(value: ast.expr, module: ModuleAnalysis
                                  ) -> tuple[str | None, str | None]:
    """What ``compilation_config=value`` must become for vLLM's ``VllmRunner`` (target
    ``vllm``), and why that is not safe when it is not.

    ``LLM`` turns an int (``bool`` and ``CompilationMode`` included) into
    ``CompilationConfig(mode=CompilationMode(value))``, ``None`` into ``CompilationConfig()``
    and a dict into ``CompilationConfig(**dict)``, and passes anything else through
    (vllm/entrypoints/llm.py, ``LLM.__init__``). vLLM's ``VllmRunner`` replaces every falsy
    value by ``{"cudagraph_capture_sizes": [4]}`` first (tests/conftest.py, SPEC §4), so
    each falsy value is spelled as the explicit config of the same meaning: ``0``/``False``
    /``CompilationMode.NONE`` become ``CompilationConfig(mode=...)`` (compilation off, not
    the platform's default mode), ``None``/``{}``/``dict()`` become ``CompilationConfig()``.

    Returns:
        ``(replacement source or None to keep the value, None)`` when the meaning is kept;
        ``(None, "none:<reason>")`` for a falsy value no runner argument can express (an
        empty string or list); ``(replacement, <reason>)`` for a value only known at run
        time: the replacement keeps the meaning of every ``None``, int and dict, the fix is
        unsafe for anything else that is falsy.
    """
    code = ast.unparse(value)
    if isinstance(value, ast.Constant):
        constant = value.value
        if constant is None:
            return "CompilationConfig()", None
        if isinstance(constant, (bool, int)):
            return (None, None) if constant else ("CompilationConfig(mode=0)", None)
        if constant:
            return None, None
        return None, (f"none:`compilation_config={code}` is falsy: vLLM's `VllmRunner` "
                      "would replace it by its own graph sizes, and no argument keeps it")
    if isinstance(value, ast.Dict):
        if any(k is None for k in value.keys):
            return _runtime_compilation_config(value, code)
        return (None, None) if value.keys else ("CompilationConfig()", None)
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)) and not any(
            isinstance(e, ast.Starred) for e in value.elts):
        if value.elts:
            return None, None
        return None, (f"none:`compilation_config={code}` is falsy: vLLM's `VllmRunner` "
                      "would replace it by its own graph sizes, and no argument keeps it")
    qualified = module.qualified(value.func if isinstance(value, ast.Call) else value) or ""
    if isinstance(value, ast.Call):
        if qualified.startswith("vllm.") and qualified.endswith(".CompilationConfig"):
            return None, None  # a config object is always truthy
        if qualified in ("", "dict") and last_name(value.func) == "dict" and not value.args \
                and not any(k.arg is None for k in value.keywords):
            return (None, None) if value.keywords else ("CompilationConfig()", None)
    if isinstance(value, ast.Attribute) and qualified.startswith("vllm.") and \
            ".CompilationMode." in qualified:
        member = qualified.rsplit(".", 1)[1]
        return (f"CompilationConfig(mode={code})", None) if member == "NONE" else (None, None)
    return _runtime_compilation_config(value, code)


def _runtime_compilation_config(value: ast.expr, code: str) -> tuple[str, str]:
    reason = (f"`compilation_config={code}` is only known at run time and vLLM's "
              "`VllmRunner` replaces any falsy value by its own graph sizes: the rewrite "
              "keeps the meaning of None, ints and dicts, not of other falsy values")
    if isinstance(value, (ast.Name, ast.Attribute)):
        return (f"CompilationConfig(mode={code}) if isinstance({code}, int) and not {code} "
                f"else {code} or CompilationConfig()"), reason
    wrapped = code if isinstance(value, (ast.Call, ast.Subscript)) else f"({code})"
    return f"{wrapped} or CompilationConfig()", reason + " (a falsy int turns compilation on)"


def _cleanup_beyond_the_runner(module: ModuleAnalysis, func: ast.AST,
                               remove: set[int]) -> str | None:
    """Why removing the cleanup on the lines ``remove`` changes behaviour, or ``None``: the
    runner's teardown calls ``cleanup_dist_env_and_memory()`` without arguments
    (``lint_gpu_tests/runtime/runner.py``), so a call that passes any (``shutdown_ray=True``)
    does more than the runner will."""
    for node in ast.walk(func):
        if (isinstance(node, ast.Expr) and node.lineno in remove
                and isinstance(node.value, ast.Call)
                and module.cleanup_call_kind(node.value) == "cleanup_dist_env_and_memory()"
                and (node.value.args or node.value.keywords)):
            text = ast.get_source_segment(module.text, node.value) or "the call"
            return (f"`{text}` does more than the runner's teardown, which calls "
                    "`cleanup_dist_env_and_memory()` without arguments")
    return None


def _stores_top(stmt: ast.stmt) -> list[ast.Name]:
    """Names a simple statement binds at its own level (not inside nested blocks)."""
    if isinstance(stmt, ast.Assign):
        return [t for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
        return [stmt.target]
    return []


def _attribute_base(value: ast.AST) -> ast.AST | None:
    """The node an attribute chain hangs from (``llm`` in ``llm.llm_engine.engine_core``,
    the call in ``vllm_runner("m").llm``), or ``None`` when ``value`` is no attribute."""
    if not isinstance(value, ast.Attribute):
        return None
    while isinstance(value, ast.Attribute):
        value = value.value
    return value


def _attribute_chain_root(value: ast.AST) -> str | None:
    """``llm`` for ``llm.generate`` or ``llm.llm_engine.engine_core`` (no call on the way),
    else ``None``."""
    base = _attribute_base(value)
    return base.id if isinstance(base, ast.Name) else None


def _holds_reference(value: ast.AST, names: set[str]) -> bool:
    """True when ``value`` keeps one of ``names`` reachable after the statement: a closure
    over it, or a call that receives it (an object built around the engine)."""
    for node in ast.walk(value):
        if isinstance(node, ast.Lambda) and names_in(node) & names:
            return True
        if isinstance(node, ast.Call) and any(
            isinstance(arg, ast.Name) and arg.id in names
            for arg in (*node.args, *(k.value for k in node.keywords))
        ) and last_name(node.func) in THREAD_CALLS | {"partial"}:
            return True
    return False


def walk_statements(stmt: ast.stmt) -> list[ast.stmt]:
    """``stmt`` and the statements nested in it, nested functions and classes excluded."""
    out: list[ast.stmt] = []
    stack: list[ast.stmt] = [stmt]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for attr in ("body", "orelse", "finalbody"):
            stack.extend(getattr(node, attr, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            stack.extend(handler.body)
        for case in getattr(node, "cases", None) or []:
            stack.extend(case.body)
    return out


def _touches(node: ast.AST, names: set[str]) -> bool:
    """True when ``node`` reads or deletes one of ``names`` anywhere inside."""
    return any(isinstance(n, ast.Name) and n.id in names
               and isinstance(n.ctx, (ast.Load, ast.Del)) for n in ast.walk(node))


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in ast.walk(outer))


def _is_plain(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _is_plain_handout(stmt: ast.stmt, name: str, module: ModuleAnalysis) -> bool:
    """``yield name``/``return name`` as a whole statement, or the same of
    ``weakref.proxy(name)`` (the engine already wrapped: it is not wrapped twice)."""
    if isinstance(stmt, ast.Return):
        value = stmt.value
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Yield):
        value = stmt.value.value
    else:
        return False
    if isinstance(value, ast.Call) and module.qualified(value.func) == "weakref.proxy" \
            and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    return isinstance(value, ast.Name) and value.id == name


#: Callables of ``weakref`` that cannot take a ``weakref.proxy`` as their referent.
WEAK_CALLABLES = frozenset({"weakref.proxy", "weakref.ref", "weakref.finalize",
                            "weakref.WeakMethod"})


def weak_calls(module: ModuleAnalysis, segment: list[ast.stmt],
                names: set[str]) -> set[tuple[int, str]]:
    """``(line, callee spelling)`` of the weak-reference calls (``weakref.proxy``,
    ``weakref.ref``, ``weakref.finalize``, ``weakref.WeakMethod``) in ``segment`` whose
    first argument is one of ``names``."""
    out: set[tuple[int, str]] = set()
    for stmt in segment:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and module.qualified(node.func) in WEAK_CALLABLES \
                    and node.args and _is_plain(node.args[0], names):
                spelling = dotted_name(node.func)
                if spelling is not None:
                    out.add((node.lineno, spelling))
    return out


def planner_for(module: ModuleAnalysis) -> Planner:
    """The module's :class:`Planner` (one per analysis)."""
    planner = getattr(module, "_planner", None)
    if planner is None:
        planner = Planner(module)
        module._planner = planner  # type: ignore[attr-defined]
    return planner


# ------------------------------------------------------------------------- value flow

#: Calls whose result holds nothing of their arguments (a number, a string, a bool, None).
PURE_CALLS = frozenset({
    "len", "str", "repr", "bool", "int", "float", "isinstance", "issubclass", "id", "hash",
    "print", "type", "callable", "format", "ascii", "hasattr", "sum", "any", "all",
})
#: Built-ins that consume an iterable at once: the result holds its elements, not it.
EAGER_CALLS = frozenset({
    "list", "tuple", "set", "frozenset", "sorted", "dict", "next", "min", "max", "copy",
    "deepcopy",
})
#: Built-ins that keep their arguments only in the (followed) value they return.
FOLLOWED_CALLS = PURE_CALLS | EAGER_CALLS | frozenset({
    "iter", "enumerate", "zip", "map", "filter", "reversed", "partial", "getattr",
})
#: Methods that put their arguments into the object they are called on.
STORE_METHODS = frozenset({
    "append", "add", "extend", "insert", "setdefault", "update", "appendleft",
    "extendleft", "put", "put_nowait", "__setitem__",
})
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp)


@dataclass
class ValueFlow:
    """Which names of a function can reach one engine, and whether the analysis lost it.

    Built by :func:`value_flow`. ``tainted`` holds every name whose value may hold a
    reference to the engine, transitively: aliases, containers (``box = {"e": llm}``,
    ``pair = (llm, 1)``, ``engines.append(llm)`` on a local list), lazy generators
    (``gen = (o for o in llm.generate(p))``), ``functools.partial``, bound methods
    (``gen = llm.generate``), attribute chains (``core = llm.llm_engine``), closures and
    lambdas, loop and ``with`` targets over such values, and the results of calls that
    receive one (``w = Wrapper(llm)``). ``problem`` is ``None`` when every such value is
    followed, ``"none:<reason>"`` when one escapes the function for sure (stored on an
    attribute, a parameter's container or a global), or an unsafe reason when one is
    handed to code the analysis cannot see (a derived value passed to an unknown call).
    """

    tainted: set[str]
    state: _FlowState
    problem: str | None = None
    #: Per derived name rebound at the region's top level to a value that holds nothing
    #: of the engine (``llm2 = runner.llm`` ... ``llm2 = LLM(...)``): for each top-level
    #: statement of the region, whether its reads of the name see a value from the engine.
    live_flags: dict[str, list[bool]] = field(default_factory=dict)
    #: For those names: whether the value after the region still comes from the engine.
    live_end: dict[str, bool] = field(default_factory=dict)

    def live(self, name: str, index: int | None) -> bool:
        """Whether a read of ``name`` in the region's top-level statement ``index`` (or,
        for ``None``, anywhere after the region) may see a value from the engine."""
        if name not in self.tainted:
            return False
        flags = self.live_flags.get(name)
        if flags is None:
            return True
        return self.live_end[name] if index is None else flags[index]

    def touches(self, stmt: ast.stmt, index: int) -> bool:
        """Whether the region's top-level statement ``index`` (``stmt``) reads or deletes a
        name while it holds a value from the engine."""
        return any(isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Load, ast.Del))
                   and self.live(n.id, index) for n in ast.walk(stmt))

    def unfollowed_call(self, statements: list[ast.stmt]) -> str | None:
        """The unsafe reason when one of ``statements`` hands a value derived from the
        engine (not the engine itself) to a call the analysis cannot see into."""
        return self.state.check_calls([n for s in statements for n in ast.walk(s)])


class _FlowState:
    """Fixpoint computation behind :func:`value_flow`."""

    def __init__(self, aliases: set[str], seed: ast.AST | None, local_names: set[str],
                 declared: set[str]) -> None:
        self.aliases = set(aliases)
        self.tainted = set(aliases)
        #: Names bound to an attribute chain of the engine (``gen = llm.generate``,
        #: ``core = llm.llm_engine``): the engine itself, for what calling them returns.
        self.direct_names: set[str] = set()
        #: Nested plain functions whose return values hold nothing of the engine.
        self.data_functions: set[str] = set()
        #: Local containers the engine was put into (``box.append(llm)``, ``box[k] = llm``).
        self.mutated: set[str] = set()
        #: The module's own functions, followed into (:func:`summarize_helper`).
        self.helpers: Helpers = Helpers()
        self.seed = seed
        self.local_names = local_names
        self.declared = declared
        self.problem: str | None = None
        self.changed = False

    # ------------------------------------------------------------ what carries the engine
    def direct(self, node: ast.AST) -> bool:
        """``llm``, ``llm.llm_engine`` or the construction itself: the engine, not a value
        derived from it."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return node is self.seed or (isinstance(node, ast.Name) and (
            node.id in self.aliases or node.id in self.direct_names))

    def carries(self, node: ast.AST | None, scope: frozenset[str] = frozenset()) -> bool:
        """Whether the value of ``node`` may hold a reference to the engine."""
        if node is None:
            return False
        if node is self.seed:
            return True
        if isinstance(node, ast.Name):
            return node.id in self.tainted or node.id in scope
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred, ast.Await)):
            return self.carries(node.value, scope)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self.carries(e, scope) for e in node.elts)
        if isinstance(node, ast.Dict):
            return any(self.carries(e, scope) for e in (*node.keys, *node.values))
        if isinstance(node, (ast.Lambda, ast.GeneratorExp)):
            # Runs later: whatever it mentions, it may use when called or consumed.
            return self.mentions(node, scope)
        if isinstance(node, _COMPREHENSIONS):
            inner = self.comprehension_scope(node, scope)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            return any(self.carries(p, inner) for p in parts)
        if isinstance(node, ast.IfExp):
            return self.carries(node.body, scope) or self.carries(node.orelse, scope)
        if isinstance(node, ast.BoolOp):
            return any(self.carries(v, scope) for v in node.values)
        if isinstance(node, ast.BinOp):
            return self.carries(node.left, scope) or self.carries(node.right, scope)
        if isinstance(node, ast.NamedExpr):
            return self.carries(node.value, scope)
        if isinstance(node, ast.Call):
            return self.call_carries(node, scope)
        return False

    def call_carries(self, node: ast.Call, scope: frozenset[str]) -> bool:
        func = node.func
        args = [*node.args, *(k.value for k in node.keywords)]
        name = last_name(func)
        if self.carries(func, scope):
            # A method of the engine returns data (``llm.generate(...)``), so does a bound
            # method bound to a name and a nested function whose returns hold nothing of
            # it. Anything else called may return what it holds.
            return not (self.direct(func) or (isinstance(func, ast.Name)
                                              and func.id in self.data_functions))
        if name in PURE_CALLS:
            return False
        if name in EAGER_CALLS:
            return any(self.elements_carry(a, scope) for a in args)
        summary = self.helper_summary(func)
        if summary is not None and not summary.returns:
            return False  # a helper of this module whose results hold nothing it was given
        return any(self.carries(a, scope) for a in args)

    def helper_summary(self, func: ast.AST) -> HelperSummary | None:
        """The summary of a module-level function of this module called by plain name
        (not rebound in the calling function), or ``None``."""
        if not isinstance(func, ast.Name) or func.id in self.local_names \
                or func.id in self.tainted:
            return None
        return summarize_helper(func.id, self.helpers) if func.id in self.helpers else None

    def elements_carry(self, node: ast.AST, scope: frozenset[str]) -> bool:
        """Whether the elements of an iterable ``node`` may hold the engine."""
        if isinstance(node, ast.GeneratorExp):
            return self.carries(node.elt, self.comprehension_scope(node, scope))
        if isinstance(node, ast.Starred):
            return self.elements_carry(node.value, scope)
        return self.carries(node, scope)

    def comprehension_scope(self, node: ast.AST, scope: frozenset[str]) -> frozenset[str]:
        inner = set(scope)
        for gen in node.generators:  # type: ignore[attr-defined]
            if self.elements_carry(gen.iter, frozenset(inner)):
                inner.update(n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name))
        return frozenset(inner)

    def mentions(self, node: ast.AST, scope: frozenset[str] = frozenset()) -> bool:
        return node is self.seed or any(
            (isinstance(n, ast.Name) and (n.id in self.tainted or n.id in scope))
            or n is self.seed for n in ast.walk(node))

    # ------------------------------------------------------------------ bindings
    def taint(self, name: str) -> None:
        if name not in self.tainted:
            self.tainted.add(name)
            self.changed = True
        if name in self.declared:
            self.lose(f"none:`{name}` holds the engine and is global or nonlocal")

    def lose(self, problem: str) -> None:
        """Record why the value cannot be followed (a ``none:`` reason wins)."""
        if self.problem is None or (problem.startswith("none:")
                                    and not self.problem.startswith("none:")):
            self.problem = problem

    def bind(self, target: ast.AST) -> None:
        """``target`` receives a value that holds the engine."""
        if isinstance(target, ast.Name):
            self.taint(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind(elt)
        elif isinstance(target, ast.Starred):
            self.bind(target.value)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            self.store_into(target.value)

    def store_into(self, holder: ast.AST) -> None:
        """The engine is put into ``holder`` (``box[k] = ...``, ``box.append(...)``): a
        local container is followed, anything else outlives the block."""
        root = holder
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.local_names:
            self.taint(root.id)
            self.mutated.add(root.id)
        else:
            what = dotted_name(holder) or "an object"
            self.lose(f"none:the engine is stored in `{what}`, which outlives the block")

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            if self.carries(node.value):
                for target in node.targets:
                    self.bind(target)
                if _attribute_base(node.value) is not None and self.direct(node.value):
                    for target in node.targets:
                        if isinstance(target, ast.Name) and target.id not in self.direct_names:
                            self.direct_names.add(target.id)
                            self.changed = True
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            if node.value is not None and self.carries(node.value):
                self.bind(node.target)
        elif isinstance(node, ast.NamedExpr):
            if self.carries(node.value):
                self.bind(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            if self.elements_carry(node.iter, frozenset()):
                self.bind(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                # ``__enter__`` may return anything: what it is entered on counts.
                if item.optional_vars is not None and self.mentions(item.context_expr):
                    self.bind(item.optional_vars)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if any(self.mentions(part) for part in _definition_parts(node)):
                self.taint(node.name)
            if node.name in self.data_functions and any(
                    isinstance(n, ast.Return) and self.carries(n.value)
                    for n in _own_nodes(node)):
                self.data_functions.discard(node.name)
                self.changed = True
        elif isinstance(node, ast.Call):
            func = node.func
            args = [*node.args, *(k.value for k in node.keywords)]
            eager = isinstance(func, ast.Attribute) and func.attr in (
                "extend", "update", "extendleft")
            if isinstance(func, ast.Attribute) and func.attr in STORE_METHODS and any(
                    self.elements_carry(a, frozenset()) if eager else self.carries(a)
                    for a in args):
                self.store_into(func.value)
            elif last_name(func) == "setattr" and any(self.carries(a) for a in args[2:]):
                self.lose("none:the engine is stored with `setattr` and outlives the block")

    def check_calls(self, nodes: list[ast.AST]) -> str | None:  # noqa: C901
        """A value derived from the engine handed to a call the analysis cannot see into
        may be kept by it past the block: the fix becomes unsafe."""
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = last_name(func)
            if self.carries(func) or name in FOLLOWED_CALLS or name in STORE_METHODS \
                    or name in THREAD_CALLS or name in IDENTITY_CALLS or name in CLASS_CALLS:
                continue
            summary = self.helper_summary(func)
            if summary is not None:
                # A helper of this module: followed into, whatever it is given.
                if summary.keeps and any(self.carries(a) for a in (
                        *node.args, *(k.value for k in node.keywords))):
                    return (f"`{name}()` keeps what it is given past the call (in a global, "
                            "an attribute or a container), the engine included")
                continue
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if self.carries(arg) and not self.direct(arg):
                    shown = dotted_name(arg) or "a value derived from the engine"
                    callee = dotted_name(func) or "a call"
                    return (f"`{callee}()` receives `{shown}`, which holds the engine, and "
                            "may keep it after the block")
        return None


#: Calls that build a new, empty-or-filled container owned by the caller.
CONTAINER_CALLS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque",
                             "Counter", "ChainMap"})


def _fresh_containers(func: ast.AST) -> set[str]:
    """Local names that only ever hold a container the function built itself (a display,
    a comprehension, ``dict()``/``list()``/``defaultdict(...)``): putting the engine into
    one of them can be followed; into anything else (a parameter's object, ``self``, a
    module global, a local bound to such an object) it cannot."""
    built: set[str] = set()
    other: set[str] = set()
    direct: set[int] = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            fresh = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.Tuple,
                                       *_COMPREHENSIONS)) or (
                isinstance(value, ast.Call) and last_name(value.func) in CONTAINER_CALLS)
            for target in targets:
                if isinstance(target, ast.Name):
                    direct.add(id(target))
                    if value is not None:
                        (built if fresh else other).add(target.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            direct.add(id(node.target))
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and \
                id(node) not in direct:
            other.add(node.id)
    return built - other


@dataclass
class HelperSummary:
    """What a module-level function does with its arguments, for callers' value flow.

    Attributes:
        returns: a return value (or, for a generator, the generator) may hold an argument.
        keeps: an argument may outlive the call (stored in a global, an attribute or a
            parameter's container, or handed to a call the analysis does not follow).
    """

    returns: bool
    keeps: bool


_CONSERVATIVE = HelperSummary(returns=True, keeps=True)


class Helpers(dict[str, "ast.FunctionDef | ast.AsyncFunctionDef"]):
    """A module's own functions by name, with their :class:`HelperSummary` once computed
    (the cache lives as long as the module's planner)."""

    def __init__(self) -> None:
        super().__init__()
        self.summaries: dict[str, HelperSummary] = {}


def summarize_helper(name: str, helpers: Helpers) -> HelperSummary:
    """Follow the parameters of helper ``name`` through its body with :func:`value_flow`
    (cached; a recursive call is taken as keeping and returning everything)."""
    if name in helpers.summaries:
        return helpers.summaries[name]
    node = helpers[name]
    helpers.summaries[name] = _CONSERVATIVE  # recursion guard
    params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                              *(x for x in (node.args.vararg, node.args.kwarg) if x))}
    own = _own_nodes(node)
    lazy = isinstance(node, ast.AsyncFunctionDef) or any(
        isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own)
    flow = value_flow(node, node.body, params, None, helpers=helpers)
    returns = lazy or any(isinstance(n, ast.Return) and flow.state.carries(n.value)
                          for n in own)
    keeps = flow.problem is not None or flow.unfollowed_call(node.body) is not None or any(
        isinstance(n, ast.Call) and last_name(n.func) in THREAD_CALLS | FINALIZER_CALLS
        and any(flow.state.carries(a) for a in (*n.args, *(k.value for k in n.keywords)))
        for n in own)
    summary = HelperSummary(returns=returns, keeps=keeps)
    helpers.summaries[name] = summary
    return summary


def module_helpers(tree: ast.Module) -> Helpers:
    """Module-level functions by name (the last definition of a name wins; a name also
    bound otherwise at module level is left out)."""
    out = Helpers()
    other: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and not \
                stmt.decorator_list:
            out[stmt.name] = stmt
        else:
            other.update(n.id for n in walk_nodes([stmt]) if isinstance(n, ast.Name)
                         and isinstance(n.ctx, ast.Store))
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                other.add(stmt.name)
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                other.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    for name in other:
        out.pop(name, None)
    return out


def _definition_parts(node: ast.AST) -> list[ast.AST]:
    """The parts of a nested ``def``/``class`` that capture outer names (body, defaults,
    decorators)."""
    parts: list[ast.AST] = [*node.body, *node.decorator_list]  # type: ignore[attr-defined]
    args = getattr(node, "args", None)
    if args is not None:
        parts += [d for d in (*args.defaults, *args.kw_defaults) if d is not None]
    return parts


def value_flow(func: ast.AST, region: list[ast.stmt], aliases: set[str],
               seed: ast.AST | None, loop_body: bool = False,
               helpers: Helpers | None = None) -> ValueFlow:
    """Follow the engine through ``region`` (the statements from its construction on).

    Args:
        func: the owning ``def`` (its parameters, ``global``/``nonlocal`` declarations and
            assignments decide which names are local containers that can be followed).
        region: statements of the engine's block from the construction up to the next
            rebinding of its name; nested statements and nested functions are walked.
        aliases: names bound to the engine itself.
        seed: the engine construction when it is not bound to a name (``box = {"e":
            LLM(...)}``), so that values built around it are followed too.
        loop_body: the region is a loop's body: a rebinding does not end a name's life
            there (the next iteration reads the earlier statements again).
        helpers: the module's own functions (:func:`module_helpers`): a call of one is
            followed into its body (:func:`summarize_helper`) instead of being assumed to
            keep and return what it is given.

    Returns:
        The :class:`ValueFlow`; flow-insensitive within the region (a name that may hold
        the engine anywhere there counts everywhere), which can only widen the block.
    """
    nodes = [n for stmt in region for n in ast.walk(stmt)]
    params = {a.arg for a in ast.walk(getattr(func, "args", ast.arguments(
        posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])))
        if isinstance(a, ast.arg)}
    declared = {name for n in ast.walk(func) if isinstance(n, (ast.Global, ast.Nonlocal))
                for name in n.names}
    state = _FlowState(aliases, seed, _fresh_containers(func) - params - declared, declared)
    state.helpers = helpers if helpers is not None else Helpers()
    state.data_functions = {
        n.name for n in nodes if isinstance(n, ast.FunctionDef)
        and not any(isinstance(m, (ast.Yield, ast.YieldFrom)) for m in _own_nodes(n))}
    for name in aliases & declared:
        state.lose(f"none:`{name}` holds the engine and is global or nonlocal")
    for _ in range(50):
        state.changed = False
        for node in nodes:
            state.visit(node)
        if not state.changed:
            break
    flow = ValueFlow(state.tainted, state, state.problem)
    if not loop_body:
        _liveness(flow, region)
    return flow


def _liveness(flow: ValueFlow, region: list[ast.stmt]) -> None:
    """Fill ``flow.live_flags``/``live_end`` for derived names that a top-level
    assignment of the region rebinds to a value holding nothing of the engine."""
    state = flow.state

    def kills(stmt: ast.stmt, name: str) -> bool:
        return isinstance(stmt, ast.Assign) and all(
            isinstance(t, ast.Name) for t in stmt.targets) and any(
            t.id == name for t in stmt.targets) and not state.carries(stmt.value)  # type: ignore[attr-defined]

    for name in flow.tainted - state.aliases - state.mutated:
        if not any(kills(stmt, name) for stmt in region[1:]):
            continue
        current = False
        flags: list[bool] = []
        for stmt in region:
            if kills(stmt, name):
                flags.append(current)  # its own value still reads the old one
                current = False
            elif any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                     for n in ast.walk(stmt)):
                flags.append(True)
                current = True
            else:
                flags.append(current)
        flow.live_flags[name] = flags
        flow.live_end[name] = current


def _own_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[ast.AST]:
    """The nodes of a nested function's (or class's) body, functions and classes nested in
    it excluded."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return out

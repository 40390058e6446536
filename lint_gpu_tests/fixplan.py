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
from dataclasses import dataclass, field

from lint_gpu_tests.analysis import (
    EngineSite,
    FunctionInfo,
    ModuleAnalysis,
    RunnerCall,
    last_name,
    names_in,
)
from lint_gpu_tests.ftypes import Applicability, FixInfo

WRAP_TITLE = "Wrap in `with {runner}(...)`"
THREAD_CALLS = frozenset(
    {"Thread", "Process", "submit", "map", "apply_async", "run_in_executor", "start_new_thread"}
)
IDENTITY_CALLS = frozenset({"isinstance", "id", "type", "issubclass"})
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
        self._runner_plans: dict[int, WrapPlan | FixInfo] = {}

    # ---------------------------------------------------------------- cleanup
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
        if use_class or (func is not None and func.kind in ("helper", "method")):
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
        block = _stmt_block(module, stmt)
        if block is None:
            return _none("built inside an expression the fix cannot restructure", title)
        if self.shares_line(stmt) or self.on_header_line(stmt):
            return _none("the statement shares its line with another statement", title)
        # The call must be a direct part of a simple statement, not inside a lambda or
        # comprehension, and alone of its kind in the statement.
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)):
            return _none("built inside a compound statement header", title)
        if self._inside_deferred(call, stmt):
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
                self.finally_only_cleans(parent, all_engines) and self._unwrappable(parent):
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

        # A reference taken from the engine (``gen = llm.generate``, ``core = llm.llm_engine``,
        # ``llm = vllm_runner("m").llm``) uses it wherever that reference is used.
        derived: set[str] = set()
        if bound is None and isinstance(stmt, ast.Assign) and _attribute_base(stmt.value) is call:
            derived.update(n.id for n in _stores_top(stmt))
        # A nested function that captures the engine uses it wherever it is called, and so
        # does whatever holds such a closure or the engine (``t = Thread(target=lambda:
        # llm.generate(...))`` uses the engine at ``t.start()`` and ``t.join()``).
        use_names = set(names) | derived
        for later in block[index + 1:]:
            if isinstance(later, ast.Assign) and _attribute_chain_root(later.value) in use_names:
                use_names.update(n.id for n in _stores_top(later))
                continue
            if isinstance(later, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    names_in(later) & use_names:
                use_names.add(later.name)
            elif isinstance(later, (ast.Assign, ast.AnnAssign)) and later.value is not None \
                    and _holds_reference(later.value, use_names):
                use_names.update(n.id for n in _stores_top(later))
        # Segment: from the construction to the last statement using the engine, stopping
        # before the next top-level rebinding of its name. Generic cleanup (gc.collect(),
        # empty_cache(), ...) belongs to this engine up to the next construction.
        stop = len(block)
        next_site = len(block)
        for j in range(index + 1, len(block)):
            later = block[j]
            if bound and any(s.id == bound for s in _stores_top(later)):
                stop = j
                break
        for j in range(index + 1, stop):
            if module.is_engine_call_stmt(block[j]):
                next_site = j
                break
        remove: set[int] = set(remove_finally)
        unwrap: set[int] = {unwrap_parent} if unwrap_parent is not None else set()
        end = index
        for j in range(index + 1, stop):
            later = block[j]
            if not self.shares_line(later) and self.is_cleanup_statement(
                    later, all_engines if names else set()):
                mine = bool(names_in(later) & names)
                generic = not (names_in(later) & all_engines)
                if mine or (generic and j < next_site):
                    remove.add(later.lineno)
                continue
            if isinstance(later, ast.Try) and names and self.finally_only_cleans(
                    later, all_engines) and self._unwrappable(later):
                if any(_loads(s, n) for s in later.body for n in names) or any(
                        names_in(s) & names for s in later.finalbody):
                    unwrap.add(later.lineno)
                    remove.update(s.lineno for s in later.finalbody)
                    end = j
                    continue
            if any(_loads(later, n) for n in use_names) or (
                    isinstance(later, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and later.name in use_names):
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
                for k in range(len(block) - 1, end, -1):
                    if inner_names and any(_loads(block[k], n) for n in inner_names):
                        end, grown = k, True
                        break
        segment = block[index: end + 1]
        # Every use of the engine must lie in the segment.
        func_node = func.node
        inside = {id(n) for s in segment for n in ast.walk(s)}
        inside |= {id(n) for s in block[stop:] for n in ast.walk(s)}
        if not isinstance(module.parent(stmt), (ast.For, ast.AsyncFor, ast.While)):
            # Earlier statements of the block see an earlier binding of the name.
            inside |= {id(n) for s in block[:index] for n in ast.walk(s)}
        inside |= {id(n) for s in block if s.lineno in remove for n in ast.walk(s)}
        top_rebindings = {id(n) for s in block for n in _stores_top(s)}
        for node in ast.walk(func_node):
            if not (isinstance(node, ast.Name) and node.id in names) or id(node) in inside:
                continue
            if isinstance(node.ctx, (ast.Load, ast.Del)):
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
            escape = self.escape(s, names, is_fixture)
            if escape is not None:
                if escape.startswith("none:"):
                    return _none(escape[5:], title)
                unsafe(escape)
        if is_fixture and func.fixture_scope not in (None, "function"):
            unsafe(f"a {func.fixture_scope}-scoped fixture: the engine's lifetime follows the "
                   "fixture's scope and the runner must allow it")
        use_class = func.kind in ("helper", "method") or func.in_base_class or (
            is_fixture and func.fixture_scope not in (None, "function")
            and config.target == "bundled"
        ) or kind == "runner" and last_name(call.func) in config.runner_classes
        if kind == "engine":
            arg_problem = self._argument_problem(call)
            if arg_problem is not None:
                if arg_problem.startswith("none:"):
                    return _none(arg_problem[5:], title)
                unsafe(arg_problem)
            if use_class and config.target == "vllm":
                return _none("a helper cannot request the `vllm_runner` fixture and vLLM's "
                             "`VllmRunner` lives in its tests/conftest.py", title)
        yield_proxy = False
        if is_fixture and bound:
            uses = [s for s in segment[1:] if s.lineno not in remove
                    and any(_loads(s, n) for n in names)]
            if len(uses) == 1 and _is_plain_handout(uses[0], bound):
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
            applicability=applicability,
            reason="; ".join(reasons),
            title=self._title(kind, func, use_class),
            call_line=call.lineno,
        )

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

    def escape(self, stmt: ast.stmt, names: set[str], is_fixture: bool) -> str | None:
        """Why using the engine in ``stmt`` makes the fix unsafe (``"none:..."`` when it
        rules the fix out), or ``None``."""
        if not names:
            return None
        for node in ast.walk(stmt):
            if isinstance(node, ast.Return) and node.value is not None and not is_fixture:
                if names_in(node.value) & names:
                    return "none:the engine is returned to the caller, so it must outlive " \
                           "this function"
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                value = node.value
                if value is None or not (names_in(value) & names):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, (ast.Attribute, ast.Subscript)) and _is_plain(
                            value, names):
                        return "none:the engine is stored in an attribute or container and " \
                               "outlives the block"
            if isinstance(node, ast.Call):
                callee = last_name(node.func)
                args = [*node.args, *(k.value for k in node.keywords)]
                if callee in ("append", "add", "setdefault", "extend", "insert") and any(
                        _is_plain(a, names) for a in args):
                    return "none:the engine is stored in a container and outlives the block"
                if callee in THREAD_CALLS and any(names_in(a) & names for a in args):
                    return "the engine is passed to a thread or process, which may use it " \
                           "after the block"
                if callee in IDENTITY_CALLS and any(_is_plain(a, names) for a in node.args):
                    return f"`{callee}()` on the engine sees a `weakref.proxy`, not the engine"
            if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops
            ) and any(_is_plain(x, names) for x in (node.left, *node.comparators)):
                return "identity checks (`is`) on the engine see a `weakref.proxy`"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if names_in(node) & names:
                    return "the engine is captured by a nested function that may run after " \
                           "the block"
        return None

    def _argument_problem(self, call: ast.Call) -> str | None:
        """Whether the call's arguments can be mapped onto the runner's (SPEC §4)."""
        config = self.module.config
        has_star = any(k.arg is None for k in call.keywords) or any(
            isinstance(a, ast.Starred) for a in call.args)
        has_model = bool(call.args) and not isinstance(call.args[0], ast.Starred) or any(
            k.arg == "model" for k in call.keywords)
        if config.target == "vllm":
            if len(call.args) > 1:
                return "none:positional engine arguments after the model do not map onto " \
                       "vLLM's `VllmRunner`"
            if not has_model:
                return "none:the model name is hidden in `**kwargs`"
            if has_star:
                return "`**kwargs` may already set a default the fix adds"
        elif len(call.args) > 1:
            return "none:positional engine arguments after the model do not map onto the " \
                   "runner's keyword arguments"
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


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in ast.walk(outer))


def _is_plain(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _is_plain_handout(stmt: ast.stmt, name: str) -> bool:
    """``yield name`` or ``return name`` as a whole statement."""
    if isinstance(stmt, ast.Return):
        return isinstance(stmt.value, ast.Name) and stmt.value.id == name
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Yield)
        and isinstance(stmt.value.value, ast.Name)
        and stmt.value.value.id == name
    )


def planner_for(module: ModuleAnalysis) -> Planner:
    """The module's :class:`Planner` (one per analysis)."""
    planner = getattr(module, "_planner", None)
    if planner is None:
        planner = Planner(module)
        module._planner = planner  # type: ignore[attr-defined]
    return planner

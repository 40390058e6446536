"""Value flow: which names of a function can reach one engine, and until when.

:func:`value_flow` follows the engine from its construction through aliases, containers,
generators, partials, bound methods, attribute chains, closures and the results of calls
that receive it (:class:`ValueFlow`, computed to a fixpoint by :class:`_FlowState`), and
:func:`_liveness` says where a derived name rebound to something else stops holding it.
Calls of the module's own functions are followed into their bodies
(:func:`module_helpers`, :func:`summarize_helper`). The call vocabularies the flow judges
by (:data:`PURE_CALLS`, :data:`STORE_METHODS`, :data:`THREAD_CALLS` ...) live here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from lint_gpu_tests.fixplan.groups import CLASS_CALLS, IDENTITY_CALLS
from lint_gpu_tests.ftypes import Blocked, FixProblem, Risky
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import dotted_name, last_name, names_in, parameter_names

#: Calls that hand their arguments to another thread or process (which may use them later).
THREAD_CALLS = frozenset(
    {"Thread", "Process", "submit", "map", "apply_async", "run_in_executor", "start_new_thread"}
)
#: Calls that register a callable to run later (a finalizer).
FINALIZER_CALLS = frozenset({"addfinalizer", "register", "callback"})


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
    for node in walk_breadth(value):
        if isinstance(node, ast.Lambda) and names_in(node) & names:
            return True
        if isinstance(node, ast.Call) and any(
            isinstance(arg, ast.Name) and arg.id in names
            for arg in (*node.args, *(k.value for k in node.keywords))
        ) and last_name(node.func) in THREAD_CALLS | {"partial"}:
            return True
    return False


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
    followed, :class:`~lint_gpu_tests.ftypes.Blocked` when one escapes the function for sure
    (stored on an attribute, a parameter's container or a global), or
    :class:`~lint_gpu_tests.ftypes.Risky` when one is handed to code the analysis cannot see
    (a derived value passed to an unknown call).
    """

    tainted: set[str]
    state: _FlowState
    problem: FixProblem | None = None
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
                   and self.live(n.id, index) for n in walk_breadth(stmt))

    def unfollowed_call(self, statements: list[ast.stmt]) -> Risky | None:
        """The unsafe reason when one of ``statements`` hands a value derived from the
        engine (not the engine itself) to a call the analysis cannot see into."""
        reason = self.state.check_calls([n for s in statements for n in walk_breadth(s)])
        return None if reason is None else Risky(reason)


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
        self.problem: FixProblem | None = None
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
                inner.update(n.id for n in walk_breadth(gen.target) if isinstance(n, ast.Name))
        return frozenset(inner)

    def mentions(self, node: ast.AST, scope: frozenset[str] = frozenset()) -> bool:
        return node is self.seed or any(
            (isinstance(n, ast.Name) and (n.id in self.tainted or n.id in scope))
            or n is self.seed for n in walk_breadth(node))

    # ------------------------------------------------------------------ bindings
    def taint(self, name: str) -> None:
        if name not in self.tainted:
            self.tainted.add(name)
            self.changed = True
        if name in self.declared:
            self.lose(Blocked(f"`{name}` holds the engine and is global or nonlocal"))

    def lose(self, problem: FixProblem) -> None:
        """Record why the value cannot be followed (a :class:`Blocked` reason wins)."""
        if self.problem is None or (isinstance(problem, Blocked)
                                    and not isinstance(self.problem, Blocked)):
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
            self.lose(Blocked(f"the engine is stored in `{what}`, which outlives the block"))

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
                self.lose(Blocked("the engine is stored with `setattr` and outlives the "
                                  "block"))

    def check_calls(self, nodes: list[ast.AST]) -> str | None:
        """A value derived from the engine handed to a call the analysis cannot see into
        may be kept by it past the block: the fix becomes unsafe (the reason, else
        ``None``)."""
        found = self.handoff(nodes)
        if isinstance(found, tuple):
            callee, shown = found
            return (f"`{callee}()` receives {shown}, which may hold the engine, and may keep "
                    "it after the block")
        return found

    def handoff(self, nodes: list[ast.AST]) -> tuple[str, str] | str | None:
        """The first call among ``nodes`` that may keep a value derived from the seeds past
        itself: ``(callee, the value as shown)`` for a call the analysis does not follow;
        the reason, naming the helper, for a helper of the module that keeps what it is
        given (:class:`HelperSummary`); else ``None``."""
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
                clause = summary.keeps_argument(node, self.carries)
                if clause:
                    return f"`{name}()` {clause}"
                continue
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if self.carries(arg) and not self.direct(arg):
                    spelled = dotted_name(arg) or ast.unparse(arg)
                    shown = f"`{spelled}`" if len(spelled) <= 40 else \
                        "a value derived from the engine"
                    return dotted_name(func) or "a call", shown
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
    nodes = walk_breadth(func)  # sets only: the order of the walk does not matter
    for node in nodes:
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
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and \
                id(node) not in direct:
            other.add(node.id)
    return built - other


@dataclass
class HelperSummary:
    """What a module-level function does with its arguments, for callers' value flow.

    Attributes:
        returns: a return value (or, for a generator, the generator) may hold an argument.
        keeps: how an argument may outlive the call, as a reason's clause (``"stores it
            ..."``: in a global, an attribute or a parameter's container; ``"hands ... to
            `f()`"``: a call the analysis does not follow, a thread or a finalizer); ``""``
            when none may.
        kept: the same clause for each parameter that may outlive the call, followed on its
            own (a caller's engine handed to another parameter is not kept); ``None`` when
            not known per parameter (every argument then counts, with :attr:`keeps`).
    """

    returns: bool
    keeps: str
    kept: dict[str, str] | None = None
    #: The parameters a call fills by position, in order, and those it may name.
    positional: tuple[str, ...] = ()
    named: frozenset[str] = frozenset()

    def keeps_argument(self, call: ast.Call, carries: Callable[[ast.AST], bool]
                       ) -> str:
        """How the call ``call`` of the helper may keep an argument that ``carries`` says
        holds the engine (the clause, as :attr:`keeps`), else ``""``."""
        if not self.keeps:
            return ""
        for index, arg in enumerate(call.args):
            if carries(arg):
                if self.kept is None or isinstance(arg, ast.Starred) or \
                        index >= len(self.positional):
                    return self.keeps
                found = self.kept.get(self.positional[index], "")
                if found:
                    return found
        for keyword in call.keywords:
            if carries(keyword.value):
                if self.kept is None or keyword.arg is None or keyword.arg not in self.kept \
                        and keyword.arg not in self.named:
                    return self.keeps
                found = self.kept.get(keyword.arg, "")
                if found:
                    return found
        return ""


_CONSERVATIVE = HelperSummary(returns=True, keeps="calls itself, so what it does with its "
                                                  "arguments is not followed")


class Helpers(dict[str, "ast.FunctionDef | ast.AsyncFunctionDef"]):
    """A module's own functions by name, with their :class:`HelperSummary` once computed
    (the cache lives as long as the module's planner)."""

    def __init__(self) -> None:
        super().__init__()
        self.summaries: dict[str, HelperSummary] = {}
        self.locals: dict[int, tuple[set[str], set[str]]] = {}

    def local_facts(self, func: ast.AST) -> tuple[set[str], set[str]]:
        """``(fresh containers, declared names)`` of ``func`` (:func:`_fresh_containers`
        less its parameters and ``global``/``nonlocal`` names; those names), once per
        function: the value flows of a module's sites keep asking them of the same ones."""
        known = self.locals.get(id(func))
        if known is None:
            params = {a.arg for a in walk_breadth(getattr(func, "args", ast.arguments(
                posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])))
                if isinstance(a, ast.arg)}
            declared = {name for n in walk_breadth(func)
                        if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
            known = self.locals[id(func)] = (_fresh_containers(func) - params - declared,
                                             declared)
        return known


def summarize_helper(name: str, helpers: Helpers) -> HelperSummary:
    """Follow the parameters of helper ``name`` through its body with :func:`value_flow`
    (cached; a recursive call is taken as keeping and returning everything)."""
    if name in helpers.summaries:
        return helpers.summaries[name]
    node = helpers[name]
    helpers.summaries[name] = _CONSERVATIVE  # recursion guard
    params = parameter_names(node.args)
    own = _own_nodes(node)
    lazy = isinstance(node, ast.AsyncFunctionDef) or any(
        isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own)
    flow = value_flow(node, node.body, params, None, helpers=helpers)
    returns = lazy or any(isinstance(n, ast.Return) and flow.state.carries(n.value)
                          for n in own)
    keeps = _keep_clause(flow, node, own)
    kept: dict[str, str] | None = None
    if keeps and len(params) > 1:
        # Which parameters may outlive the call, each followed on its own.
        kept = {}
        for param in params:
            alone = value_flow(node, node.body, {param}, None, helpers=helpers)
            clause = _keep_clause(alone, node, own)
            if clause:
                kept[param] = clause
    summary = HelperSummary(
        returns=returns, keeps=keeps, kept=kept,
        positional=tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args)),
        named=frozenset(a.arg for a in (*node.args.args, *node.args.kwonlyargs)))
    helpers.summaries[name] = summary
    return summary


def _keep_clause(flow: ValueFlow, node: ast.FunctionDef | ast.AsyncFunctionDef,
                 own: list[ast.AST]) -> str:
    """How what ``flow`` follows through the helper ``node`` (``own``: its nodes) may
    outlive the call, as :attr:`HelperSummary.keeps` says it; ``""`` when it may not."""
    keeps = ""
    unfollowed = flow.state.handoff([n for stmt in node.body for n in walk_breadth(stmt)])
    handed = next((n for n in own if isinstance(n, ast.Call)
                   and last_name(n.func) in THREAD_CALLS | FINALIZER_CALLS
                   and any(flow.state.carries(a)
                           for a in (*n.args, *(k.value for k in n.keywords)))), None)
    if flow.problem is not None:
        keeps = ("keeps what it is given past the call (in a global, an attribute or a "
                 "container), the engine included")
    elif isinstance(unfollowed, tuple):
        keeps = (f"may keep what it is given past the call: it hands {unfollowed[1]}, "
                 f"derived from its arguments, to `{unfollowed[0]}()`, which the analysis "
                 "does not follow")
    elif unfollowed is not None:
        keeps = f"may keep what it is given past the call: {unfollowed}"
    elif handed is not None:
        callee = dotted_name(handed.func) or last_name(handed.func)
        keeps = (f"hands what it is given to `{callee}()` (line {handed.lineno}), which may "
                 "run after the block")
    return keeps


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
            other.update(n.id for n in walk_breadth(stmt) if isinstance(n, ast.Name)
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
    nodes = [n for stmt in region for n in walk_breadth(stmt)]
    helpers = helpers if helpers is not None else Helpers()
    fresh, declared = helpers.local_facts(func)
    state = _FlowState(aliases, seed, set(fresh), set(declared))
    state.helpers = helpers
    state.data_functions = {
        n.name for n in nodes if isinstance(n, ast.FunctionDef)
        and not any(isinstance(m, (ast.Yield, ast.YieldFrom)) for m in _own_nodes(n))}
    for name in aliases & declared:
        state.lose(Blocked(f"`{name}` holds the engine and is global or nonlocal"))
    for _ in range(50):
        state.changed = False
        for node in nodes:
            state.visit(node)
        if not state.changed:
            break
    cycle = self_referencing(walk_breadth(func), state.tainted)
    if cycle is not None:
        state.lose(Risky(f"`{cycle}` holds the engine and refers to itself (a reference "
                         "cycle): the cycle keeps the engine alive past the block until the "
                         "garbage collector runs"))
    flow = ValueFlow(state.tainted, state, state.problem)
    if not loop_body:
        _liveness(flow, region)
    return flow


def self_referencing(nodes: list[ast.AST], tainted: set[str]) -> str | None:
    """A name of ``tainted`` whose container can reach itself through ``nodes`` (a dict
    holding itself, ``box["self"] = box``; a list appended to itself; two lists holding
    each other), or ``None``. A container ``x`` holds what is stored into it
    (``x[k] = v``, ``x.attr = v``, ``x.append(v)`` and the other store methods,
    ``x += [v]``) and, when bound to a new value (``x = [v]``), the names of that value
    other than ``x`` itself (``x = list(x)`` makes no cycle)."""
    holds: dict[str, set[str]] = {}

    def root(node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    def add(holder: str | None, value: ast.AST | None, self_too: bool) -> None:
        if holder is None or value is None:
            return
        held = _held_names(value) if self_too else _held_names(value) - {holder}
        holds.setdefault(holder, set()).update(held)

    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in (target.elts if isinstance(target, (ast.Tuple, ast.List))
                             else [target]):
                    add(root(part), node.value, not isinstance(part, ast.Name))
        elif isinstance(node, ast.AugAssign):
            add(root(node.target), node.value, True)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in STORE_METHODS:
            for arg in (*node.args, *(k.value for k in node.keywords)):
                add(root(node.func.value), arg, True)
    for start in sorted(tainted & set(holds)):
        seen: set[str] = set()
        todo = list(holds.get(start, ()))
        while todo:
            name = todo.pop()
            if name == start:
                return start
            if name not in seen:
                seen.add(name)
                todo.extend(holds.get(name, ()))
    return None


def _held_names(value: ast.AST) -> set[str]:
    """The names whose objects ``value`` may hold itself: the name, the elements of a
    display, what a call is given (its result may keep it; not a call of
    :data:`PURE_CALLS`), what a closure or generator mentions. Not what it reads an element
    or attribute of (``box["engine"]``, ``d.get(k)`` hold an element, not ``box``)."""
    if isinstance(value, ast.Name):
        return {value.id}
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_held_names(e) for e in value.elts))
    if isinstance(value, ast.Dict):
        return set().union(*(_held_names(e) for e in (*value.keys, *value.values)
                             if e is not None))
    if isinstance(value, (ast.Starred, ast.NamedExpr, ast.Await)):
        return _held_names(value.value)
    if isinstance(value, ast.IfExp):
        return _held_names(value.body) | _held_names(value.orelse)
    if isinstance(value, ast.BinOp):
        return _held_names(value.left) | _held_names(value.right)
    if isinstance(value, ast.Call):
        if last_name(value.func) in PURE_CALLS:
            return set()
        return set().union(*(_held_names(a) for a in (
            *value.args, *(k.value for k in value.keywords))))
    if isinstance(value, (ast.Lambda, ast.GeneratorExp, *_COMPREHENSIONS)):
        return names_in(value)
    return set()


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
                     for n in walk_breadth(stmt)):
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

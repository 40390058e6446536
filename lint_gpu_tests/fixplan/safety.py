"""What makes a fix unsafe or impossible: escapes, identity, hashing, arguments.

Once the block is known, each use of the engine inside it is judged
(:meth:`SafetyChecks.escape`: returned, handed to a thread, captured by a nested function,
compared by identity, hashed or weakly referenced), the call's arguments are mapped onto
the runner's (:meth:`SafetyChecks._argument_problem`,
:func:`compilation_config_equivalent`), and the weak-reference calls that must take
``runner.llm`` instead of the proxy are listed (:func:`weak_calls`). A
:class:`~lint_gpu_tests.ftypes.Blocked` reason rules the fix out; a
:class:`~lint_gpu_tests.ftypes.Risky` one makes it unsafe.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from lint_gpu_tests.analysis.analysis import (
    FUNCTION_SCOPES,
    FunctionInfo,
    FunctionKind,
    ModuleAnalysis,
)
from lint_gpu_tests.analysis.mappings import RUNNER_ONLY_PARAMETERS
from lint_gpu_tests.fixplan.flow import THREAD_CALLS
from lint_gpu_tests.fixplan.groups import identity_reason
from lint_gpu_tests.fixplan.plan import BUNDLED_RUNNER_ONLY_PARAMETERS
from lint_gpu_tests.fixplan.returned import plain_data
from lint_gpu_tests.ftypes import Blocked, FixProblem, Risky
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import caching_decorator, dotted_name, last_name, names_in

#: Calls that observe when the engine object itself is freed (``weakref`` module).
WEAKREF_CALLS = frozenset({"ref", "finalize", "getweakrefcount", "getweakrefs"})
#: Methods that hash their argument (a set's); a ``weakref.proxy`` is unhashable.
HASHING_METHODS = frozenset({"add", "discard", "fromkeys"})
#: Callables of ``weakref`` that cannot take a ``weakref.proxy`` as their referent.
WEAK_CALLABLES = frozenset({"weakref.proxy", "weakref.ref", "weakref.finalize",
                            "weakref.WeakMethod"})



def hands_out(expr: ast.expr, names: set[str]) -> bool:
    """True when evaluating ``expr`` gives one of ``names`` itself, alone or as an element
    (``llm``, ``(llm, params)``, ``{"llm": llm}``, ``a if c else llm``); not a value read
    from one (``llm.llm_engine.vllm_config...``, ``llm.generate(...)``)."""
    return hands_out_where(expr, lambda e: isinstance(e, ast.Name) and e.id in names)


def hands_out_where(expr: ast.expr, match: Callable[[ast.expr], bool]) -> bool:
    """True when evaluating ``expr`` gives the value of an expression ``match`` accepts
    itself, alone or as an element (of a tuple, list, set or dict's values, starred, an
    assignment expression, either branch of a conditional); not a value read from one."""
    if match(expr):
        return True
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return any(hands_out_where(e, match) for e in expr.elts)
    if isinstance(expr, ast.Dict):
        return any(v is not None and hands_out_where(v, match) for v in expr.values)
    if isinstance(expr, (ast.Starred, ast.NamedExpr)):
        return hands_out_where(expr.value, match)
    if isinstance(expr, ast.IfExp):
        return hands_out_where(expr.body, match) or hands_out_where(expr.orelse, match)
    return False


#: What to do with a helper that builds an engine and returns it (a factory), said where the
#: fix gives up on one.
FACTORY_ADVICE = ("; a factory helper can become a `contextlib.contextmanager` that yields "
                  "the engine of a `with` block over the runner, its callers `with` "
                  "statements")


def cached_reason(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """Why the engine ``func`` returns has no fix when a decorator caches what it returns
    (:func:`~lint_gpu_tests.parsing.syntax.caching_decorator`), else ``None``."""
    cache = caching_decorator(func)
    if cache is None:
        return None
    return (f"`{func.name}()` caches the engine it returns (`@{cache}`): the engine lives as "
            "long as that cache, shared by every caller, and no fix rewrites a cached engine")


class SafetyChecks:
    """Safety questions about one analysed module's engine uses and calls; a base of the
    planner, whose ``module`` it reads."""

    module: ModuleAnalysis

    def escape(self, stmt: ast.stmt, names: set[str], tainted: set[str],
               is_fixture: bool, own: set[str] | None = None) -> FixProblem | None:
        """Why using the engine in ``stmt`` makes the fix unsafe (:class:`Risky`) or rules
        it out (:class:`Blocked`), or ``None``. ``names`` are the engine's own names, ``tainted``
        every name that can reach it (:func:`value_flow`; stores into containers and
        attributes are judged there), ``own`` the names bound to the engine itself (its
        names and their plain aliases; ``None``: ``names``): only a return of one of these
        returns the engine, any other return of a tainted value returns a value read from
        it."""
        if not tainted:
            return None
        for node in walk_breadth(stmt):
            if isinstance(node, ast.Return) and node.value is not None and not is_fixture:
                if hands_out(node.value, own if own is not None else names):
                    func = self._function_of(node)
                    if isinstance(func, ast.FunctionDef) and isinstance(node.value, ast.Tuple) \
                            and self.module.tuple_factories.get(func.name, (0, 0))[0] == \
                            func.lineno:
                        return Blocked(f"`{func.name}()` returns the engine in a tuple with "
                                       "other values, so it must outlive this function: its "
                                       "fix makes the helper a context manager together "
                                       "with its callers")
                    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        cached = cached_reason(func)
                        if cached is not None:
                            return Blocked(cached)
                    return Blocked("the engine is returned to the caller, so it must "
                                   "outlive this function")
                if not plain_data(node.value, tainted, self.module,
                                  self._function_of(node)):
                    return Risky("a value read from the engine is returned to the caller "
                                 f"(line {node.lineno}) and may reference the engine, which "
                                 "the runner's block shuts down before the function returns")
            identity = identity_reason(node, names, "the engine")
            if isinstance(node, ast.Call):
                callee = last_name(node.func)
                args = [*node.args, *(k.value for k in node.keywords)]
                if callee in THREAD_CALLS and any(names_in(a) & tainted for a in args):
                    return Risky("the engine is passed to a thread or process, which may use "
                                 "it after the block")
                if identity is not None:
                    return Risky(identity)
                plain = any(_is_plain(a, names) for a in node.args)
                dotted = dotted_name(node.func) or ""
                if plain and callee in WEAKREF_CALLS and dotted.startswith(("weakref.", callee)):
                    return Risky(f"`weakref.{callee}()` of the engine observes when it is "
                                 "freed, which the runner moves to the end of its block")
            hashed = _hash_reason(node, names, (ast.Store, ast.Del))
            if hashed is not None:
                return Blocked(hashed)
            if isinstance(node, ast.Call):
                passed = self.passed_problem(node, names)
                if passed is not None:
                    return Risky(passed)
            if identity is not None:  # an identity comparison (`is`)
                return Risky(identity)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if names_in(node) & tainted:
                    return Risky("the engine is captured by a nested function that may run "
                                 "after the block")
        return None

    def _function_of(self, node: ast.AST) -> ast.AST | None:
        """The function or lambda whose body holds ``node``, or ``None`` at module level."""
        return self.module.enclosing(node, FUNCTION_SCOPES)

    def passed_problem(self, call: ast.Call, names: set[str]) -> str | None:
        """The unsafe reason when ``call`` hands one of ``names`` (the engine itself) to a
        function of this module that hashes it, looks at it by identity or caches on it,
        directly or through the module's functions it hands it on to; else ``None``. A
        function imported from elsewhere is not followed."""
        return _passed_problem(self.module, call, names, set())

    def consumer_problem(self, fixture: FunctionInfo) -> str | None:
        """The unsafe reason when a test or fixture of this module that requests
        ``fixture`` (which hands out the engine, a `weakref.proxy` after the fix) hashes
        it, looks at it by identity or passes it to a function that does; else ``None``.
        Consumers in other modules (of a conftest.py fixture) are not followed."""
        return _consumer_problem(self.module, fixture, set())

    def _argument_problem(self, call: ast.Call) -> FixProblem | None:
        """Whether the call's arguments can be mapped onto the runner's (README, "Fix safety")."""
        config = self.module.config
        if any(isinstance(a, ast.Starred) and not _holds_one(a.value) for a in call.args):
            return Blocked("`*` arguments may hold more than the model, and the runner "
                           "takes only the model by position")
        rejected = RUNNER_ONLY_PARAMETERS if config.target == "vllm" \
            else BUNDLED_RUNNER_ONLY_PARAMETERS
        taken = next((k.arg for k in call.keywords if k.arg in rejected), None)
        if taken is not None:
            return Blocked(f"`LLM` does not take `{taken}=` (building it raises "
                           "`TypeError`), but the runner does and would build the engine")
        has_star = any(k.arg is None for k in call.keywords) or any(
            isinstance(a, ast.Starred) for a in call.args)
        if config.target == "vllm":
            if len(call.args) > 1:
                return Blocked("positional engine arguments after the model do not map onto "
                               "vLLM's `VllmRunner`")
            if has_star:
                return Risky("`**kwargs` may already set a default the fix adds")
        elif len(call.args) > 1:
            return Blocked("positional engine arguments after the model do not map onto the "
                           "runner's keyword arguments")
        return None


def _holds_one(value: ast.expr) -> bool:
    """Whether ``*value`` is statically one positional argument (``*("m",)``)."""
    return isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == 1 and not \
        isinstance(value.elts[0], ast.Starred)


def compilation_config_equivalent(value: ast.expr, module: ModuleAnalysis
                                  ) -> tuple[str | None, FixProblem | None]:
    """What ``compilation_config=value`` must become for vLLM's ``VllmRunner`` (target
    ``vllm``), and why that is not safe when it is not.

    ``LLM`` turns an int (``bool`` and ``CompilationMode`` included) into
    ``CompilationConfig(mode=CompilationMode(value))``, ``None`` into ``CompilationConfig()``
    and a dict into ``CompilationConfig(**dict)``, and passes anything else through
    (vllm/entrypoints/llm.py, ``LLM.__init__``). vLLM's ``VllmRunner`` replaces every falsy
    value by ``{"cudagraph_capture_sizes": [4]}`` first (vLLM's tests/conftest.py), so
    each falsy value is spelled as the explicit config of the same meaning: ``0``/``False``
    /``CompilationMode.NONE`` become ``CompilationConfig(mode=...)`` (compilation off, not
    the platform's default mode), ``None``/``{}``/``dict()`` become ``CompilationConfig()``.

    Returns:
        ``(replacement source or None to keep the value, None)`` when the meaning is kept;
        ``(None, Blocked(reason))`` for a falsy value no runner argument can express (an
        empty string or list); ``(replacement, Risky(reason))`` for a value only known at run
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
        return None, Blocked(f"`compilation_config={code}` is falsy: vLLM's `VllmRunner` "
                             "would replace it by its own graph sizes, and no argument keeps "
                             "it")
    if isinstance(value, ast.Dict):
        if any(k is None for k in value.keys):
            return _runtime_compilation_config(value, code)
        return (None, None) if value.keys else ("CompilationConfig()", None)
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)) and not any(
            isinstance(e, ast.Starred) for e in value.elts):
        if value.elts:
            return None, None
        return None, Blocked(f"`compilation_config={code}` is falsy: vLLM's `VllmRunner` "
                             "would replace it by its own graph sizes, and no argument keeps "
                             "it")
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


def _runtime_compilation_config(value: ast.expr, code: str) -> tuple[str, Risky]:
    reason = (f"`compilation_config={code}` is only known at run time and vLLM's "
              "`VllmRunner` replaces any falsy value by its own graph sizes: the rewrite "
              "keeps the meaning of None, ints and dicts, not of other falsy values")
    if isinstance(value, (ast.Name, ast.Attribute)):
        return (f"CompilationConfig(mode={code}) if isinstance({code}, int) and not {code} "
                f"else {code} or CompilationConfig()"), Risky(reason)
    wrapped = code if isinstance(value, (ast.Call, ast.Subscript)) else f"({code})"
    return (f"{wrapped} or CompilationConfig()",
            Risky(reason + " (a falsy int turns compilation on)"))


def _is_plain(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _hash_reason(node: ast.AST, names: set[str],
                 key_contexts: tuple[type[ast.expr_context], ...]) -> str | None:
    """Why ``node`` hashes one of ``names`` (``hash(x)``, ``s.add(x)``, a dict key or set
    member, a subscript key in one of ``key_contexts``), which a `weakref.proxy` cannot
    be; else ``None``."""
    return hash_reason(node, lambda n: _is_plain(n, names), key_contexts)


def hash_reason(node: ast.AST, is_engine: Callable[[ast.AST], bool],
                key_contexts: tuple[type[ast.expr_context], ...]) -> str | None:
    """Why ``node`` hashes a part ``is_engine`` says holds the engine (``hash(x)``,
    ``s.add(x)``, a dict key or set member, a subscript key in one of ``key_contexts``),
    which a `weakref.proxy` cannot be; else ``None``."""
    if isinstance(node, ast.Call) and any(is_engine(a) for a in node.args):
        callee = last_name(node.func)
        if callee == "hash" or (callee in HASHING_METHODS
                                and isinstance(node.func, ast.Attribute)):
            return (f"`{callee}()` hashes the engine, and the `weakref.proxy` the fix binds "
                    "is unhashable")
    if isinstance(node, ast.Dict) and any(
            k is not None and is_engine(k) for k in node.keys) or isinstance(
            node, ast.Set) and any(is_engine(e) for e in node.elts):
        return ("the engine is a dict key or set member, and the `weakref.proxy` the fix "
                "binds is unhashable")
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, key_contexts) \
            and is_engine(node.slice):
        return "the engine is used as a key, and the `weakref.proxy` the fix binds is unhashable"
    return None


#: Decorators that cache a function's results keyed on its arguments (they hash them).
CACHE_DECORATORS = frozenset({"functools.lru_cache", "functools.cache"})
#: How deep a value is followed through the module's functions and fixtures.
_FOLLOW_DEPTH = 4


def module_functions(module: ModuleAnalysis) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module-level functions of ``module`` by name, decorated ones included (the last
    definition of a name wins; a name also bound otherwise at module level is left out)."""
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    other: set[str] = set()
    for stmt in module.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = stmt
            other.discard(stmt.name)
        else:
            other.update(n.id for n in walk_breadth(stmt) if isinstance(n, ast.Name)
                         and isinstance(n.ctx, ast.Store))
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                other.update((a.asname or a.name).split(".")[0] for a in stmt.names)
            elif isinstance(stmt, ast.ClassDef):
                other.add(stmt.name)
    return {name: node for name, node in out.items() if name not in other}


def _cache_decorator(module: ModuleAnalysis, func: ast.FunctionDef | ast.AsyncFunctionDef
                     ) -> str | None:
    """``functools.lru_cache`` when ``func`` is decorated with a cache, as spelled there."""
    for decorator in func.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if module.qualified(target) in CACHE_DECORATORS:
            return dotted_name(target)
    return None


def _received(func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
              names: set[str]) -> set[str]:
    """The parameters of ``func`` that receive one of ``names`` in ``call`` (a starred
    argument or one past the positional parameters: the ``*args``/``**kwargs`` name)."""
    args = func.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    keyword = {a.arg for a in (*args.args, *args.kwonlyargs)}
    out: set[str] = set()
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred) and _is_plain(arg.value, names) or \
                _is_plain(arg, names) and index >= len(positional):
            out.update(a.arg for a in (args.vararg,) if a is not None)
        elif _is_plain(arg, names):
            out.add(positional[index])
    for kw in call.keywords:
        if _is_plain(kw.value, names):
            if kw.arg in keyword:
                out.add(kw.arg)
            elif args.kwarg is not None:
                out.add(args.kwarg.arg)
    return out


def _passed_problem(module: ModuleAnalysis, call: ast.Call, names: set[str],
                    seen: set[str]) -> str | None:
    """:meth:`SafetyChecks.passed_problem`; ``seen`` holds the functions already on the
    way (a recursive call is not followed twice)."""
    if not isinstance(call.func, ast.Name) or len(seen) >= _FOLLOW_DEPTH:
        return None
    name = call.func.id
    func = module.derived(module_functions).get(name) if name not in seen else None
    if func is None:
        return None
    params = _received(func, call, names)
    if not params:
        return None
    cache = _cache_decorator(module, func)
    if cache is not None:
        return (f"`{name}()` receives the engine and caches its results by their arguments "
                f"(`@{cache}`): it hashes the engine, and the `weakref.proxy` the fix binds "
                "is unhashable")
    return _body_problem(module, func, params, f"`{name}()`, which receives the engine",
                         seen | {name})


def _body_problem(module: ModuleAnalysis, func: ast.FunctionDef | ast.AsyncFunctionDef,
                  params: set[str], where: str, seen: set[str]) -> str | None:
    """Why ``func`` cannot be handed a `weakref.proxy` in ``params``: it hashes one of them
    or an alias of one, looks at it by identity or hands it on to a function of the module
    that does (the reason says ``where``); else ``None``."""
    aliases = set(params)
    nodes = [n for stmt in func.body for n in walk_breadth(stmt)]
    grown = True
    while grown:
        grown = False
        for node in nodes:
            if isinstance(node, ast.Assign) and _is_plain(node.value, aliases):
                new = {t.id for t in node.targets if isinstance(t, ast.Name)} - aliases
                if new:
                    aliases |= new
                    grown = True
    for node in nodes:
        reason = identity_reason(node, aliases, "the engine") or _hash_reason(
            node, aliases, (ast.Load, ast.Store, ast.Del))
        if reason is None and isinstance(node, ast.Call):
            reason = _passed_problem(module, node, aliases, seen)
        if reason is not None:
            return f"in {where}: {reason}"
    return None


def _consumer_problem(module: ModuleAnalysis, fixture: FunctionInfo,
                      seen: set[str]) -> str | None:
    """:meth:`SafetyChecks.consumer_problem`; ``seen`` holds the fixtures already on the
    way."""
    name = fixture.fixture_name or fixture.name
    if name in seen or len(seen) >= _FOLLOW_DEPTH:
        return None
    for consumer in module.functions:
        if consumer is fixture or consumer.kind not in ("test", "fixture") or \
                name not in consumer.params:
            continue
        where = f"`{consumer.name}`, which requests the fixture `{name}`"
        problem = _body_problem(module, consumer.node, {name}, where, set())
        if problem is None and consumer.kind is FunctionKind.FIXTURE and any(
                isinstance(n, (ast.Yield, ast.Return)) and n.value is not None
                and _is_plain(n.value, {name}) for n in walk_breadth(consumer.node)):
            problem = _consumer_problem(module, consumer, seen | {name})
        if problem is not None:
            return problem
    return None


def weak_calls(module: ModuleAnalysis, segment: list[ast.stmt],
                names: set[str]) -> set[tuple[int, str]]:
    """``(line, callee spelling)`` of the weak-reference calls (``weakref.proxy``,
    ``weakref.ref``, ``weakref.finalize``, ``weakref.WeakMethod``) in ``segment`` whose
    first argument is one of ``names``."""
    out: set[tuple[int, str]] = set()
    for stmt in segment:
        for node in walk_breadth(stmt):
            if isinstance(node, ast.Call) and module.qualified(node.func) in WEAK_CALLABLES \
                    and node.args and _is_plain(node.args[0], names):
                spelling = dotted_name(node.func)
                if spelling is not None:
                    out.add((node.lineno, spelling))
    return out


def plain_aliases(stmts: list[ast.stmt], names: set[str]) -> set[str]:
    """``names`` and every name bound in ``stmts`` to one of them directly (``e = llm``,
    transitively): the names that hold the engine itself, not a value read from it."""
    own = set(names)
    assigns = [n for s in stmts for n in walk_breadth(s) if isinstance(n, ast.Assign)
               and isinstance(n.value, ast.Name)]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            if node.value.id in own:  # type: ignore[attr-defined]
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in own:
                        own.add(target.id)
                        changed = True
    return own

"""What makes a fix unsafe or impossible: escapes, identity, hashing, arguments.

Once the block is known, each use of the engine inside it is judged
(:meth:`SafetyChecks.escape`: returned, handed to a thread, captured by a nested function,
compared by identity, hashed or weakly referenced), the call's arguments are mapped onto
the runner's (:meth:`SafetyChecks._argument_problem`,
:func:`compilation_config_equivalent`), and the weak-reference calls that must take
``runner.llm`` instead of the proxy are listed (:func:`weak_calls`). A reason that starts
with ``"none:"`` rules the fix out; any other makes it unsafe.
"""

from __future__ import annotations

import ast

from lint_gpu_tests.analysis import ModuleAnalysis
from lint_gpu_tests.fixplan.flow import THREAD_CALLS
from lint_gpu_tests.fixplan.groups import identity_reason
from lint_gpu_tests.fixplan.plan import BUNDLED_RUNNER_ONLY_PARAMETERS
from lint_gpu_tests.mappings import RUNNER_ONLY_PARAMETERS
from lint_gpu_tests.source import walk_breadth
from lint_gpu_tests.syntax import dotted_name, last_name, names_in

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
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return any(hands_out(e, names) for e in expr.elts)
    if isinstance(expr, ast.Dict):
        return any(hands_out(v, names) for v in expr.values)
    if isinstance(expr, (ast.Starred, ast.NamedExpr)):
        return hands_out(expr.value, names)
    if isinstance(expr, ast.IfExp):
        return hands_out(expr.body, names) or hands_out(expr.orelse, names)
    return False


#: What to do with a helper that builds an engine and returns it (a factory), said where the
#: fix gives up on one.
FACTORY_ADVICE = ("; a factory helper can become a `contextlib.contextmanager` that yields "
                  "the engine of a `with` block over the runner, its callers `with` "
                  "statements")


class SafetyChecks:
    """Safety questions about one analysed module's engine uses and calls; a base of the
    planner, whose ``module`` it reads."""

    module: ModuleAnalysis

    def escape(self, stmt: ast.stmt, names: set[str], tainted: set[str],
               is_fixture: bool) -> str | None:
        """Why using the engine in ``stmt`` makes the fix unsafe (``"none:..."`` when it
        rules the fix out), or ``None``. ``names`` are the engine's own names, ``tainted``
        every name that can reach it (:func:`value_flow`; stores into containers and
        attributes are judged there)."""
        if not tainted:
            return None
        for node in walk_breadth(stmt):
            if isinstance(node, ast.Return) and node.value is not None and not is_fixture:
                if hands_out(node.value, tainted):
                    return "none:the engine is returned to the caller, so it must outlive " \
                           "this function"
                if names_in(node.value) & tainted:
                    return "none:a value read from the engine is returned to the caller " \
                           f"(line {node.lineno}) and may hold the engine after this " \
                           "function ends"
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
        """Whether the call's arguments can be mapped onto the runner's (README, "Fix safety")."""
        config = self.module.config
        if any(isinstance(a, ast.Starred) and not _holds_one(a.value) for a in call.args):
            return "none:`*` arguments may hold more than the model, and the runner takes " \
                   "only the model by position"
        rejected = RUNNER_ONLY_PARAMETERS if config.target == "vllm" \
            else BUNDLED_RUNNER_ONLY_PARAMETERS
        taken = next((k.arg for k in call.keywords if k.arg in rejected), None)
        if taken is not None:
            return f"none:`LLM` does not take `{taken}=` (building it raises `TypeError`), " \
                   "but the runner does and would build the engine"
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


def _holds_one(value: ast.expr) -> bool:
    """Whether ``*value`` is statically one positional argument (``*("m",)``)."""
    return isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == 1 and not \
        isinstance(value.elts[0], ast.Starred)


def compilation_config_equivalent(value: ast.expr, module: ModuleAnalysis
                                  ) -> tuple[str | None, str | None]:
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


def _is_plain(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


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

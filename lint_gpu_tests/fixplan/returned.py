"""Whether a value a function returns from inside the runner's block is plain data.

A helper or test that builds an engine and returns a value read from it
(``return llm.llm_engine.vllm_config.scheduler_config.max_num_seqs``) is fixed by a
``with`` block that takes in the ``return``: the value is computed while the engine is
alive, the block's exit shuts the engine down, then the function returns. That keeps
the meaning when the value cannot reach the engine (:func:`plain_data`); otherwise the
caller may get a value whose engine is already shut down.
"""

from __future__ import annotations

import ast

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.parsing.syntax import names_in

#: Fields of vLLM's config objects (``*_config``) whose values are ints, floats, bools or
#: strings (or ``None``): ``scheduler_config.max_num_seqs``, ``cache_config.block_size``.
SCALAR_CONFIG_FIELDS = frozenset({
    "max_num_seqs", "max_num_batched_tokens", "max_model_len", "max_num_partial_prefills",
    "enable_chunked_prefill", "block_size", "gpu_memory_utilization", "num_gpu_blocks",
    "num_cpu_blocks", "swap_space", "cache_dtype", "enable_prefix_caching",
    "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "world_size",
    "model", "tokenizer", "seed", "trust_remote_code", "enforce_eager", "max_logprobs",
    "quantization", "revision", "max_loras", "max_lora_rank", "max_cpu_loras",
})
#: Fields of a generate output's completion (``out.outputs[0].text``) that hold plain data.
COMPLETION_FIELDS = frozenset({"text", "finish_reason", "stop_reason", "cumulative_logprob"})
#: Builtins whose result is an int, float, bool or str whatever their argument.
PLAIN_BUILTINS = frozenset({"len", "str", "int", "float", "bool", "repr"})
#: Of those, the ones that give an object's text: of a name reaching the engine, the text
#: differs once the fix binds the name to ``weakref.proxy`` of the engine.
TEXT_BUILTINS = frozenset({"str", "repr"})


def plain_data(expr: ast.expr, tainted: set[str], module: ModuleAnalysis,
               function: ast.AST | None = None) -> bool:
    """True when evaluating ``expr`` provably gives plain data that cannot hold the engine
    (``tainted``: every name that may reach it): a literal, a name that cannot reach it or
    that ``function`` binds once only, by a plain assignment of such a value,
    ``len(...)``/``str(...)``/``int(...)``/``float(...)``/``bool(...)``/``repr(...)`` (not
    rebound in the module; ``str``/``repr`` of a name reaching the engine is not), a
    comparison, ``not``, arithmetic or an f-string (not one formatting such a name), a scalar
    field of a config (``....scheduler_config.max_num_seqs``), a completion's text
    (``out.outputs[0].text``), or a tuple, list, set, dict, list/set/dict comprehension
    or conditional made only of such values. A generator expression is not: it runs after
    the function returns."""
    return _Plain(tainted, module, function).check(expr, frozenset())


class _Plain:
    """:func:`plain_data` for one function; ``opaque`` (in :meth:`check`) are names whose
    binding is not followed (comprehension targets, names being resolved)."""

    def __init__(self, tainted: set[str], module: ModuleAnalysis,
                 function: ast.AST | None) -> None:
        self.tainted = tainted
        self.module = module
        self.function = function

    def check(self, expr: ast.expr, opaque: frozenset[str]) -> bool:
        """Whether ``expr`` gives plain data (:func:`plain_data`)."""
        if not names_in(expr) & (self.tainted | opaque):
            return True
        if isinstance(expr, ast.Compare):
            return True  # a comparison of the engine's values is a bool
        if isinstance(expr, ast.JoinedStr):
            # an f-string is a str, but one that formats a name reaching the engine formats
            # the proxy after the fix, not the engine
            return not any(isinstance(v, ast.FormattedValue) and self._reaches(v.value)
                           for v in expr.values)
        if isinstance(expr, ast.Name):
            value = None if expr.id in opaque else _single_binding(self.function, expr.id)
            return value is not None and self.check(value, opaque | {expr.id})
        if isinstance(expr, ast.UnaryOp):
            return isinstance(expr.op, ast.Not) or self.check(expr.operand, opaque)
        if isinstance(expr, ast.BinOp):
            return self.check(expr.left, opaque) and self.check(expr.right, opaque)
        if isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Name) and expr.func.id in TEXT_BUILTINS and any(
                    self._reaches(a) for a in expr.args):
                return False  # the text of the proxy the fix binds, not of the engine
            return isinstance(expr.func, ast.Name) and expr.func.id in PLAIN_BUILTINS and \
                not _rebound(self.module, expr.func.id)
        if isinstance(expr, ast.Attribute):
            return _scalar_field(expr)
        parts: list[ast.expr]
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            parts = list(expr.elts)
        elif isinstance(expr, ast.Dict):
            if any(k is None for k in expr.keys):
                return False
            parts = [*(k for k in expr.keys if k is not None), *expr.values]
        elif isinstance(expr, ast.IfExp):
            parts = [expr.body, expr.orelse]
        elif isinstance(expr, (ast.ListComp, ast.SetComp)):
            parts, opaque = [expr.elt], opaque | _targets(expr)
        elif isinstance(expr, ast.DictComp):
            parts, opaque = [expr.key, expr.value], opaque | _targets(expr)
        else:
            return False
        return all(self.check(p, opaque) for p in parts)


    def _reaches(self, expr: ast.expr) -> bool:
        """``expr`` is a name that may reach the engine itself (its text is the proxy's
        once the fix binds ``weakref.proxy``)."""
        return isinstance(expr, ast.Name) and expr.id in self.tainted


def _scalar_field(expr: ast.Attribute) -> bool:
    """``<...>.<x>_config.<scalar field>`` or ``<...>.outputs[<i>].<completion field>``."""
    owner = expr.value
    if expr.attr in SCALAR_CONFIG_FIELDS:
        return isinstance(owner, ast.Attribute) and owner.attr.endswith("_config")
    return expr.attr in COMPLETION_FIELDS and isinstance(owner, ast.Subscript) and \
        isinstance(owner.value, ast.Attribute) and owner.value.attr == "outputs"


def _single_binding(function: ast.AST | None, name: str) -> ast.expr | None:
    """The value of ``name = value`` when that is the only binding of ``name`` in
    ``function`` (no other store, ``del``, loop or ``with`` target, nested scope's
    ``nonlocal``), else ``None``."""
    if function is None:
        return None
    value: ast.expr | None = None
    stores = 0
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            stores += 1
        elif isinstance(node, (ast.Nonlocal, ast.Global)) and name in node.names:
            return None
        elif isinstance(node, ast.arg) and node.arg == name:
            return None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and node.targets[0].id == name:
            value = node.value
    return value if stores == 1 else None


def _targets(comp: ast.ListComp | ast.SetComp | ast.DictComp) -> set[str]:
    """The names a comprehension's ``for`` clauses bind (they may hold anything)."""
    return {name for gen in comp.generators for name in names_in(gen.target)}


def _rebound(module: ModuleAnalysis, name: str) -> bool:
    """Whether the module binds ``name`` anywhere (assignment, import, definition,
    parameter), so that it may not be the builtin."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.name == name:
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return True
        if isinstance(node, ast.arg) and node.arg == name:
            return True
    return False

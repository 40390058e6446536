"""What a ``**mapping`` argument of an engine call holds (``LLM(**kwargs)`` with a dict built in
the test or module).

``LLM(**llm_kwargs)`` and ``LLM(**MODEL_CONFIGS[name])`` hide the engine's arguments, the model
included, in a mapping. With ``target = "bundled"`` that needs nothing: the bundled runner takes
``model=``. vLLM's own ``VllmRunner`` (``target = "vllm"``) takes the model as ``model_name`` and
the tokenizer as ``tokenizer_name``, and has defaults of its own, so the fix must know which keys
the mapping can hold. :func:`resolve_mapping` answers from the module's source: a dict display,
``dict(k=v)``, a local bound once to one of those, a module constant, or an entry of a module
constant whose values are all such dicts; it follows a mapping only while nothing in the module
can change it (stores into it, mutating methods, handing it to other code).

:data:`RUNNER_KWARGS_HELPER` is the module-level function the fix adds to map such a mapping onto
vLLM's runner at run time (it lives here, below the planner and the codemods, which both read
it).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lint_gpu_tests.analysis.analysis import FunctionInfo, ModuleAnalysis
from lint_gpu_tests.ftypes import Blocked, FixProblem, Risky
from lint_gpu_tests.parsing.source import walk_breadth

#: Name of the helper the fix adds (one per module).
RUNNER_KWARGS_NAME = "_runner_kwargs"

#: Source of that helper (no line longer than 79 characters, pycodestyle's limit, so it
#: passes any project's line length). ``defaults`` fill only the keys the mapping lacks
#: (``{**defaults, **llm_kwargs}``), so passing one the mapping may hold changes nothing.
RUNNER_KWARGS_HELPER = f'''def {RUNNER_KWARGS_NAME}(llm_kwargs, **defaults):
    """`LLM(**llm_kwargs)` as the arguments of vLLM's `VllmRunner`
    (tests/conftest.py): the model goes to `model_name`, the tokenizer to
    `tokenizer_name`, and `defaults` fill the keys `llm_kwargs` lacks where the
    runner's own defaults differ from `LLM`'s."""
    kwargs = {{**defaults, **llm_kwargs}}
    kwargs["model_name"] = kwargs.pop("model")
    if "tokenizer" in kwargs:
        kwargs["tokenizer_name"] = kwargs.pop("tokenizer")
    return kwargs
'''

#: Methods that read a dict without changing it.
_READ_METHODS = frozenset({"get", "keys", "values", "items", "copy"})
#: Calls that read their argument without keeping or changing it.
_READ_CALLS = frozenset({"len", "sorted", "list", "tuple", "set", "dict", "repr", "str",
                         "print", "iter"})


@dataclass(frozen=True)
class Mapping:
    """The mappings a ``**`` argument may be, as far as the module shows.

    Attributes:
        entries: each mapping it may be, as key -> value expression; ``None`` when it is only
            known at run time.
        reason: why it is not known (empty when it is).
    """

    entries: tuple[dict[str, ast.expr], ...] | None
    reason: str = ""

    @property
    def known(self) -> bool:
        """Whether every mapping it may be is one of :attr:`entries`."""
        return self.entries is not None

    def always(self, key: str) -> bool:
        """Whether the mapping holds ``key`` whichever it is (``False`` when unknown)."""
        return self.entries is not None and all(key in e for e in self.entries)

    def values(self, key: str) -> list[ast.expr]:
        """The value expressions ``key`` has in the entries that hold it."""
        return [e[key] for e in self.entries or () if key in e]

    def keys(self) -> set[str]:
        """Every key some entry holds."""
        return {k for e in self.entries or () for k in e}


def _unknown(reason: str) -> Mapping:
    return Mapping(None, reason)


def _literal(module: ModuleAnalysis, node: ast.AST) -> dict[str, ast.expr] | None:
    """``{"k": v}`` or ``dict(k=v)``: its keys and values; ``None`` for anything else."""
    if isinstance(node, ast.Dict):
        out: dict[str, ast.expr] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return None
            out[key.value] = value
        return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
            and module.qualified(node.func) in (None, "dict") and not node.args \
            and all(k.arg is not None for k in node.keywords):
        return {k.arg: k.value for k in node.keywords if k.arg is not None}
    return None


def _read_only(module: ModuleAnalysis, node: ast.AST, holds_dicts: bool = False,
               depth: int = 0) -> bool:
    """Whether this use of a mapping (or of an entry of it) leaves it as it is.

    ``holds_dicts``: the value used holds the mappings (a table, a list of ``parametrize``
    rows, a container display), so handing out its elements (iterating it, ``.values()``,
    ``.items()``) may let them be changed. A use inside a container display counts as the
    uses of the module constant that display is bound to (``TABLE = {"a": A}``), a few levels
    deep.
    """
    current = node
    while True:
        parent = module.parent(current)
        if isinstance(parent, ast.keyword) and parent.arg is None:
            return True  # ``f(**mapping)``: the callee gets a copy
        if isinstance(parent, ast.Call) and module.qualified(parent.func) \
                == "pytest.mark.parametrize":
            return True  # pytest hands the values to the tests as they are
        if isinstance(parent, (ast.List, ast.Tuple, ast.Set)) or (
                isinstance(parent, ast.Dict) and any(v is current for v in parent.values)):
            current, holds_dicts = parent, True  # held by a container: follow the container
            continue
        if isinstance(parent, ast.Assign) and parent.value is current and depth < 3 \
                and any(s is parent for s in module.tree.body) and len(parent.targets) == 1 \
                and isinstance(parent.targets[0], ast.Name):
            name = parent.targets[0].id
            return all(_read_only(module, n, holds_dicts, depth + 1)
                       for n in walk_breadth(module.tree)
                       if isinstance(n, ast.Name) and n.id == name
                       and isinstance(n.ctx, ast.Load))
        if isinstance(parent, ast.Subscript) and parent.value is current:
            if not isinstance(parent.ctx, ast.Load):
                return False
            current = parent  # an entry: follow how it is used
            continue
        if isinstance(parent, ast.Attribute) and parent.value is current:
            grand = module.parent(parent)
            if not (isinstance(grand, ast.Call) and grand.func is parent):
                return False
            if parent.attr in ("get", "copy"):
                current = grand  # an entry, or a shallow copy sharing the entries
                continue
            return parent.attr == "keys" or (parent.attr in _READ_METHODS and not holds_dicts)
        if isinstance(parent, ast.Call) and current in parent.args and isinstance(
                parent.func, ast.Name) and parent.func.id in _READ_CALLS:
            return not holds_dicts or parent.func.id in ("len", "repr", "str", "print")
        if isinstance(parent, ast.Compare) and any(c is current for c in parent.comparators):
            return True
        if isinstance(parent, (ast.comprehension, ast.For, ast.AsyncFor)) \
                and parent.iter is current:
            return not holds_dicts
        return False


def _stores(tree: ast.AST, name: str) -> list[ast.AST]:
    """Nodes of ``tree`` that bind or delete ``name`` (assignments, parameters, imports,
    ``global``/``nonlocal``, definitions)."""
    found: list[ast.AST] = []
    for node in walk_breadth(tree):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            found.append(node)
        elif isinstance(node, ast.arg) and node.arg == name:
            found.append(node)
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            found.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == name:
            found.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in node.names):
            found.append(node)
    return found


def _unchanged(module: ModuleAnalysis, scope: ast.AST, name: str,
               holds_dicts: bool = False) -> bool:
    """Whether every use of ``name`` in ``scope`` only reads it (see :func:`_read_only`)."""
    return all(_read_only(module, n, holds_dicts) for n in walk_breadth(scope)
               if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))


def _name_value(module: ModuleAnalysis, func: FunctionInfo, name: str, call: ast.Call,
                table: bool = False) -> tuple[ast.AST | None, str]:
    """The expression ``name`` is bound to where ``call`` reads it, or ``(None, reason)``
    (``table``: it holds the mappings, see :func:`_read_only`)."""
    local = _stores(func.node, name)
    if len(local) == 1 and isinstance(local[0], ast.arg):
        return None, f"`{name}` is a parameter of `{func.name}()`"
    if local:
        stmt = module.parent(local[0]) if isinstance(local[0], ast.Name) else None
        if len(local) != 1 or not isinstance(stmt, ast.Assign):
            return None, f"`{name}` is a parameter or bound more than once in `{func.name}()`"
        if len(stmt.targets) != 1 or not any(s is stmt for s in func.node.body) \
                or stmt.lineno >= call.lineno:
            return None, f"`{name}` is not bound once, before the call, in `{func.name}()`"
        if not _unchanged(module, func.node, name, table):
            return None, f"`{name}` may be changed in `{func.name}()` before the call"
        return stmt.value, ""
    binding = _module_constant(module, name)
    if binding is None:
        return None, f"`{name}` is not a module constant the fix can read"
    if not _unchanged(module, module.tree, name, table):
        return None, f"`{name}` may be changed by the module"
    return binding, ""


def _module_constant(module: ModuleAnalysis, name: str) -> ast.expr | None:
    """The value of ``name = ...`` at the module's top level when nothing else binds it."""
    stores = _stores(module.tree, name)
    if len(stores) != 1 or not isinstance(stores[0], ast.Name):
        return None
    stmt = module.parent(stores[0])
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and any(s is stmt for s in module.tree.body)):
        return None
    return stmt.value


def parametrized_values(module: ModuleAnalysis, func: FunctionInfo, name: str
                        ) -> list[ast.expr] | None:
    """The values ``@pytest.mark.parametrize`` gives the parameter ``name`` of ``func``, as
    :func:`_parametrized` finds them (``None`` unless they are written out), whatever the
    function does with them (for values that cannot be changed: strings, numbers)."""
    return _parametrized(module, func, name, immutable=True)


def _parametrized(module: ModuleAnalysis, func: FunctionInfo, name: str,
                  call: ast.Call | None = None, immutable: bool = False
                  ) -> list[ast.expr] | None:
    """The values ``@pytest.mark.parametrize`` gives the parameter ``name`` of ``func``
    (``None`` unless they are written out: literal argnames, a list or tuple of values, or a
    module constant holding one; ``pytest.param(...)`` unwrapped; not ``indirect``)."""
    params = [a for a in walk_breadth(func.node) if isinstance(a, ast.arg) and a.arg == name]
    if len(params) != 1 or len(_stores(func.node, name)) != 1 \
            or not (immutable or _unchanged(module, func.node, name)):
        return None
    for deco in func.node.decorator_list:
        if not (isinstance(deco, ast.Call) and module.qualified(deco.func)
                == "pytest.mark.parametrize" and len(deco.args) >= 2):
            continue
        argnames = deco.args[0]
        if isinstance(argnames, ast.Constant) and isinstance(argnames.value, str):
            names = [n.strip() for n in argnames.value.split(",") if n.strip()]
        elif isinstance(argnames, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in argnames.elts):
            names = [e.value for e in argnames.elts]  # type: ignore[attr-defined]
        else:
            return None
        if name not in names:
            continue
        if any(k.arg == "indirect" for k in deco.keywords):
            return None
        rows: ast.expr | None = deco.args[1]
        if isinstance(rows, ast.Name):
            table = rows.id
            rows = _module_constant(module, table)
            if rows is None or not _unchanged(module, module.tree, table, True):
                return None
        if not isinstance(rows, (ast.List, ast.Tuple)):
            return None
        values: list[ast.expr] = []
        for row in rows.elts:
            if isinstance(row, ast.Call) and module.qualified(row.func) == "pytest.param":
                row = row.args[0] if len(names) == 1 and row.args else (
                    ast.Tuple(elts=row.args, ctx=ast.Load()))
            if len(names) > 1:
                if not (isinstance(row, (ast.Tuple, ast.List)) and len(row.elts) == len(names)):
                    return None
                row = row.elts[names.index(name)]
            values.append(row)
        return values
    return None


def _entries_of(module: ModuleAnalysis, func: FunctionInfo, node: ast.AST,
                call: ast.Call, table: bool = False) -> tuple[dict[str, ast.expr] | None, str]:
    """One mapping (``table``: a dict of mappings): a literal, or a name bound to one."""
    found = _literal(module, node)
    if found is not None:
        return found, ""
    if isinstance(node, ast.Name):
        value, reason = _name_value(module, func, node.id, call, table)
        if value is None:
            return None, reason
        found = _literal(module, value)
        if found is not None:
            return found, ""
        return None, f"`{node.id}` is not a dict the fix can read"
    return None, f"`{ast.unparse(node)}` is only known at run time"


def _each(module: ModuleAnalysis, func: FunctionInfo, values: list[ast.expr], call: ast.Call,
          what: str) -> Mapping:
    """The mapping that is one of ``values`` (each a literal or a name bound to one)."""
    entries = []
    for value in values:
        entry, reason = _entries_of(module, func, value, call)
        if entry is None:
            return _unknown(f"{what}: {reason}")
        entries.append(entry)
    return Mapping(tuple(entries)) if entries else _unknown(f"{what}: there is none")


def resolve_mapping(module: ModuleAnalysis, func: FunctionInfo, expr: ast.expr,
                    call: ast.Call) -> Mapping:
    """The mappings ``expr`` (the value of ``**expr`` in ``call``, inside ``func``) may be.

    ``{...}``/``dict(...)``, a name bound to one (once, in ``func`` before the call, or at
    module level and not rebound), and ``TABLE[key]`` where ``TABLE`` is such a dict whose
    values are all such dicts (one entry for a literal key, each entry otherwise). Anything
    else, or any use that may change the mapping, gives an unknown :class:`Mapping` with the
    reason.
    """
    if isinstance(expr, ast.Subscript):
        table, reason = _entries_of(module, func, expr.value, call, table=True)
        if table is None:
            return _unknown(reason)
        key = expr.slice
        selected = list(table.values())
        if isinstance(key, ast.Constant):
            if key.value not in table:
                return _unknown(f"`{ast.unparse(expr)}` names no entry of the table")
            selected = [table[key.value]]
        return _each(module, func, selected, call, f"an entry of `{ast.unparse(expr.value)}`")
    rows = _parametrized(module, func, expr.id, call) if isinstance(expr, ast.Name) else None
    if rows is not None:
        return _each(module, func, rows, call, f"a parametrized value of `{ast.unparse(expr)}`")
    entry, reason = _entries_of(module, func, expr, call)
    if entry is None:
        return _unknown(reason)
    return Mapping((entry,))


def defines_other_helper(module: ModuleAnalysis) -> bool:
    """Whether the module binds :data:`RUNNER_KWARGS_NAME` to something other than
    :data:`RUNNER_KWARGS_HELPER` (the fix must not shadow or duplicate it)."""
    stores = _stores(module.tree, RUNNER_KWARGS_NAME)
    if not stores:
        return False
    ours = ast.dump(ast.parse(RUNNER_KWARGS_HELPER).body[0])
    return not (len(stores) == 1 and isinstance(stores[0], ast.FunctionDef)
                and any(s is stores[0] for s in module.tree.body)
                and ast.dump(stores[0]) == ours)


#: Parameters of vLLM's ``VllmRunner`` that ``LLM`` does not take: a mapping holding one of them
#: fails with ``LLM`` and would not with the runner.
RUNNER_ONLY_PARAMETERS = frozenset({"model_name", "tokenizer_name", "default_torch_num_threads"})


def hides_model(call: ast.Call) -> bool:
    """Whether the engine call gives its model neither first nor as ``model=`` (it is in a
    ``**mapping`` or ``*args``)."""
    first_positional = bool(call.args) and not isinstance(call.args[0], ast.Starred)
    return not first_positional and not any(k.arg == "model" for k in call.keywords)


def plan_mapping(
    module: ModuleAnalysis,
    func: FunctionInfo,
    call: ast.Call,
    defaults: Sequence[tuple[str, str]],
    equivalent: Callable[[ast.expr, ModuleAnalysis], tuple[str | None, FixProblem | None]],
) -> tuple[tuple[str, ...] | None, FixProblem | None]:
    """How ``LLM(**mapping)`` becomes ``vllm_runner(**_runner_kwargs(mapping, ...))`` for
    vLLM's runner (``target = "vllm"``; README, "Fix safety").

    Args:
        module / func / call: the engine call and where it is.
        defaults: ``(keyword, source)`` of each default in which vLLM's runner differs from
            ``LLM`` (:data:`lint_gpu_tests.fixplan.plan.VLLM_TARGET_DEFAULTS`).
        equivalent: what a ``compilation_config`` value must become for that runner, and why
            not when it cannot
            (:func:`lint_gpu_tests.fixplan.safety.compilation_config_equivalent`).

    Returns:
        ``(keywords, problem)``: the ``k=v`` sources handed to the helper (every differing
        default that neither the call's own keywords nor every possible mapping set; the
        helper applies them only for keys the mapping lacks), and ``None`` or the reason the
        fix is unsafe (:class:`~lint_gpu_tests.ftypes.Risky`); ``(None, Blocked(reason))``
        when there is no fix.
    """
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None, Blocked("the model is hidden in `*args`, which vLLM's `VllmRunner` "
                             "cannot take apart")
    stars = [k.value for k in call.keywords if k.arg is None]
    if len(stars) != 1:
        return None, Blocked("the model is hidden in one of several `**` mappings, which the "
                             "fix does not merge (a key in two of them is an error for `LLM`)")
    if defines_other_helper(module):
        return None, Blocked(f"the module already defines `{RUNNER_KWARGS_NAME}`, the name "
                             "the fix gives its helper")
    source = ast.unparse(stars[0])
    mapping = resolve_mapping(module, func, stars[0], call)
    problems: list[str] = []
    if mapping.known:
        if not mapping.always("model"):
            return None, Blocked(f"`{source}` does not always hold `model`")
        clash = sorted(mapping.keys() & RUNNER_ONLY_PARAMETERS)
        if clash:
            return None, Blocked(f"`{source}` holds `{clash[0]}`, a parameter of vLLM's "
                                 "`VllmRunner` that `LLM` does not take")
        for value in mapping.values("compilation_config"):
            replacement, problem = equivalent(value, module)
            if replacement is not None or isinstance(problem, Blocked):
                return None, Blocked(f"`compilation_config={ast.unparse(value)}` in `{source}` "
                                     "would be replaced by vLLM's `VllmRunner` with its own "
                                     "graph sizes, and the fix does not rewrite the mapping")
    else:
        problems.append(f"{mapping.reason}: the rewrite maps its keys onto vLLM's "
                        "`VllmRunner` at run time, but a falsy `compilation_config` in it "
                        "would be replaced by the runner's own graph sizes")
    explicit = {k.arg for k in call.keywords if k.arg}
    keywords = tuple(f"{key}={value}" for key, value in defaults
                     if key not in explicit and not mapping.always(key))
    return keywords, Risky("; ".join(problems)) if problems else None

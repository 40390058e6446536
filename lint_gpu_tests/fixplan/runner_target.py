"""The project's own runner (``runner`` in the config): is it in the tree, and does it take
the call a fix writes?

A fix passes the engine's arguments to the runner as they were (the model by position or as
``model=``, every keyword, ``**kwargs``), so the runner must accept them: a
``runner = "pkg.module:name"`` is looked up in the project (``pkg/module.py`` or
``pkg/module/__init__.py``, as :func:`~lint_gpu_tests.config.project_module` finds it) and
must be a function decorated with ``contextlib.contextmanager`` or a class with ``__enter__``
and ``__exit__`` (its own or a base's in the same module) whose signature (``__init__``'s) binds
the call; a ``runner = "conftest:name"`` must be a fixture of the module or of a conftest.py
pytest loads for it, no narrower-scoped than the fixture that requests it, and where it
returns a class or function of its own file that one's signature must bind the call. What is
missing rules the fix out and the reason names it; a parameter the runner gives a default of
its own, which the call does not set, makes the fix unsafe (the default may differ from
``LLM``'s); a fixture whose value is not followed makes it unsafe too.
"""

from __future__ import annotations

import ast
import copy
import functools
import os

from lint_gpu_tests.analysis.analysis import FunctionInfo, FunctionKind, ModuleAnalysis
from lint_gpu_tests.config import FIXTURE_RUNNER_MODULE, ROOT_MARKERS, project_module
from lint_gpu_tests.ftypes import Blocked
from lint_gpu_tests.parsing.syntax import (
    FunctionNode,
    fixture_decorator,
    fixture_request_name,
    fixture_scope,
    last_name,
)

__all__ = ["project_runner_problem"]

#: Names of the parameter that takes the model by position: ``LLM``'s, and vLLM's runner's.
MODEL_PARAMETERS = ("model", "model_name")
#: Fixture scopes, narrowest first (pytest's order).
_SCOPES = ("function", "class", "module", "package", "session")
_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@functools.lru_cache(maxsize=64)
def _parsed(path: str, mtime_ns: int, size: int) -> ast.Module | None:
    """The module at ``path`` (keyed on its stat, so an edited file is read again), ``None``
    when it cannot be read or parsed."""
    try:
        with open(path, "rb") as handle:
            return ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


def _tree(path: str) -> ast.Module | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


def _shown(path: str, root: str) -> str:
    """``path`` relative to ``root`` where it lies below it, for a reason's text."""
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return path if relative.startswith("..") else relative.replace(os.sep, "/")


def _top_level(tree: ast.Module, name: str) -> _Definition | None:
    """The last top-level ``def``/``class`` named ``name`` in ``tree`` (the one that wins)."""
    found = None
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                stmt.name == name:
            found = stmt
    return found


def _class_chain(tree: ast.Module, cls: ast.ClassDef) -> list[ast.ClassDef] | None:
    """``cls`` and its bases, each a class of the same module, first base first; ``None``
    when a base is not such a class (what it inherits is not followed)."""
    chain, seen = [cls], {cls.name}
    for base in cls.bases:
        found = _top_level(tree, base.id) if isinstance(base, ast.Name) else None
        if not isinstance(found, ast.ClassDef) or found.name in seen:
            return None
        rest = _class_chain(tree, found)
        if rest is None:
            return None
        chain += rest
        seen.update(c.name for c in rest)
    return chain


def _method(chain: list[ast.ClassDef], name: str) -> ast.FunctionDef | None:
    for cls in chain:
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return stmt
    return None


def _shown_signature(name: str, params: ast.arguments) -> str:
    """``name(params)`` as written, less annotations (a reason's text)."""
    plain = copy.deepcopy(params)
    for arg in [*plain.posonlyargs, *plain.args, *plain.kwonlyargs, plain.vararg, plain.kwarg]:
        if arg is not None:
            arg.annotation = None
    return f"{name}({ast.unparse(plain)})"


def _entered_signature(tree: ast.Module, node: _Definition, label: str
                       ) -> tuple[ast.arguments, str] | Blocked:
    """The parameters a call of ``node`` binds (a class's ``__init__``'s, less ``self``) and
    the signature as shown, or why ``node`` is no context manager a ``with`` can enter."""
    not_cm = Blocked(f"{label} is not a context manager (a function decorated with "
                     "`@contextlib.contextmanager`, or a class with `__enter__` and `__exit__`)")
    if isinstance(node, ast.AsyncFunctionDef):
        return Blocked(f"{label} is an `async def`: a `with` statement cannot enter it")
    if isinstance(node, ast.FunctionDef):
        if not any(last_name(d) == "contextmanager" for d in node.decorator_list):
            return not_cm
        return node.args, _shown_signature(node.name, node.args)
    chain = _class_chain(tree, node)
    if chain is None:
        return Blocked(f"{label} derives from a class its module does not define, whose "
                       "methods the fix cannot see")
    if _method(chain, "__enter__") is None or _method(chain, "__exit__") is None:
        return not_cm
    init = _method(chain, "__init__")
    if init is None:
        return ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                             defaults=[]), f"{node.name}()"
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    if not positional:
        return Blocked(f"{label}'s `__init__` takes no `self`")
    bound = ast.arguments(
        posonlyargs=args.posonlyargs[1:], args=args.args[1:] if not args.posonlyargs
        else args.args, vararg=args.vararg, kwonlyargs=args.kwonlyargs,
        kw_defaults=args.kw_defaults, kwarg=args.kwarg, defaults=args.defaults)
    return bound, _shown_signature(node.name, bound)


def _call_problem(params: ast.arguments, shown: str, where: str, call: ast.Call
                  ) -> Blocked | list[str]:
    """Whether ``call``'s arguments bind ``params`` (a runner's signature, ``shown`` as
    written, defined in ``where``): a :class:`Blocked` reason when they do not, else the
    unsafe reasons (the runner's own defaults for parameters the call leaves out)."""
    label = f"`{shown}` in {where}"
    positional = [*params.posonlyargs, *params.args]
    first_default = len(positional) - len(params.defaults)
    by_position = positional[:len(call.args)]
    if len(call.args) > len(positional) and params.vararg is None:
        return Blocked(f"{label} takes no positional argument, and the fix passes the model "
                       "by position")
    if by_position and by_position[0].arg not in MODEL_PARAMETERS:
        return Blocked(f"{label} takes `{by_position[0].arg}` first, where the fix passes the "
                       "model")
    given = {p.arg for p in by_position}
    by_keyword = {p.arg for p in [*params.args, *params.kwonlyargs]}
    for keyword in call.keywords:
        if keyword.arg is None:
            if params.kwarg is None:
                return Blocked(f"{label} takes no `**kwargs`, and the call passes `**` "
                               "arguments")
            continue
        if keyword.arg in given:
            return Blocked(f"{label} would get `{keyword.arg}` twice")
        if keyword.arg not in by_keyword and params.kwarg is None:
            return Blocked(f"{label} takes no `{keyword.arg}=` keyword (and no `**kwargs`)")
        given.add(keyword.arg)
    spread = any(k.arg is None for k in call.keywords)
    required = [p.arg for i, p in enumerate(positional) if i >= len(call.args)
                and i < first_default and p.arg not in given]
    keyword_only = list(zip(params.kwonlyargs, params.kw_defaults, strict=True))
    required += [p.arg for p, default in keyword_only if default is None and p.arg not in given]
    if required and not spread:
        return Blocked(f"{label} requires `{required[0]}`, which the call does not pass")
    defaulted = [p.arg for i, p in enumerate(positional) if i >= max(first_default,
                                                                      len(call.args))]
    defaulted += [p.arg for p, default in keyword_only if default is not None]
    own = [name for name in defaulted if name not in given]
    if own:
        names = ", ".join(f"`{name}`" for name in own)
        return [f"{label} sets its own default for {names}, which the call does not set "
                "and which may differ from `LLM`'s"]
    return []


def _module_runner(module: ModuleAnalysis, dotted: str, name: str, call: ast.Call
                   ) -> Blocked | list[str]:
    config = module.config
    setting = f"`runner = \"{config.runner}\"`"
    if not os.path.isfile(module.path):  # checked as text alone: nothing to look up
        return []
    path = project_module(module.path, config, dotted)
    if path is not None and os.path.samefile(path, module.path):
        return Blocked(f"{setting} is defined in this module: a fix would import the runner "
                       "into the module that defines it (and an engine its body builds is the "
                       "runner's own)")
    if path is None:
        return Blocked(f"{setting} imports from `{dotted}`, and the project has no "
                       f"`{dotted.replace('.', '/')}.py`")
    where = _shown(path, config.root)
    tree = _tree(path)
    if tree is None:
        return Blocked(f"{setting}: `{where}` does not parse")
    node = _top_level(tree, name)
    if node is None:
        return Blocked(f"{setting}: `{where}` defines no `{name}` (a function or class at "
                       "its top level)")
    signature = _entered_signature(tree, node, f"`{name}` in {where}")
    if isinstance(signature, Blocked):
        return signature
    return _call_problem(*signature, where, call)


def _conftests(path: str, root: str) -> list[str]:
    """The conftest.py files pytest loads for the module at ``path``, nearest first, up to
    ``root`` or the project's root (the first directory holding a :data:`ROOT_MARKERS`)."""
    found = []
    directory = os.path.dirname(os.path.abspath(path))
    top = os.path.abspath(root)
    while True:
        candidate = os.path.join(directory, "conftest.py")
        if os.path.isfile(candidate):
            found.append(candidate)
        parent = os.path.dirname(directory)
        if directory == top or parent == directory or any(
                os.path.exists(os.path.join(directory, m)) for m in ROOT_MARKERS):
            return found
        directory = parent


def _fixture_def(tree: ast.Module, name: str) -> tuple[FunctionNode, ast.expr] | None:
    """The last top-level fixture of ``tree`` that tests request as ``name`` (its own name,
    or its decorator's ``name=``), with its decorator."""
    found = None
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            deco = fixture_decorator(stmt)
            if deco is not None and fixture_request_name(stmt, deco) == name:
                found = stmt, deco
    return found


def _fixture_runner(module: ModuleAnalysis, name: str, func: FunctionInfo | None,
                    call: ast.Call) -> Blocked | list[str]:
    config = module.config
    setting = f"`runner = \"{config.runner}\"`"
    if not os.path.isfile(module.path):
        return []
    if func is not None and func.fixture_name == name and \
            os.path.basename(module.path) == "conftest.py":
        return Blocked(f"`{name}` is the project's runner fixture ({setting}): the engine it "
                       "builds is the one the fixes enter")
    if module.own_runner_fixture is None:
        return Blocked(f"{setting} requests the `{name}` fixture, and no conftest.py pytest "
                       "loads for this module defines it")
    sources = [(module.path, module.tree)] + [
        (path, _tree(path)) for path in _conftests(module.path, config.root)]
    for path, tree in sources:
        found = _fixture_def(tree, name) if tree is not None else None
        if found is None or tree is None:
            continue
        node, deco = found
        where = _shown(path, config.root)
        scope = fixture_scope(deco)
        wanted = func.fixture_scope if func is not None and \
            func.kind is FunctionKind.FIXTURE else None
        if wanted in _SCOPES and scope in _SCOPES and \
                _SCOPES.index(scope) < _SCOPES.index(wanted):
            return Blocked(f"a {wanted}-scoped fixture cannot request the {scope}-scoped "
                           f"`{name}` fixture ({where})")
        returned = [n.value for n in ast.walk(node) if isinstance(n, (ast.Return, ast.Yield))
                    and n.value is not None]
        value = returned[0] if len(returned) == 1 else None
        target = _top_level(tree, value.id) if isinstance(value, ast.Name) else None
        if target is None:
            break
        signature = _entered_signature(tree, target, f"`{target.name}` in {where}")
        if isinstance(signature, Blocked):
            return signature
        return _call_problem(*signature, where, call)
    return [f"what the `{name}` fixture gives is not followed (a class or function of its "
            "own file, returned): the engine's arguments are not checked against it"]


def project_runner_problem(module: ModuleAnalysis, call: ast.Call, func: FunctionInfo | None
                           ) -> Blocked | list[str]:
    """Whether a fix can hand the engine call ``call`` (in ``func``) to the project's own
    runner (``config.runner``): a :class:`Blocked` reason naming what is missing or does not
    fit, else the reasons the fix is unsafe (none: safe as far as the runner goes). A
    module checked as text alone (no file on disk) has nothing to look up: ``[]``."""
    config = module.config
    dotted, _, name = config.runner.partition(":")
    if dotted == FIXTURE_RUNNER_MODULE:
        return _fixture_runner(module, name, func, call)
    return _module_runner(module, dotted, name, call)

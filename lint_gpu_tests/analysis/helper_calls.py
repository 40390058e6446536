"""Who calls a helper that builds an engine, and can they pass it the runner fixture?

With ``target = "vllm"`` the runner class lives in vLLM's ``tests/conftest.py``, which a helper
cannot import; only tests and fixtures can receive it, as the ``vllm_runner`` fixture. So the
fix gives the helper a ``vllm_runner`` parameter (first, so every call passes it the same way)
and passes the fixture at every call site, each in a test or fixture that requests it.
:func:`helper_callers` says whether that covers every use of the helper, from this module's
source alone. Callers in other modules are never fixed with it (:data:`ONE_MODULE`): a
helper not called in its own module, or public outside a test module, has no fix, and a
public helper of a test module's fix is unsafe, its reason saying so.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from lint_gpu_tests.analysis.analysis import FunctionInfo, FunctionKind, ModuleAnalysis
from lint_gpu_tests.config import is_test_module
from lint_gpu_tests.parsing.source import walk_breadth

#: Why callers in other modules are never fixed with the helper: each module is planned and
#: rewritten on its own (and cached by its own bytes), so a fix cannot reach another file.
ONE_MODULE = "`--fix` rewrites one module at a time"


@dataclass(frozen=True)
class HelperCallers:
    """The calls of a module-level helper, all in tests or fixtures.

    Attributes:
        name: the helper's name (every call of it gets the fixture as first argument).
        callers: ``def`` lines of the tests and fixtures that call it and do not request the
            fixture yet.
        public: the name has no leading underscore, so other modules may import it.
        passed: the helper already has the fixture as a parameter (written so, or given it by
            an earlier fix of another engine it builds): its calls already pass it.
    """

    name: str
    callers: frozenset[int]
    public: bool
    passed: bool = False


def _enclosing(module: ModuleAnalysis, node: ast.AST) -> FunctionInfo | str:
    """The function whose body runs ``node``, or why there is none (module level, a default
    value or decorator)."""
    by_node = {id(f.node): f for f in module.functions}
    child, current = node, module.parent(node)
    while current is not None:
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not any(child is s for s in current.body):
                return f"a decorator or default value of `{current.name}()`"
            return by_node[id(current)]
        if isinstance(current, ast.Lambda):
            pass  # runs in the enclosing function, which sees its parameters
        child, current = current, module.parent(current)
    return "the module level"


def name_loads(module: ModuleAnalysis, name: str, node: ast.AST) -> Iterator[ast.Name | str]:
    """The loads of ``name``, the module-level function ``node`` defines, in ``module``'s
    breadth-first order; a reason (a ``str``, the last item) where the name is defined more
    than once, is also a parameter name or is rebound, so its uses are not all the
    function's."""
    for use in walk_breadth(module.tree):
        if isinstance(use, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and use.name == name and use is not node:
            yield f"`{name}` is defined more than once"
            return
        if isinstance(use, ast.arg) and use.arg == name:
            yield f"`{name}` is also a parameter name"
            return
        if not (isinstance(use, ast.Name) and use.id == name):
            continue
        if not isinstance(use.ctx, ast.Load):
            yield f"`{name}` is rebound in the module"
            return
        yield use


def helper_callers(module: ModuleAnalysis, func: FunctionInfo,
                   fixture: str) -> HelperCallers | str:
    """Whether every use of the helper ``func`` is a call that can pass it ``fixture``.

    Returns:
        The :class:`HelperCallers`, or the reason there is no fix: the helper is nested,
        decorated or rebound, is used other than by a plain call, or is called from a place
        that cannot request fixtures (module level, a helper, a method, a ``unittest`` class).
    """
    node = func.node
    name = node.name
    if not any(s is node for s in module.tree.body):
        return f"`{name}()` is not a module-level function, so its callers cannot pass it " \
               f"the `{fixture}` fixture"
    if node.decorator_list:
        return f"`{name}()` is decorated, and the decorator may not pass a `{fixture}` " \
               "parameter through"
    args = node.args
    if fixture in [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]:
        return HelperCallers(name, frozenset(), not name.startswith("_"), passed=True)
    callers: set[int] = set()
    calls = 0
    for use in name_loads(module, name, node):
        if isinstance(use, str):
            return use
        parent = module.parent(use)
        if not (isinstance(parent, ast.Call) and parent.func is use):
            return f"`{name}` is used other than by a call (line {use.lineno}), so not every " \
                   f"use can be given the `{fixture}` fixture"
        where = _enclosing(module, parent)
        if isinstance(where, str):
            return f"`{name}()` is called from {where} (line {use.lineno}), which cannot " \
                   f"request the `{fixture}` fixture"
        if where.kind not in (FunctionKind.TEST, FunctionKind.FIXTURE) or where.in_base_class:
            return f"`{name}()` is called from `{where.name}()` (line {use.lineno}), which " \
                   f"cannot request the `{fixture}` fixture"
        if where.node is node:
            return f"`{name}()` calls itself"
        if fixture not in where.params:
            callers.add(where.node.lineno)
        calls += 1
    if not calls:
        return (f"`{name}()` is not called in this module: its callers are in other "
                f"modules, and {ONE_MODULE}, so it cannot give the helper and every caller the "
                f"`{fixture}` fixture together")
    return HelperCallers(name, frozenset(callers), not name.startswith("_"))


def runner_through_callers(module: ModuleAnalysis, func: FunctionInfo,
                           fixture: str) -> HelperCallers | str:
    """With ``target = "vllm"``: how the helper ``func`` gets the runner fixture from its
    callers, or why it cannot, the reason starting with why the helper cannot simply build the
    runner itself (vLLM's ``VllmRunner`` lives in its tests/conftest.py). A public helper is
    left alone where others import it: outside test modules (``conftest.py``, utility
    modules), and in a test module another module of the tree imports."""
    cannot = "vLLM's `VllmRunner` lives in its tests/conftest.py, which a helper cannot " \
             "import, and "
    if func.kind is not FunctionKind.HELPER or func.in_base_class:
        return cannot + f"a method cannot request the `{fixture}` fixture"
    passed = helper_callers(module, func, fixture)
    if isinstance(passed, str):
        return cannot + passed
    others_import = (not is_test_module(module.path) or module.imported_by_tree) and \
        not module.private_to_tree
    if passed.public and not passed.passed and others_import:
        return cannot + f"`{passed.name}()` is public in a module others import: their " \
                        f"calls would need `{fixture}` too, and {ONE_MODULE} (the helper and " \
                        "its callers in other modules are not fixed together)"
    return passed

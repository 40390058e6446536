"""Functions a module runs as their own process (the child's exit frees what it
built, so GPU001/GPU004 leave them alone): a function passed to a configured
``process-launchers`` call (its ``target=``/``fn=`` or a positional argument:
``multiprocessing.Process(target=f)``, ``torch.multiprocessing.spawn(f, nprocs=2)``), or to a
launching method of what such a call returns (``ctx = multiprocessing.get_context("spawn");
ctx.Process(target=f)``, ``ProcessPoolExecutor().submit(f, x)``, ``pool.map(f, xs)``),
``functools.partial(f, ...)`` included; or to a launcher helper, a module-level function
that hands one of its parameters to such a call (``def run_in_child(target, **kw):
multiprocessing.Process(target=target, kwargs=kw)...``), in the module or imported from
another module of the tree (its summary, kind ``"p"``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

from lint_gpu_tests.parsing.source import walk_breadth, walk_nodes
from lint_gpu_tests.parsing.syntax import last_name, lines_naming, spans_a_line

LAUNCH_METHODS = frozenset({"Process", "Pool", "submit", "map", "imap", "imap_unordered",
                            "starmap", "map_async", "starmap_async", "apply", "apply_async"})
"""Methods of what a process launcher returns (a context, a pool, an executor) that run the
function they are given in a child process."""


Launch = tuple[int, str]
"""Which parameter of a launcher helper runs as its own process: its index among the
positional parameters (``-1`` for a keyword-only one) and its name."""


def process_targets(tree: ast.Module, text: str, imports: Mapping[str, str],
                    qualified: Callable[[ast.AST], str | None],
                    launchers: frozenset[str],
                    imported: Collection[str] = (),
                    imported_launch: Callable[[ast.expr], Launch | None] | None = None
                    ) -> tuple[set[str], dict[str, Launch]]:
    """Names of the functions ``tree`` hands to a process launcher, and its launcher
    helpers.

    Args:
        tree: the module, parsed from ``text``.
        text: its source.
        imports: its imports, local name -> qualified name.
        qualified: what an expression refers to in its scope
            (:meth:`lint_gpu_tests.analysis.analysis.ModuleAnalysis.qualified`).
        launchers: qualified names of the launching calls (config ``process-launchers``).
        imported: the names a call of a launcher helper of another module may spell (the
            local names of their imports and their own names).
        imported_launch: which parameter of an imported launcher helper a call's ``func``
            names runs as a process, else ``None``.

    Returns:
        The names passed as targets (plain names, or the first argument of a ``partial``),
        and the module-level functions that hand one of their parameters to a launcher, by
        name, with that parameter (:data:`Launch`).
    """
    values = list(_launched_values(tree, text, imports, qualified, launchers))
    targets = {name for _, value in values if (name := _function_name(value)) is not None}
    helpers: dict[str, Launch] = {}
    for stmt, value in values:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                (name := _function_name(value)) is not None and \
                (launch := _parameter(stmt, name)):
            helpers.setdefault(stmt.name, launch)  # ``pool.map(fn, items)``: the first
    words = {*helpers, *imported}
    if not words:
        return targets, helpers
    spelled = lines_naming(text, tuple(sorted(words)))
    for node in walk_nodes([s for s in tree.body if spans_a_line(s, spelled)]):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        launch = helpers.get(func.id) if isinstance(func, ast.Name) else None
        if launch is None and imported_launch is not None and \
                last_name(func) in words:
            launch = imported_launch(func)
        if launch is not None:
            index, param = launch
            values_at = [kw.value for kw in node.keywords if kw.arg == param]
            if 0 <= index < len(node.args) and not any(
                    isinstance(a, ast.Starred) for a in node.args[:index + 1]):
                values_at.append(node.args[index])
            targets.update(name for value in values_at
                           if (name := _function_name(value)) is not None)
    return targets, helpers


def spells_a_launcher(source: str | bytes, launchers: Iterable[str]) -> bool:
    """Whether ``source`` (a module's text or bytes) spells every segment of one launcher's
    qualified name: however it is imported or aliased, a call that resolves to a launcher
    spells each somewhere (the import the module part, attributes the rest), so a module
    lacking one cannot call it, nor define a launcher helper."""
    if isinstance(source, bytes):
        return any(all(part.encode() in source for part in q.split(".")) for q in launchers)
    return any(all(part in source for part in q.split(".")) for q in launchers)


def _function_name(value: ast.expr) -> str | None:
    """The function ``value`` hands over: a plain name, or the first argument of a
    ``partial(...)``."""
    if isinstance(value, ast.Call) and last_name(value.func) == "partial" and value.args:
        value = value.args[0]
    return value.id if isinstance(value, ast.Name) else None


def _parameter(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> Launch | None:
    """The parameter ``name`` of ``func`` (:data:`Launch`) where the function never rebinds
    it, else ``None``."""
    args = func.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    if name in positional:
        index = positional.index(name)
    elif name in (a.arg for a in args.kwonlyargs):
        index = -1
    else:
        return None
    if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
           for n in walk_nodes(func.body)):
        return None
    return index, name


def _launched_values(tree: ast.Module, text: str, imports: Mapping[str, str],
                     qualified: Callable[[ast.AST], str | None],
                     launchers: frozenset[str]) -> Iterator[tuple[ast.stmt, ast.expr]]:
    """What ``tree`` hands to a launching call as the function to run, with the top-level
    statement holding the call."""
    if not spells_a_launcher(text, launchers):
        return
    handles: set[str] = set()  # names bound to what a launcher returns
    # What ``a.b.X`` refers to ends in ``.X``: an attribute that is no launcher's last name
    # cannot be one, whatever ``a`` is (no lookup).
    last_names = frozenset(q.rsplit(".", 1)[-1] for q in launchers)

    def is_launcher(func: ast.expr) -> bool:
        if isinstance(func, ast.Attribute) and func.attr not in last_names:
            return False
        return qualified(func) in launchers

    def launched(expr: ast.AST) -> bool:
        if not isinstance(expr, ast.Call):
            return False
        func = expr.func
        return is_launcher(func) or (
            isinstance(func, ast.Attribute) and func.attr in LAUNCH_METHODS and (
                isinstance(func.value, ast.Name) and func.value.id in handles
                or launched(func.value)))

    # A launching call spells a launcher's last name, a name an import binds to one, or
    # a launching method; only the top-level statements that do need walking. A method
    # launches only on what a launcher call returned, so without such a call (found in
    # the statements spelling a launcher) nothing is launched.
    names = set(last_names)
    names.update(name for name, full in imports.items() if full in launchers)
    spelled = lines_naming(text, tuple(sorted(names)))
    if not any(isinstance(node, ast.Call) and is_launcher(node.func)
               for s in tree.body if spans_a_line(s, spelled) for node in walk_breadth(s)):
        return
    lines = lines_naming(text, tuple(sorted(names | LAUNCH_METHODS)))
    calls: list[tuple[ast.stmt, ast.Call]] = []
    binders: list[ast.Assign | ast.With | ast.AsyncWith] = []
    for stmt in tree.body:
        if not spans_a_line(stmt, lines):
            continue
        for node in walk_nodes([stmt]):
            if isinstance(node, ast.Call):
                calls.append((stmt, node))
            elif isinstance(node, (ast.Assign, ast.With, ast.AsyncWith)):
                binders.append(node)
    for _ in range(2):  # ``ctx = get_context(); pool = ctx.Pool()``
        for binder in binders:
            pairs: list[tuple[ast.expr, ast.expr | None]]
            if isinstance(binder, ast.Assign):
                pairs = [(binder.value, t) for t in binder.targets]
            else:
                pairs = [(i.context_expr, i.optional_vars) for i in binder.items]
            handles.update(t.id for value, t in pairs
                           if isinstance(t, ast.Name) and launched(value))
    for stmt, call in calls:
        func = call.func
        if not (launched(call) or (isinstance(func, ast.Attribute)
                                   and func.attr in LAUNCH_METHODS
                                   and launched(func.value))):
            continue
        for value in [*call.args, *(kw.value for kw in call.keywords
                                    if kw.arg in ("target", "fn", "func"))]:
            yield stmt, value

"""Functions a module runs as their own process (the child's exit frees what it
built, so GPU001/GPU004 leave them alone): a function passed to a configured
``process-launchers`` call (its ``target=``/``fn=`` or a positional argument:
``multiprocessing.Process(target=f)``, ``torch.multiprocessing.spawn(f, nprocs=2)``), or to a
launching method of what such a call returns (``ctx = multiprocessing.get_context("spawn");
ctx.Process(target=f)``, ``ProcessPoolExecutor().submit(f, x)``, ``pool.map(f, xs)``),
``functools.partial(f, ...)`` included.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

from lint_gpu_tests.parsing.source import walk_breadth, walk_nodes
from lint_gpu_tests.parsing.syntax import last_name, lines_naming, spans_a_line

LAUNCH_METHODS = frozenset({"Process", "Pool", "submit", "map", "imap", "imap_unordered",
                            "starmap", "map_async", "starmap_async", "apply", "apply_async"})
"""Methods of what a process launcher returns (a context, a pool, an executor) that run the
function they are given in a child process."""


def process_targets(tree: ast.Module, text: str, imports: Mapping[str, str],
                    qualified: Callable[[ast.AST], str | None],
                    launchers: frozenset[str]) -> set[str]:
    """Names of the functions ``tree`` hands to a process launcher.

    Args:
        tree: the module, parsed from ``text``.
        text: its source.
        imports: its imports, local name -> qualified name.
        qualified: what an expression refers to in its scope
            (:meth:`lint_gpu_tests.analysis.analysis.ModuleAnalysis.qualified`).
        launchers: qualified names of the launching calls (config ``process-launchers``).

    Returns:
        The names passed as targets (plain names, or the first argument of a ``partial``).
    """
    # However it is imported or aliased, a call that resolves to a launcher spells every
    # segment of its qualified name somewhere (the import the module part, attributes
    # the rest), so a module lacking one cannot call it.
    if not any(all(part in text for part in q.split(".")) for q in launchers):
        return set()
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
        return set()
    lines = lines_naming(text, tuple(sorted(names | LAUNCH_METHODS)))
    calls: list[ast.Call] = []
    binders: list[ast.Assign | ast.With | ast.AsyncWith] = []
    for node in walk_nodes([s for s in tree.body if spans_a_line(s, lines)]):
        if isinstance(node, ast.Call):
            calls.append(node)
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
    targets: set[str] = set()
    for call in calls:
        func = call.func
        if not (launched(call) or (isinstance(func, ast.Attribute)
                                   and func.attr in LAUNCH_METHODS
                                   and launched(func.value))):
            continue
        values = [*call.args, *(kw.value for kw in call.keywords
                                if kw.arg in ("target", "fn", "func"))]
        for value in values:
            if isinstance(value, ast.Call) and last_name(value.func) == "partial" \
                    and value.args:
                value = value.args[0]
            if isinstance(value, ast.Name):
                targets.add(value.id)
    return targets

"""Per-scope name resolution, as pyflakes' and ruff's semantic models do it: which import a
name loaded inside a function, lambda, class body or comprehension refers to, when that
scope (or one around it) rebinds the name (a parameter, a local assignment, a loop target,
a local import, an alias ``Engine = LLM``).

:class:`ScopeIndex` is what :class:`lint_gpu_tests.analysis.analysis.ModuleAnalysis` asks. It
resolves a top-level statement when a name in it is first asked about, and walks it only
when it can bind an imported name somewhere inside (a cheap look at its statements and
text): a load anywhere else resolves through the module's imports, which needs no walk.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from lint_gpu_tests.parsing.source import TopLevel, first_line, reversed_child_fields
from lint_gpu_tests.parsing.syntax import (
    dotted_name,
    head_name,
    iter_statements,
    parameter_names,
)

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                *_COMPREHENSIONS)
#: A binding of a name in a scope: the qualified name it imports, an expression it is
#: assigned (``Engine = LLM``: an alias of what that expression refers to), or ``None``
#: (anything else: a parameter, a loop or with target, a def, a ``del``...).
_Binding = str | ast.expr | None
#: Marks a load that resolves at module level (through the imports), not in a scope.
_MODULE = "<module>"
#: The targets of a comprehension's ``for ... in`` and a lambda's parameters, on one line.
_EXPRESSION_BINDERS = re.compile(r"\bfor\b(.*?)\bin\b|\blambda\b([^:]*):")
_IDENTIFIER = re.compile(r"\w+")


class ScopeIndex:
    """The per-scope meaning of the names of one module, worked out one top-level statement
    at a time, when a name in it is first asked about.

    A load's meaning depends only on the scopes around it, all inside its top-level
    statement, so each statement is resolved on its own, and only if it can bind an
    imported name somewhere inside (a cheap look at its statements and lines of text: it
    may say yes when there is nothing, never no when there is something).

    Args:
        tree: the module, parsed from ``text``.
        imports: the module's imports, local name -> qualified name (``{"LLM":
            "vllm.LLM"}``).
        text: the module's source, for the bindings inside expressions.
        top: the ids of the module's statements in its own scope (not inside a def or
            class), when the caller has them; else found on first need.
    """

    def __init__(self, tree: ast.Module, imports: Mapping[str, str], text: str,
                 top: set[int] | None = None) -> None:
        self.tree = tree
        self.imports = imports
        self.text = text
        self.resolved: dict[int, str | None] = {}
        self._done: set[int] = set()
        self._statements = TopLevel(tree.body)
        self._top: set[int] | None = top
        self._lines: list[str] | None = None

    def lookup(self, name: ast.Name) -> tuple[bool, str | None]:
        """``(True, meaning)`` when a scope around the load ``name`` gives it another
        meaning than the module's imports do: a qualified name (a local import, an alias of
        one) or ``None`` (not an import); ``(False, None)`` when the imports decide."""
        if not self.imports:
            return False, None
        key = id(name)
        if key not in self.resolved:
            for stmt in self._statements.at(name.lineno):
                if id(stmt) not in self._done:
                    self._done.add(id(stmt))
                    self._resolve(stmt)
        if key in self.resolved:
            return True, self.resolved[key]
        return False, None

    def _resolve(self, stmt: ast.stmt) -> None:
        tracked = set(self.imports)
        if self._top is None:
            self._top = {id(s) for s in iter_statements(self.tree.body, definitions=False)}
        if not _binds(stmt, tracked, self._top):
            if self._lines is None:
                self._lines = self.text.splitlines()
            if not _expressions_bind(self._lines[first_line(stmt) - 1:
                                                 stmt.end_lineno or stmt.lineno], tracked):
                return
        self.resolved.update(_ScopeResolver(self.imports).run([stmt]))


def _binds(statement: ast.stmt, tracked: set[str], top: set[int]) -> bool:
    """Whether a statement inside ``statement`` binds (or, in a function, aliases) a name of
    ``tracked`` in a scope other than the module's (``top``: ids of the module-level
    statements, whose bindings
    :attr:`~lint_gpu_tests.analysis.analysis.ModuleAnalysis.local_shadowed` covers)."""
    for stmt in iter_statements([statement]):
        bound: list[str] = []
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.append(stmt.name)
            if not isinstance(stmt, ast.ClassDef):
                bound += parameter_names(stmt.args)
        elif id(stmt) in top:
            continue  # the module's own bindings
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            bound += [a.asname or a.name.split(".")[0] for a in stmt.names]
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For,
                               ast.AsyncFor, ast.With, ast.AsyncWith, ast.Delete)):
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None \
                    and head_name(stmt.value) in tracked:
                return True  # a local alias of an import, followed in its scope
            targets: list[ast.AST] = (
                list(stmt.targets) if isinstance(stmt, (ast.Assign, ast.Delete)) else
                [i.optional_vars for i in stmt.items if i.optional_vars is not None]
                if isinstance(stmt, (ast.With, ast.AsyncWith)) else [stmt.target])
            while targets:  # names, through tuples and starred (attributes bind none)
                target = targets.pop()
                if isinstance(target, ast.Name):
                    bound.append(target.id)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    targets.extend(target.elts)
                elif isinstance(target, ast.Starred):
                    targets.append(target.value)
        elif isinstance(stmt, ast.Try):
            bound += [h.name for h in stmt.handlers if h.name]
        elif isinstance(stmt, ast.Match):
            return True
        if tracked.intersection(bound):
            return True
    return False


def _expressions_bind(lines: list[str], tracked: set[str]) -> bool:
    """Whether ``lines`` may hold a walrus, or a comprehension or lambda binding a name of
    ``tracked``."""
    for line in lines:
        if ":=" in line:
            return True
        if "for" in line or "lambda" in line:
            for found in _EXPRESSION_BINDERS.finditer(line):
                binders = found.group(1) or found.group(2) or ""
                if tracked.intersection(_IDENTIFIER.findall(binders)):
                    return True
    return False


@dataclass
class _Scope:
    """One scope of a module (function, lambda, class body or comprehension): the bindings
    of the names the module imports, and its ``global``/``nonlocal`` declarations."""

    kind: str
    parent: _Scope | None
    bound: dict[str, list[_Binding]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)


def _scope_parts(node: ast.AST) -> tuple[list[ast.AST], list[ast.AST]]:
    """The parts of a scope node evaluated in the enclosing scope (decorators, defaults,
    annotations, bases, a comprehension's first iterable) and those in its own scope."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        outer: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d)]
        if not isinstance(node, ast.Lambda):
            outer += node.decorator_list
            outer += [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                             args.vararg, args.kwarg)
                      if a is not None and a.annotation is not None]
            if node.returns is not None:
                outer.append(node.returns)
        params: list[ast.AST] = [a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                             args.vararg, args.kwarg) if a is not None]
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        return outer, [*params, *body]
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords], list(node.body)
    assert isinstance(node, _COMPREHENSIONS)
    first, *rest = node.generators
    inner: list[ast.AST] = [first.target, *first.ifs, *rest]
    inner += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    return [first.iter], inner


class _ScopeResolver:
    """Resolves names per scope, as pyflakes' and ruff's semantic models do: a parameter,
    local assignment, loop target, class attribute or comprehension variable named like an
    import shadows it for the loads in that scope (``global``/``nonlocal`` followed; class
    bodies are not seen from the functions inside them). Only the names the module imports
    are tracked: no other name can resolve to a qualified name.

    The result, :attr:`resolved`, maps ``id()`` of each shadowed ``ast.Name`` load to what
    it refers to: a qualified name (a local import, or an alias ``Engine = LLM`` of one)
    or ``None`` (not an import). Loads that resolve at module level are left out.
    """

    def __init__(self, imports: Mapping[str, str]) -> None:
        self.imports = imports
        self.tracked = set(imports)
        self.loads: dict[int, tuple[str, _Scope]] = {}
        self.resolved: dict[int, str | None] = {}
        self._busy: set[int] = set()

    def run(self, statements: list[ast.stmt]) -> dict[int, str | None]:
        """Walk ``statements`` (of the module's body) and resolve every load of a tracked
        name inside a scope in them."""
        pending: list[tuple[ast.AST, _Scope | None]] = []
        self._walk(list(statements), None, pending)  # module level: loads resolve via imports
        while pending:
            node, parent = pending.pop()
            scope = _Scope("comprehension" if isinstance(node, _COMPREHENSIONS) else
                           "class" if isinstance(node, ast.ClassDef) else "function", parent)
            self._walk(_scope_parts(node)[1], scope, pending)
        for key, (name, scope) in self.loads.items():
            self.resolved[key] = self._resolve(key, name, scope)
        return {k: v for k, v in self.resolved.items() if v != _MODULE}

    def _walk(self, nodes: list[ast.AST], scope: _Scope | None,
              pending: list[tuple[ast.AST, _Scope | None]]) -> None:
        """Record the bindings and loads of ``nodes`` in ``scope`` (``None``: module level),
        queueing the scopes nested in them."""
        tracked = self.tracked
        stack = list(reversed(nodes))  # source order: an alias is bound before its uses
        module_scope = _Scope("module", None)
        here = scope or module_scope
        while stack:
            node = stack.pop()
            if isinstance(node, _SCOPE_NODES):
                stack.extend(reversed(_scope_parts(node)[0]))
                pending.append((node, here))
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self._bind(here, node.name, None)
                continue
            if isinstance(node, ast.Name):
                if node.id in tracked:
                    if isinstance(node.ctx, ast.Load):
                        if scope is not None:
                            self.loads[id(node)] = (node.id, scope)
                    else:
                        self._bind(here, node.id, None)
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    name = targets[0].id
                    if name not in tracked and scope is not None and \
                            head_name(node.value) in tracked:
                        tracked.add(name)  # a local alias of an import: ``Engine = LLM``
                    if name in tracked:
                        self._bind(here, name, node.value)
                    if isinstance(node, ast.AnnAssign):
                        stack.append(node.annotation)
                    stack.append(node.value)
                    continue
            elif isinstance(node, ast.arg):  # a parameter; its annotation is outside
                self._bind(here, node.arg, None)
                continue
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self._bind(here, local, alias.name if alias.asname else local)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name != "*":
                        self._bind(here, alias.asname or alias.name,
                                   f"{node.module}.{alias.name}" if node.module and
                                   node.level == 0 else None)
            elif isinstance(node, ast.Global):
                here.globals.update(node.names)
            elif isinstance(node, ast.Nonlocal):
                here.nonlocals.update(node.names)
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
                if node.name is not None:
                    self._bind(here, node.name, None)
            elif isinstance(node, ast.MatchMapping) and node.rest is not None:
                self._bind(here, node.rest, None)
            for name in reversed_child_fields(node.__class__):  # children, last first
                value = getattr(node, name, None)
                if value.__class__ is list:
                    stack.extend(item for item in reversed(value) if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append(value)

    def _bind(self, scope: _Scope, name: str, binding: _Binding) -> None:
        if name in self.tracked and scope.kind != "module":
            scope.bound.setdefault(name, []).append(binding)

    def _owner(self, name: str, scope: _Scope) -> _Scope | None:
        """The scope whose binding a load of ``name`` in ``scope`` sees (``None``: module)."""
        current: _Scope | None = scope
        first = True
        while current is not None and current.kind != "module":
            if name in current.globals:
                return None
            if name not in current.nonlocals and name in current.bound and (
                    first or current.kind != "class"):
                return current
            first = False
            current = current.parent
        return None

    def _resolve(self, key: int, name: str, scope: _Scope) -> str | None:
        if key in self.resolved:
            return self.resolved[key]
        owner = self._owner(name, scope)
        if owner is None:
            return _MODULE
        if key in self._busy:  # an alias cycle (``a = b`` / ``b = a``)
            return None
        self._busy.add(key)
        values: set[str | None] = set()
        for binding in owner.bound[name]:
            if binding is None or isinstance(binding, str):
                values.add(binding)
            else:
                values.add(self._resolve_expr(binding))
        self._busy.discard(key)
        result = values.pop() if len(values) == 1 else None
        self.resolved[key] = result
        return result

    def _resolve_expr(self, expr: ast.expr) -> str | None:
        """The qualified name ``expr`` (an alias's value) refers to, or ``None``."""
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        head_node = expr
        while isinstance(head_node, ast.Attribute):
            head_node = head_node.value
        head, _, rest = dotted.partition(".")
        loaded = self.loads.get(id(head_node))
        if loaded is not None:
            base = self._resolve(id(head_node), *loaded)
            if base != _MODULE:
                return f"{base}.{rest}" if base and rest else base
        base = self.imports.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

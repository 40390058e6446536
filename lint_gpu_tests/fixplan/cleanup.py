"""Recognising manual cleanup: statements and finalizers that tear an engine down.

The runner's block does the teardown itself, so the fix deletes what only cleans up
(``del llm``, ``llm.shutdown()``, ``gc.collect()``, ``cleanup_dist_env_and_memory()``,
``request.addfinalizer(llm.shutdown)``, a ``try/finally`` that only cleans up):
:class:`CleanupRecognizer` (a base of
:class:`~lint_gpu_tests.fixplan.planner.Planner`) says which statements those are, and
:func:`cleanup_beyond_the_runner` when deleting one does more than the runner's teardown.
"""

from __future__ import annotations

import ast

from lint_gpu_tests.analysis.analysis import FUNCTION_SCOPES, ModuleAnalysis, statement_block
from lint_gpu_tests.fixplan.blocks import StatementLayout, loads_of, walk_statements
from lint_gpu_tests.fixplan.flow import FINALIZER_CALLS
from lint_gpu_tests.parsing.source import walk_breadth, walk_nodes
from lint_gpu_tests.parsing.syntax import last_name, names_in, none_test

#: Methods whose call on an engine (or on its runner) ends its life as ``del`` of its last
#: reference does: ``shutdown()`` (``LLM``, the engine core), ``close()`` (the engine
#: clients), ``__exit__`` (a runner entered by hand).
END_METHODS = frozenset({"shutdown", "close", "__exit__"})


def ends_engine(module: ModuleAnalysis, node: ast.AST, names: set[str], *,
                chain: bool = True) -> bool:
    """True for a call that ends the life of the engine (or runner, or ``ExitStack``) a
    name of ``names`` holds: ``name.shutdown()``, ``name.close()``, ``name.__exit__(...)``,
    and with ``chain`` the same through attributes (``runner.llm.shutdown()``,
    ``llm.llm_engine.engine_core.shutdown()``). These are the shutdowns GPU003 reports in a
    finalizer (:meth:`CleanupRecognizer.finalizer_engine`) and GPU004 as manual cleanup
    (``shutdown``/``__exit__`` of the engine, the engine core's ``shutdown()``); GPU007
    ends an engine's live range at them."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in END_METHODS):
        return False
    target = node.func.value
    if chain:
        while isinstance(target, ast.Attribute):
            target = target.value
    return isinstance(target, ast.Name) and target.id in names


class CleanupRecognizer(StatementLayout):
    """Which statements of one analysed module only clean an engine up."""

    def is_cleanup_statement(self, stmt: ast.stmt, names: set[str]) -> bool:
        """True when ``stmt`` only does manual cleanup of an engine in ``names`` (or the
        process-wide cleanup GPU004 lists (docs/rules.md)), or registers such a finalizer."""
        module = self.module
        if isinstance(stmt, ast.Delete):
            return all(isinstance(t, ast.Name) and t.id in names for t in stmt.targets)
        if isinstance(stmt, (ast.Assign, ast.Try)):
            return self.release_idiom(stmt, names) is not None
        if isinstance(stmt, ast.If):
            # ``if llm is not None: llm.shutdown()``: cleanup guarded by the engine's presence.
            return not stmt.orelse and any(none_test(stmt.test, name) == "some"
                                           for name in names) and all(
                self.is_cleanup_statement(s, names) for s in stmt.body)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            kind = module.cleanup_call_kind(call)
            if kind is not None:
                if kind == "engine_core.shutdown()":
                    return bool(names_in(call.func) & names)
                args_names = set().union(*(names_in(a) for a in call.args)) if call.args else set()
                return not args_names or bool(args_names & names)
            if last_name(call.func) in ("shutdown", "__exit__") and isinstance(
                    call.func, ast.Attribute):
                return isinstance(call.func.value, ast.Name) and call.func.value.id in names
            if self.finalizer_engine(call, names):
                return True
        return False

    def release_idiom(self, stmt: ast.stmt, names: set[str]) -> list[ast.stmt] | None:
        """The statements of the proxy-then-delete idiom that ``stmt`` opens, or ``None``:
        ``x = weakref.proxy(x)`` directly followed by ``del x`` (``x`` in ``names``: only a
        proxy is left, then not even that), or a ``try`` whose body is only such cleanup
        and whose every handler is ``except UnboundLocalError`` (or ``NameError``, a tuple
        of both) doing nothing but ``pass``, no ``else``/``finally`` (the guard for a test
        whose construction raised before binding the name). The runner's block drops the
        engine itself, so the whole idiom is cleanup."""
        if isinstance(stmt, ast.Try):
            if stmt.orelse or stmt.finalbody or not stmt.handlers or not stmt.body or not all(
                    _swallows_unbound(h) for h in stmt.handlers):
                return None
            body = stmt.body
            if len(body) == 2 and self.release_idiom(body[0], names) is not None:
                return [stmt]
            if all(isinstance(s, ast.Delete) or (isinstance(s, ast.Expr) and isinstance(
                    s.value, ast.Call)) for s in body) and all(
                    self.is_cleanup_statement(s, names) for s in body) and any(
                    isinstance(s, ast.Delete) for s in body):
                return [stmt]
            return None
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in names):
            return None
        name = stmt.targets[0].id
        value = stmt.value
        if not (isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords
                and self.module.qualified(value.func) == "weakref.proxy"
                and isinstance(value.args[0], ast.Name) and value.args[0].id == name):
            return None
        block = statement_block(self.module, stmt)
        if block is None:
            return None
        index = next(i for i, s in enumerate(block) if s is stmt)
        after = block[index + 1] if index + 1 < len(block) else None
        if isinstance(after, ast.Delete) and len(after.targets) == 1 and isinstance(
                after.targets[0], ast.Name) and after.targets[0].id == name:
            return [stmt, after]
        return None

    def finalizer_engine(self, call: ast.Call, names: set[str]) -> bool:
        """True for ``request.addfinalizer(f)``/``atexit.register(f)``/``stack.callback(f)``
        where ``f`` shuts down an engine in ``names`` (attribute chain, lambda or partial)."""
        name = last_name(call.func)
        if name not in FINALIZER_CALLS or not call.args:
            return False
        if name == "register" and self.module.qualified(call.func) != "atexit.register":
            return False
        target = call.args[0]
        mentioned = set().union(*(names_in(a) for a in call.args))
        if not (mentioned & names):
            return False
        if isinstance(target, ast.Attribute):
            return target.attr in END_METHODS
        if isinstance(target, ast.Lambda):
            body = target.body
            return isinstance(body, ast.Call) and (
                last_name(body.func) in ("shutdown", "__exit__")
                or self.module.cleanup_call_kind(body) is not None
            )
        return False

    def finally_only_cleans(self, node: ast.Try, names: set[str]) -> bool:
        """True for ``try/finally`` (no ``except``/``else``) whose finally only cleans up."""
        return (
            not node.handlers
            and not node.orelse
            and bool(node.finalbody)
            and all(self.is_cleanup_statement(s, names) for s in node.finalbody)
        )

    def _nested_cleanup(self, segment: list[ast.stmt], names: set[str], all_engines: set[str],
                        use_names: set[str], remove: set[int]) -> set[int]:
        """Cleanup statements nested in the segment's compound statements (``del llm``
        inside ``with llm.deprecate_legacy_api():``, after the fixture's ``yield``) that
        come after every use of the engine: the runner does them, so they go too."""
        candidates: list[ast.stmt] = []
        for top in segment:
            if top.lineno in remove:
                continue
            for node in walk_statements(top):
                if node is top or not isinstance(node, (ast.Delete, ast.Expr)):
                    continue
                if self.on_header_line(node) or self.shares_line(node):
                    continue
                if self.is_cleanup_statement(node, all_engines if names else set()) and (
                        names_in(node) & names or not names_in(node) & all_engines) \
                        and not self._in_loop(node, top):
                    candidates.append(node)
        if not candidates:
            return set()
        inside = {id(n) for c in candidates for n in walk_breadth(c)}
        last_use = max((n.lineno for top in segment if top.lineno not in remove
                        for n in walk_breadth(top) if isinstance(n, ast.Name)
                        and n.id in use_names and id(n) not in inside), default=0)
        return {c.lineno for c in candidates if c.lineno > last_use}

    def _del_uses_earlier_binding(self, func: ast.AST, site: ast.stmt, before: list[ast.stmt],
                                  rest: list[ast.stmt], names: set[str]) -> bool:
        """True when the engine's name was bound before ``site`` and nothing after the site
        but cleanup reads it: the cleanup is then what uses that earlier binding. A binding
        that a ``del`` of the site's own block (``before``: its statements ahead of the
        site) ends first reaches no statement after the site (two engines in turn: ``llm =
        LLM(); ...; del llm; llm = LLM(); ...; del llm``)."""
        last = max((n.lineno for n in walk_breadth(func) if isinstance(n, ast.Name)
                    and n.id in names and isinstance(n.ctx, ast.Store)
                    and n.lineno < site.lineno), default=None)
        if last is None or any(isinstance(s, ast.Delete) and s.lineno > last and any(
                isinstance(t, ast.Name) and t.id in names for t in s.targets) for s in before):
            return False
        return not any(loads_of(s, n) for s in rest for n in names
                       if not self.is_cleanup_statement(s, names))


_UNBOUND_ERRORS = frozenset({"UnboundLocalError", "NameError"})


def _swallows_unbound(handler: ast.ExceptHandler) -> bool:
    """``except UnboundLocalError: pass`` (or ``NameError``, or a tuple of both), bound to
    no name."""
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.name is None and bool(kinds) and all(
        isinstance(k, ast.Name) and k.id in _UNBOUND_ERRORS for k in kinds) and all(
        isinstance(s, ast.Pass) for s in handler.body)


def cleanup_beyond_the_runner(module: ModuleAnalysis, func: ast.AST,
                               remove: set[int]) -> str | None:
    """Why removing the cleanup on the lines ``remove`` changes behaviour, or ``None``: the
    runner's teardown calls ``cleanup_dist_env_and_memory()`` without arguments
    (``lint_gpu_tests/runtime/runner.py``), so a call that passes any (``shutdown_ray=True``)
    does more than the runner will; and it reports a step that fails as a warning, so a
    cleanup in a ``try`` whose handler may raise (re-raises what it does not expect) no
    longer fails the test where it did."""
    for node in walk_breadth(func):
        if not (isinstance(node, ast.Expr) and node.lineno in remove
                and isinstance(node.value, ast.Call)):
            continue
        text = ast.get_source_segment(module.text, node.value) or "the call"
        if module.cleanup_call_kind(node.value) == "cleanup_dist_env_and_memory()" and \
                (node.value.args or node.value.keywords):
            return (f"`{text}` does more than the runner's teardown, which calls "
                    "`cleanup_dist_env_and_memory()` without arguments")
        handled = _raising_handler(module, node, func)
        if handled is not None:
            return (f"`{text}` fails into the `except` of line {handled.lineno}, which may "
                    "raise; the runner's teardown reports a failing step as a warning, so "
                    "what that handler raises no longer fails the test")
    return None


def _raising_handler(module: ModuleAnalysis, stmt: ast.stmt, func: ast.AST
                     ) -> ast.ExceptHandler | None:
    """The first ``except`` clause holding a ``raise`` (``if ...: raise``: it lets through
    what it does not expect) of a ``try`` (inside ``func``) whose body holds ``stmt``, else
    ``None``."""
    child: ast.AST = stmt
    parent = module.parent(stmt)
    while parent is not None and parent is not func:
        if isinstance(parent, ast.Try) and any(b is child for b in parent.body):
            for handler in parent.handlers:
                if any(isinstance(n, ast.Raise)
                       for n in walk_nodes(handler.body, (*FUNCTION_SCOPES, ast.ClassDef))):
                    return handler
        child, parent = parent, module.parent(parent)
    return None

"""GPU008's detection: hand-made changes of configured environment variables in tests,
fixtures, xunit functions and test modules' top level (:func:`find_mutations`), and what
restores them. The rule (``rules/gpu008_environment_mutated_without_isolation.py``) reports
what this finds; its fix planning (:mod:`lint_gpu_tests.fixplan.env`) reads it too.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from lint_gpu_tests.analysis.analysis import (
    FunctionInfo,
    FunctionKind,
    ModuleAnalysis,
    environment_reads,
    is_isolated,
    is_test_module_path,
    literal_value,
    local_names,
    module_constants,
    statement_block,
)
from lint_gpu_tests.parsing.prefilter import ENVIRONMENT_CHANGE, changes_environment, names_variable
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import (
    fixture_decorator,
    is_main_guard,
    last_name,
    lines_matching,
    spans_a_line,
)

#: pytest's xunit-style setup and teardown functions and methods (no fixtures reach them).
XUNIT_FUNCTIONS = frozenset({
    "setup_module", "teardown_module", "setup_function", "teardown_function",
    "setup_method", "teardown_method", "setup_class", "teardown_class",
    "setUp", "tearDown", "setUpClass", "tearDownClass", "setUpModule", "tearDownModule",
    "setup", "teardown",
})
#: Each xunit setup and the teardown that undoes it (pytest's and unittest's names).
TEARDOWN_OF = {
    "setUp": "tearDown", "setup_method": "teardown_method", "setUpClass": "tearDownClass",
    "setup_class": "teardown_class", "setup_module": "teardown_module",
    "setUpModule": "tearDownModule", "setup_function": "teardown_function",
    "setup": "teardown",
}
#: The teardowns that run after every test of their class (or, ``teardown_function``, of
#: their module): they restore what a test itself changed, too.
PER_TEST_TEARDOWNS = frozenset({"tearDown", "teardown_method", "teardown_function",
                                "teardown"})
#: ``unittest``'s test case classes: their methods restore through ``addCleanup``.
UNITTEST_CASES = frozenset({
    "unittest.TestCase", "unittest.IsolatedAsyncioTestCase", "unittest.case.TestCase",
    "unittest.async_case.IsolatedAsyncioTestCase",
})
#: ``unittest``'s cleanup registrations (``self.addCleanup(...)``, ``cls.addClassCleanup``,
#: ``unittest.addModuleCleanup``).
ADD_CLEANUP = frozenset({"addCleanup", "addClassCleanup", "addModuleCleanup"})
#: ``os.environ`` methods that change it, and whether they remove a variable.
ENVIRON_METHODS = {"update": False, "setdefault": False, "pop": True}
#: ``os`` functions that change the C environment only.
OS_FUNCTIONS = {"os.putenv": False, "os.unsetenv": True}
_ALIASED = re.compile(rb"(?:[\s\\)]|#[^\n]*)*as(?![A-Za-z0-9_])")
#: :data:`~lint_gpu_tests.parsing.prefilter.ENVIRONMENT_CHANGE` for the module's text.
_CHANGE = re.compile(ENVIRONMENT_CHANGE.pattern.decode("ascii"))
#: ``pytest``'s ``MonkeyPatch`` class, as its qualified names spell it.
MONKEYPATCH_CLASSES = frozenset({"pytest.MonkeyPatch", "_pytest.monkeypatch.MonkeyPatch"})
C_ENV_ONLY = ("`os.putenv`/`os.unsetenv` change only the environment of child processes, "
              "not `os.environ`; `monkeypatch` changes both")


@dataclass(frozen=True)
class EnvMutation:
    """One hand-made change of configured environment variables.

    Attributes:
        node: what is reported (the assignment, ``del`` or the call).
        statement: the statement holding it.
        function: the enclosing test, fixture or xunit function; ``None`` at module level.
        removes: the change removes variables (``del``, ``.pop``, ``os.unsetenv``).
        names: the configured variable names it changes, in source order.
        rewritable: the statement has a shape the codemod rewrites (see the rule's *Fix
            safety*; :mod:`lint_gpu_tests.codemods.use_monkeypatch_env` does it).
        reason: why it is not rewritable; for a rewritable one, why the rewrite is unsafe
            (or ``""``).
        function_name: ``os.putenv``/``os.unsetenv`` when the change is a call of one (it
            changes the process environment only, not ``os.environ``); else ``""``.
        patcher: for a ``setenv``/``delenv`` of a ``pytest.MonkeyPatch()`` that nothing
            undoes, the instance as written (``mp``, ``pytest.MonkeyPatch()``); else ``""``.
    """

    node: ast.AST
    statement: ast.stmt
    function: FunctionInfo | None
    removes: bool
    names: tuple[str, ...]
    rewritable: bool
    reason: str = ""
    function_name: str = ""
    patcher: str = ""



def configured(name: str, patterns: tuple[str, ...]) -> bool:
    """True when ``name`` matches one of the ``environment-variables`` patterns
    (``fnmatch``, case-sensitive as environment names are)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def find_mutations(module: ModuleAnalysis) -> list[EnvMutation]:
    """Every hand-made change of a configured variable that is not isolated, in source
    order: in tests, fixtures and xunit functions, and at module level of a test module
    other than ``conftest.py``, less what a function-scoped autouse fixture, or one the
    function requests, restores after each test (:func:`_restored_by_a_fixture`) and the
    removals of a fixture that clears leaked variables (:func:`_clears_a_leak`) or puts
    back what it saved (:func:`_restores_a_saved_value`), and the changes inside a ``try``
    whose ``finally`` puts back what the function saved before it
    (:func:`_restored_in_finally`). Found once per analysis (the rule asks, and so does
    the plan of each change in a fixture or a ``unittest`` method); each call returns a
    new list."""
    return list(module.derived(_find_mutations))


def _find_mutations(module: ModuleAnalysis) -> list[EnvMutation]:
    lines = _change_lines(module)
    if lines == []:
        return []
    finder = _Finder(module)
    out: list[EnvMutation] = []
    if os.path.basename(module.path) != "conftest.py" and is_test_module_path(
            module.path, module.config):
        # Only modules pytest imports by their name run their top level in the session.
        body = [s for s in module.tree.body if lines is None or spans_a_line(s, lines)]
        out += finder.scan(list(_module_level_nodes(body)), None)
    for func in module.functions:
        if (lines is not None and not spans_a_line(func.node, lines)) or \
                not _watched(module, func) or is_isolated(func) or \
                _patched_by_decorator(module, func):
            continue
        out += finder.scan(module.nodes_of(func), func)
    out = _unrestored(module, out)
    if any(m.function is not None for m in out):
        restorers = [r for r in (_restorer(module, finder, f) for f in module.functions)
                     if r is not None]
        out = [m for m in out if not _restored_by_a_fixture(m, restorers)
               and not _clears_a_leak(module, m)]
        out = [m for m in out if not _restores_a_saved_value(module, m, out)]
        out = [m for m in out if not _restored_in_finally(module, m, out)]
    return sorted(out, key=lambda m: (m.node.lineno, m.node.col_offset))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class _Restorer:
    """A function-scoped fixture that restores environment variables after each test it
    reaches: every test of its scope when it is autouse, else those that request it.

    Attributes:
        fixture: the fixture.
        names: the variables it restores; ``None``: the whole environment.
        autouse: the fixture is declared ``autouse=True``.
    """

    fixture: FunctionInfo
    names: frozenset[str] | None
    autouse: bool = True


def _restorer(module: ModuleAnalysis, finder: _Finder, func: FunctionInfo
              ) -> _Restorer | None:
    """What the function-scoped fixture ``func`` restores after each test: the
    whole environment when it yields inside ``with mock.patch.dict(os.environ)`` or calls
    ``os.environ.clear()`` and ``os.environ.update(...)`` after its yield; else the
    variables its ``monkeypatch`` parameter (or a ``with MonkeyPatch.context() as mp``
    around its yield) sets or deletes, and those its code after the yield changes (every
    variable the fixture names, :func:`_named_strings`, when the code after the yield
    changes a variable whose name is known only at run time: ``for k, v in saved.items():
    os.environ[k] = v``); a fixture without a yield restores through ``monkeypatch`` only.
    ``None`` for any other function, or when it restores nothing."""
    if func.kind is not FunctionKind.FIXTURE or func.fixture_scope != "function":
        return None
    autouse = _is_autouse(func)
    nodes = module.nodes_of(func)
    yields = [n for n in nodes if isinstance(n, (ast.Yield, ast.YieldFrom))]
    if yields and _autouse_patches_environ(module, func):
        return _Restorer(func, None, autouse)
    first = (yields[0].lineno, yields[0].col_offset) if yields else None
    after = [n for n in nodes if first is not None and isinstance(n, (ast.expr, ast.stmt))
             and (n.lineno, n.col_offset) > first]
    if {"clear", "update"} <= {n.func.attr for n in after if isinstance(n, ast.Call) and
                               isinstance(n.func, ast.Attribute) and
                               finder.is_environ(n.func.value)}:
        return _Restorer(func, None, autouse)
    names: set[str] = set()
    unknown = False
    patchers = _monkeypatches(module, func, yields[0] if yields else None)
    locals_ = local_names(module, func)
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("setenv", "delenv") and node.args and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in patchers:
            name = finder.name(node.args[0], locals_)
            unknown |= name is None
            names.update([name] if name is not None else [])
    for node in after:
        changed = _changed_keys(finder, node)
        if changed is not None:
            known = [finder.name(key, locals_) for key in changed]
            unknown |= None in known
            names.update(n for n in known if n is not None)
    if unknown:
        names |= _named_strings(module, func, finder.constants)
    return _Restorer(func, frozenset(names), autouse) if names else None


def _monkeypatches(module: ModuleAnalysis, func: FunctionInfo,
                   first_yield: ast.AST | None) -> frozenset[str]:
    """The names in ``func`` of ``monkeypatch`` objects undone when the fixture ends: its
    ``monkeypatch`` parameter, and the target of a ``with ...MonkeyPatch.context() as
    mp:`` that holds ``first_yield``."""
    out = {"monkeypatch"} & set(func.params)
    for node in module.nodes_of(func):
        if isinstance(node, (ast.With, ast.AsyncWith)) and first_yield is not None and \
                first_yield in walk_breadth(node):
            out.update(item.optional_vars.id for item in node.items
                       if isinstance(item.optional_vars, ast.Name)
                       and isinstance(item.context_expr, ast.Call)
                       and isinstance(item.context_expr.func, ast.Attribute)
                       and item.context_expr.func.attr == "context"
                       and last_name(item.context_expr.func.value) == "MonkeyPatch")
    return frozenset(out)


def _changed_keys(finder: _Finder, node: ast.AST) -> list[ast.expr] | None:
    """The keys ``node`` changes in ``os.environ`` (an assignment or ``del`` of
    ``os.environ[key]``, ``.pop(key)``, ``.setdefault(key, ...)``), else ``None``."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        keys = [t.slice for t in targets
                if isinstance(t, ast.Subscript) and finder.is_environ(t.value)]
        return keys or None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("pop", "setdefault") and node.args and \
            finder.is_environ(node.func.value):
        return [node.args[0]]
    return None


def _named_strings(module: ModuleAnalysis, func: FunctionInfo,
                   constants: dict[str, object]) -> frozenset[str]:
    """The strings ``func`` writes (literals) or names (module constants holding a string,
    or a tuple, list or set of strings)."""
    out: set[str] = set()
    for node in module.nodes_of(func):
        value: object = node.value if isinstance(node, ast.Constant) else \
            constants.get(node.id) if isinstance(node, ast.Name) else None
        if isinstance(value, str):
            out.add(value)
        elif isinstance(value, (tuple, list, set, frozenset)):
            out.update(v for v in value if isinstance(v, str))
    return frozenset(out)


def _restored_by_a_fixture(mutation: EnvMutation, restorers: list[_Restorer]) -> bool:
    """True when a fixture of ``restorers`` restores ``mutation``'s variables after each
    test and reaches its function: a test or a function-scoped fixture of the module (of
    the class, for a fixture defined in a class), other than the restoring fixture itself
    (unless it restores the whole environment), that the fixture reaches as an autouse
    one or that requests it by name (its teardown runs after the requester's)."""
    func = mutation.function
    if func is None or not (func.kind is FunctionKind.TEST or
                            func.fixture_scope == "function"):
        return False
    for restorer in restorers:
        fixture = restorer.fixture
        if fixture.parent is not None or (restorer.names is not None and fixture is func):
            continue
        if not restorer.autouse and (fixture is func or fixture.fixture_name is None or
                                     fixture.fixture_name not in func.params):
            continue
        if fixture.owner_class is not None and not _within(func, fixture.owner_class):
            continue
        if restorer.names is None or set(mutation.names) <= restorer.names:
            return True
    return False


def _within(func: FunctionInfo, cls: ast.ClassDef) -> bool:
    """True when ``func`` (or a function around it) is a method of ``cls``."""
    current: FunctionInfo | None = func
    while current is not None:
        if current.owner_class is cls:
            return True
        current = current.parent
    return False


def _clears_a_leak(module: ModuleAnalysis, mutation: EnvMutation) -> bool:
    """True for a removal (``del os.environ[...]``, ``os.environ.pop(...)`` as a statement)
    in a fixture that only removes variables (no other change of ``os.environ``, no
    ``os.putenv``, no ``.pop`` whose value is kept), when the fixture is autouse or the
    removal follows its yield: it puts back the environment's default state, which every
    test it reaches starts from (and ``monkeypatch.delenv`` would put back the removed
    value when the test ends)."""
    func = mutation.function
    if func is None or func.kind is not FunctionKind.FIXTURE or not mutation.removes or \
            mutation.function_name or not mutation.rewritable:
        return False
    nodes = module.nodes_of(func)
    if not _is_autouse(func):
        yields = [n for n in nodes if isinstance(n, (ast.Yield, ast.YieldFrom))]
        start = (mutation.node.lineno, mutation.node.col_offset)  # type: ignore[attr-defined]
        if not yields or (yields[0].lineno, yields[0].col_offset) > start:
            return False
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                isinstance(t, ast.Subscript) and module.qualified(t.value) == "os.environ"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            return False
        if not isinstance(node, ast.Call):
            continue
        if module.qualified(node.func) == "os.putenv":
            return False
        if isinstance(node.func, ast.Attribute) and \
                module.qualified(node.func.value) == "os.environ" and (
                    node.func.attr in ("update", "setdefault", "clear", "popitem") or (
                        node.func.attr == "pop" and
                        not isinstance(module.parent(node), ast.Expr))):
            return False
    return True


def _restores_a_saved_value(module: ModuleAnalysis, mutation: EnvMutation,
                            found: list[EnvMutation]) -> bool:
    """True for a change, in a fixture's teardown (after its ``yield``), that puts back
    what the fixture read before the ``yield``: ``os.environ[X] = saved`` with ``saved =
    os.environ.get(X)``, or the removal of ``X`` (the value it had: none), when the fixture
    changes none of these variables before its ``yield`` (of the ``found`` changes). Such a
    fixture undoes what the code under test leaves behind; ``monkeypatch`` would record the
    leaked value at the teardown and set it back after."""
    func = mutation.function
    if func is None or func.kind is not FunctionKind.FIXTURE or mutation.function_name:
        return False
    nodes = module.nodes_of(func)
    yields = [n for n in nodes if isinstance(n, (ast.Yield, ast.YieldFrom))]
    if not yields:
        return False
    first = (yields[0].lineno, yields[0].col_offset)
    if (mutation.statement.lineno, mutation.statement.col_offset) < first:
        return False
    names = set(mutation.names)
    if any(m.function is func and names & set(m.names) and
           (m.statement.lineno, m.statement.col_offset) < first for m in found):
        return False
    saved = _saved_reads(module, nodes, first)
    if not names <= set(saved):
        return False
    if mutation.removes:
        return True
    node = mutation.node
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and \
        len(names) == 1 and node.value.id in saved[next(iter(names))]


def _saved_reads(module: ModuleAnalysis, nodes: list[ast.AST], before: tuple[int, int]
                 ) -> dict[str, set[str]]:
    """Variable -> the local names that hold what the function read of it before the
    position ``before`` (``saved = os.environ.get(X)``), of ``nodes`` (a function's); a
    name bound to anything else too (``saved = "1"``) holds no such value."""
    saved: dict[str, set[str]] = {}
    reads = {id(n): name for name, read in environment_reads(module).items() for n in read}
    for node in nodes:
        if isinstance(node, ast.Assign) and id(node.value) in reads and \
                (node.lineno, node.col_offset) < before and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            saved.setdefault(reads[id(node.value)], set()).add(node.targets[0].id)
    read_into = {id(t) for n in nodes if isinstance(n, ast.Assign) and id(n.value) in reads
                 for t in n.targets}
    other = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
             and id(n) not in read_into}
    return {var: names - other for var, names in saved.items() if names - other}


def _restored_in_finally(module: ModuleAnalysis, mutation: EnvMutation,
                         found: list[EnvMutation]) -> bool:
    """True for a change inside a ``try`` (its body, handlers or ``finally``), or in the
    changes right before it, whose ``finally`` puts back each variable the change names
    as the function read it before that ``try`` (``saved = os.environ.get(X)``): every
    change of the variable in that ``finally`` (of the ``found`` changes) sets it to a name
    holding what was read, or removes it (``if saved is None: del os.environ[X]``). The
    test leaves the variable as it found it, whatever it raised; ``monkeypatch`` would do
    the same."""
    func = mutation.function
    if func is None or mutation.function_name:
        return False
    names = set(mutation.names)
    nodes = module.nodes_of(func)
    mine = {id(m.statement) for m in found if m.function is func}

    def puts_back(trying: ast.Try) -> bool:
        saved = _saved_reads(module, nodes, (trying.lineno, trying.col_offset))
        final = {id(n) for stmt in trying.finalbody for n in walk_breadth(stmt)}
        back = [m for m in found if m.function is func and id(m.statement) in final
                and set(m.names) & names]
        return names <= set(saved) and all(
            any(var in m.names for m in back) for var in names) and all(
            m.removes or (isinstance(m.node, ast.Assign)
                          and isinstance(m.node.value, ast.Name)
                          and all(m.node.value.id in saved.get(var, ()) for var in m.names))
            for m in back)

    current = module.parent(mutation.statement)
    while current is not None and current is not func.node:
        if isinstance(current, ast.Try) and current.finalbody and puts_back(current):
            return True
        current = module.parent(current)
    block = statement_block(module, mutation.statement)
    if block is None:
        return False
    after = next(i for i, s in enumerate(block) if s is mutation.statement) + 1
    while after < len(block) and id(block[after]) in mine:
        after += 1  # other changes, then the ``try`` that puts them all back
    trying = block[after] if after < len(block) else None
    return isinstance(trying, ast.Try) and bool(trying.finalbody) and puts_back(trying)


def _is_autouse(func: FunctionInfo) -> bool:
    """True for a fixture declared with ``autouse=True``."""
    deco = fixture_decorator(func.node)
    return func.kind is FunctionKind.FIXTURE and isinstance(deco, ast.Call) and any(
        kw.arg == "autouse" and isinstance(kw.value, ast.Constant) and kw.value.value is True
        for kw in deco.keywords)


def class_of(module: ModuleAnalysis, func: FunctionInfo) -> ast.ClassDef | None:
    """The class ``func`` is a method of (defined directly in its body), else ``None``
    (what the analysis recorded: :attr:`FunctionInfo.owner_class`)."""
    return func.owner_class


def is_unittest_class(module: ModuleAnalysis, cls: ast.ClassDef, depth: int = 0) -> bool:
    """True when ``cls`` derives from ``unittest.TestCase`` (or its asyncio variant),
    directly or through classes of the same module."""
    if depth > 8:
        return False
    local = {c.name: c for c in module.tree.body if isinstance(c, ast.ClassDef)}
    for base in cls.bases:
        if module.qualified(base) in UNITTEST_CASES:
            return True
        if isinstance(base, ast.Name) and base.id in local and local[base.id] is not cls and \
                is_unittest_class(module, local[base.id], depth + 1):
            return True
    return False


def _is_test_method(module: ModuleAnalysis, func: FunctionInfo) -> bool:
    """A test: a pytest test, or a ``test*`` method of a ``unittest.TestCase`` (collected
    whatever the class's name)."""
    if func.kind is FunctionKind.TEST:
        return True
    cls = class_of(module, func) if func.kind is FunctionKind.METHOD else None
    return cls is not None and func.name.startswith("test") and is_unittest_class(module, cls)


def _unrestored(module: ModuleAnalysis, found: list[EnvMutation]) -> list[EnvMutation]:
    """``found`` less what the xunit functions restore: a change in a setup that its
    teardown (:data:`TEARDOWN_OF`) changes again or undoes wholesale
    (``os.environ.clear()``), a change in a test that a per-test teardown of its class or
    module restores, a change in a function that registers a cleanup naming ``os.environ``
    or the variable (``self.addCleanup(os.environ.pop, "VLLM_X")``) or after a started
    ``mock.patch.dict(os.environ)`` (in it, or in the setup of a test), and a teardown's
    change of a variable that a setup or test of its scope changes (its restoring half)."""
    if not any(m.function is not None for m in found):
        return found
    scopes: dict[int, dict[str, FunctionInfo]] = {}  # id(class or module) -> name -> function
    for info in module.functions:
        owner = _scope(module, info)
        if owner is not None:
            scopes.setdefault(id(owner), {})[info.name] = info
    changed: dict[int, set[str]] = {}  # id(function node) -> variables it changes
    for mutation in found:
        if mutation.function is not None:
            changed.setdefault(id(mutation.function.node), set()).update(mutation.names)
    out = []
    for mutation in found:
        func = mutation.function
        scope = _scope(module, func) if func is not None else None
        if func is None or scope is None:
            out.append(mutation)
            continue
        siblings = scopes.get(id(scope), {})
        names = set(mutation.names)
        restorers: list[FunctionInfo] = []
        partner = siblings.get(TEARDOWN_OF.get(func.name, ""))
        if partner is not None:
            restorers.append(partner)
        if _is_test_method(module, func):
            restorers += [f for n, f in siblings.items() if n in PER_TEST_TEARDOWNS]
        setups = [f for n, f in siblings.items() if n in TEARDOWN_OF]
        if any(names <= changed.get(id(f.node), set()) or _clears_environ(module, f)
               for f in restorers) or _cleans_up(module, func, mutation) or any(
                _patches_environ_before(module, f, mutation.node if f is func else None)
                for f in ([func, *setups] if _is_test_method(module, func) else [func])):
            continue
        if func.name in TEARDOWN_OF.values() and names <= set().union(*(
                changed.get(id(f.node), set()) for f in siblings.values()
                if f is not func and f.name not in TEARDOWN_OF.values())):
            continue  # the teardown's restoring half
        out.append(mutation)
    return out


def _scope(module: ModuleAnalysis, func: FunctionInfo | None) -> ast.AST | None:
    """The class a method belongs to, the module for a top-level function; ``None`` for a
    nested function."""
    if func is None or func.parent is not None:
        return None
    return class_of(module, func) or (module.tree if func.node in module.tree.body else None)


def _clears_environ(module: ModuleAnalysis, func: FunctionInfo) -> bool:
    """True when ``func`` calls ``os.environ.clear()`` (restoring a saved copy after it)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "clear" and module.qualified(n.func.value) == "os.environ"
               for n in module.nodes_of(func))


def _cleans_up(module: ModuleAnalysis, func: FunctionInfo, mutation: EnvMutation) -> bool:
    """True when ``func`` registers a ``unittest`` cleanup that names ``os.environ`` (or
    ``os.putenv``/``os.unsetenv``) or one of the mutation's variables."""
    for node in module.nodes_of(func):
        if not (isinstance(node, ast.Call) and last_name(node.func) in ADD_CLEANUP):
            continue
        for sub in (s for arg in [*node.args, *(k.value for k in node.keywords)]
                    for s in walk_breadth(arg)):
            if isinstance(sub, ast.Constant) and sub.value in mutation.names:
                return True
            if isinstance(sub, (ast.Name, ast.Attribute)) and module.qualified(sub) in (
                    "os.environ", *OS_FUNCTIONS):
                return True
    return False


def _patches_environ_before(module: ModuleAnalysis, func: FunctionInfo,
                            node: ast.AST | None) -> bool:
    """True when ``func`` starts a ``mock.patch.dict(os.environ)`` patcher (before ``node``
    when given): it restores the whole environment when stopped."""
    patchers: set[str] = set()
    limit = (node.lineno, node.col_offset) if node is not None else None  # type: ignore[attr-defined]
    for sub in module.nodes_of(func):
        if isinstance(sub, ast.Assign) and _patch_dict_of_environ(module, sub.value):
            patchers.update(ast.unparse(t) for t in sub.targets)
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr == "start" and (
                    _patch_dict_of_environ(module, sub.func.value)
                    or ast.unparse(sub.func.value) in patchers) and (
                    limit is None or (sub.lineno, sub.col_offset) < limit):
            return True
    return False


def _change_lines(module: ModuleAnalysis) -> list[int] | None:
    """The lines (ascending) on which a change of the environment may start
    (:data:`~lint_gpu_tests.parsing.prefilter.ENVIRONMENT_CHANGE`), or ``None`` (every line) when
    the module imports ``environ`` or one of the functions under another name: then a change can
    be spelt without them. Empty when the module cannot change the environment or writes no
    configured variable's name (its literal part, :func:`names_variable`): GPU008's first
    test, the same as the prefilter's."""
    source = module.text.encode("utf-8", "surrogatepass")
    if not changes_environment(source) or not names_variable(
            module.text, module.config.environment_patterns):
        return []
    if any(match.group(0).endswith(b"as") or _ALIASED.match(source, match.end())
           for match in ENVIRONMENT_CHANGE.finditer(source)):
        return None
    return lines_matching(module.text, _CHANGE)


def _watched(module: ModuleAnalysis, func: FunctionInfo) -> bool:
    return func.kind in (FunctionKind.TEST, FunctionKind.FIXTURE) or \
        func.name in XUNIT_FUNCTIONS or _is_test_method(module, func)


def _module_level_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Nodes that run at import time: module and class bodies, not functions, lambdas or
    the ``__main__`` guard."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        if isinstance(node, ast.If) and is_main_guard(node):
            stack.extend(reversed(node.orelse))
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _patch_dict_of_environ(module: ModuleAnalysis, node: ast.AST) -> bool:
    """True for ``mock.patch.dict(os.environ, ...)`` / ``patch.dict("os.environ", ...)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "dict" and last_name(node.func.value) == "patch"
            and node.args):
        return False
    target = node.args[0]
    return module.qualified(target) == "os.environ" or (
        isinstance(target, ast.Constant) and target.value == "os.environ")


def _autouse_patches_environ(module: ModuleAnalysis, func: FunctionInfo) -> bool:
    """True for a function-scoped autouse fixture that yields inside
    ``with mock.patch.dict(os.environ, ...)``: every test of the module and its
    function-scoped fixtures run inside that snapshot, which is restored after each test."""
    if func.fixture_scope != "function" or not _is_autouse(func):
        return False
    return any(isinstance(node, (ast.With, ast.AsyncWith)) and any(
        _patch_dict_of_environ(module, item.context_expr) for item in node.items) and any(
        isinstance(inner, ast.Yield) for inner in walk_breadth(node))
        for node in module.nodes_of(func))


def _patched_by_decorator(module: ModuleAnalysis, func: FunctionInfo | None) -> bool:
    while func is not None:
        if any(_patch_dict_of_environ(module, d) for d in func.node.decorator_list):
            return True
        func = func.parent
    return False


class _Finder:
    """Classifies nodes as environment changes (shared state: the module's constants)."""

    def __init__(self, module: ModuleAnalysis) -> None:
        self.module = module
        self.constants = module_constants(module)
        self.patterns = module.config.environment_patterns
        self._patchers: dict[int, frozenset[str]] = {}

    def scan(self, nodes: list[ast.AST], func: FunctionInfo | None) -> list[EnvMutation]:
        locals_ = local_names(self.module, func)
        out = []
        for node in nodes:
            found = self._classify(node, func, locals_)
            if found is not None and not self._inside_patch_dict(node):
                out.append(found)
        return out

    def _inside_patch_dict(self, node: ast.AST) -> bool:
        current = self.module.parent(node)
        while current is not None and not isinstance(
                current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if isinstance(current, (ast.With, ast.AsyncWith)) and any(
                    _patch_dict_of_environ(self.module, item.context_expr)
                    for item in current.items):
                return True
            current = self.module.parent(current)
        return False

    def is_environ(self, node: ast.AST) -> bool:
        """True when ``node`` names ``os.environ``."""
        return self.module.qualified(node) == "os.environ"

    def name(self, node: ast.AST, locals_: frozenset[str]) -> str | None:
        """The string ``node`` is (a literal, or a module constant ``locals_`` does not
        hide), else ``None``."""
        value = literal_value(node, self.constants, locals_)
        return value if isinstance(value, str) else None

    def _make(self, node: ast.AST, func: FunctionInfo | None, removes: bool,
              names: list[str], rewritable: bool, reason: str = "", function_name: str = "",
              patcher: str = "") -> EnvMutation | None:
        wanted = tuple(n for n in names if configured(n, self.patterns))
        if not wanted:
            return None
        statement = self.module.statement_of(node)
        return EnvMutation(node, statement, func, removes, wanted, rewritable, reason,
                           function_name, patcher)

    def _new_patcher(self, node: ast.AST) -> bool:
        """True for ``pytest.MonkeyPatch()`` (however ``MonkeyPatch`` is imported)."""
        return isinstance(node, ast.Call) and not node.args and not node.keywords and \
            self.module.qualified(node.func) in MONKEYPATCH_CLASSES

    def unreverted_patchers(self, func: FunctionInfo | None) -> frozenset[str]:
        """The local names of ``func`` bound only to a new ``pytest.MonkeyPatch()`` and
        used only as the receiver of method calls other than ``undo`` (in the function and
        the functions nested in it): nothing undoes what they set. A name used in any
        other way (returned, yielded, passed on, ``mp.undo`` named) may be undone
        elsewhere and is left out."""
        if func is None:
            return frozenset()
        known = self._patchers.get(id(func.node))
        if known is not None:
            return known
        nodes = walk_breadth(func.node)
        bound = {n.targets[0].id for n in nodes if isinstance(n, ast.Assign)
                 and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                 and self._new_patcher(n.value)}
        parent = self.module.parent
        for node in nodes if bound else ():
            if not isinstance(node, ast.Name) or node.id not in bound:
                continue
            above = parent(node)
            if isinstance(node.ctx, ast.Store):
                kept = isinstance(above, ast.Assign) and self._new_patcher(above.value)
            elif isinstance(above, ast.Attribute) and above.attr != "undo":
                call = parent(above)
                kept = isinstance(node.ctx, ast.Load) and isinstance(call, ast.Call) and \
                    call.func is above
            else:
                kept = False
            if not kept:
                bound.discard(node.id)
        found = self._patchers[id(func.node)] = frozenset(bound)
        return found

    def _classify_patcher(self, node: ast.Call, func: FunctionInfo | None,
                          locals_: frozenset[str]) -> EnvMutation | None:
        """``mp.setenv(name, value)``/``mp.delenv(name)`` of a ``pytest.MonkeyPatch()`` that
        nothing undoes (:meth:`unreverted_patchers`), or called on ``pytest.MonkeyPatch()``
        itself."""
        receiver = node.func.value  # type: ignore[attr-defined]
        if self._new_patcher(receiver):
            spelled = ast.unparse(receiver)
            advice = "use the `monkeypatch` fixture"
        elif isinstance(receiver, ast.Name) and receiver.id in self.unreverted_patchers(func):
            spelled = receiver.id
            advice = (f"call `{spelled}.undo()` where the fixture's teardown ends, or use the "
                      "`monkeypatch` fixture in a test or a function-scoped fixture")
        else:
            return None
        key = node.args[0] if node.args else next(
            (kw.value for kw in node.keywords if kw.arg == "name"), None)
        name = self.name(key, locals_) if key is not None else None
        if name is None:
            return None
        removes = node.func.attr == "delenv"  # type: ignore[attr-defined]
        reason = f"`{spelled}` is a `pytest.MonkeyPatch()` that nothing undoes: {advice}"
        return self._make(node, func, removes, [name], False, reason, patcher=spelled)

    def _classify(self, node: ast.AST, func: FunctionInfo | None,
                  locals_: frozenset[str]) -> EnvMutation | None:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            keys = [t.slice for t in targets
                    if isinstance(t, ast.Subscript) and self.is_environ(t.value)]
            if not keys:
                return None
            names = [n for n in (self.name(k, locals_) for k in keys) if n is not None]
            if isinstance(node, ast.AugAssign):
                return self._make(node, func, False, names, False, "an augmented assignment")
            if len(targets) > 1:
                return self._make(node, func, False, names, False, "a chained assignment")
            return self._make(node, func, False, names, True)
        if isinstance(node, ast.Delete):
            keys = [t.slice for t in node.targets
                    if isinstance(t, ast.Subscript) and self.is_environ(t.value)]
            if not keys:
                return None
            names = [n for n in (self.name(k, locals_) for k in keys) if n is not None]
            if len(keys) != len(node.targets):
                return self._make(node, func, True, names, False,
                                  "the `del` also deletes other targets")
            return self._make(node, func, True, names, True)
        if isinstance(node, ast.Call):
            return self._classify_call(node, func, locals_)
        return None

    def _classify_call(self, node: ast.Call, func: FunctionInfo | None,
                       locals_: frozenset[str]) -> EnvMutation | None:
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("setenv", "delenv"):
            return self._classify_patcher(node, func, locals_)
        if self.module.qualified(node.func) not in OS_FUNCTIONS and not (
                isinstance(node.func, ast.Attribute) and node.func.attr in ENVIRON_METHODS
                and self.is_environ(node.func.value)):
            return None  # before asking for the parent: most calls are neither
        statement_call = isinstance(self.module.parent(node), ast.Expr)
        used = None if statement_call else "the call's value is used"
        qualified = self.module.qualified(node.func)
        if qualified in OS_FUNCTIONS and node.args and not node.keywords:
            name = self.name(node.args[0], locals_)
            if name is None:
                return None
            removes = OS_FUNCTIONS[qualified]
            if len(node.args) != (1 if removes else 2):
                return None
            return self._make(node, func, removes, [name], not used, used or C_ENV_ONLY,
                              qualified)
        if not (isinstance(node.func, ast.Attribute) and node.func.attr in ENVIRON_METHODS
                and self.is_environ(node.func.value)):
            return None
        method = node.func.attr
        if method == "update":
            return self._classify_update(node, func, locals_, used)
        if not node.args or node.keywords:
            return None
        key = node.args[0]
        name = self.name(key, locals_)
        if name is None:
            return None
        if method == "setdefault":
            if len(node.args) != 2:
                return self._make(node, func, False, [name], False,
                                  "`setdefault` without a value sets `None`")
            return self._make(node, func, False, [name], not used, used or "")
        if len(node.args) > 2:  # pop
            return None
        return self._make(node, func, True, [name], not used, used or "")

    def _classify_update(self, node: ast.Call, func: FunctionInfo | None,
                         locals_: frozenset[str], used: str | None) -> EnvMutation | None:
        """``update({...})``, ``update(dict(K=v))``, ``update(K=v)``: one ``setenv`` per key
        when every key is known."""
        keys: list[ast.expr | str | None] = []  # a key node, a keyword's name, or unknown
        sources: list[ast.expr] = list(node.args)
        keywords = list(node.keywords)
        if len(sources) == 1 and isinstance(sources[0], ast.Call) and \
                isinstance(sources[0].func, ast.Name) and sources[0].func.id == "dict" and \
                not sources[0].args:
            keywords += sources[0].keywords
        elif len(sources) == 1 and isinstance(sources[0], ast.Dict):
            keys += sources[0].keys
        elif sources:
            keys.append(None)
        keys += [kw.arg for kw in keywords]
        names = [k if isinstance(k, str) or k is None else self.name(k, locals_)
                 for k in keys]
        reason = used or ""
        if not reason and None in names:
            reason = "some of its keys are known only at run time"
        if not reason and len(names) > 1 and _has_comment(self.module, node):
            reason = "the comments inside the call would be lost"
        return self._make(node, func, False, [n for n in names if n is not None],
                          not reason, reason)


def _has_comment(module: ModuleAnalysis, node: ast.AST) -> bool:
    """True when a comment sits inside ``node``'s source (between its first and last line)."""
    first, last = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    return first != last and any("#" in line for line in module.lines[first:last])

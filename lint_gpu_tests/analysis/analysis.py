"""The shared analysis every rule reads: imports, functions, engines, runners, cleanup.

One pass over a module's stdlib ``ast`` tree (detection never needs LibCST)
collects the facts the rules GPU001–GPU006 report on:

* which names refer to an engine class (``vllm.LLM`` however imported) and which to a
  runner (``vllm_runner`` fixture, ``VllmRunner`` class);
* each function's kind (test, fixture with its scope, helper, method), whether it runs in
  its own process (an isolation decorator), and what it owns: engines it builds, runners
  it holds, engine fixtures it receives;
* every engine construction with its context (``pytest.raises`` body, ``__main__`` guard,
  runner class, module level), and the statements and names around it that a fix needs.
"""

from __future__ import annotations

import ast
import enum
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from lint_gpu_tests.analysis.process_targets import Launch, process_targets
from lint_gpu_tests.analysis.scopes import ScopeIndex
from lint_gpu_tests.config import REEXPORTS, Config, is_test_module
from lint_gpu_tests.ftypes import (
    CLEANUP_FUNCTIONS,
    ENGINE_HELPER,
    IMPORTED_TEST_MODULE,
    PRIVATE_TEST_MODULE,
)
from lint_gpu_tests.parsing.source import (
    TopLevel,
    child_fields,
    parent_index,
    reversed_child_fields,
    walk_breadth,
    walk_nodes,
)
from lint_gpu_tests.parsing.syntax import (
    FunctionNode,
    caching_decorator,
    dotted_name,
    fixture_decorator,
    fixture_request_name,
    fixture_scope,
    head_name,
    is_main_guard,
    is_raises_with,
    iter_statements,
    last_name,
    lines_naming,
    parameter_names,
    spans_a_line,
)

T = TypeVar("T")
FunctionScope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
#: The nodes that open a function's scope (its parameters and locals).
FUNCTION_SCOPES: tuple[type[FunctionScope], ...] = (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.Lambda)
#: The function statements (a lambda's body cannot take a fixture).
FUNCTION_DEFS: tuple[type[ast.FunctionDef | ast.AsyncFunctionDef], ...] = (
    ast.FunctionDef, ast.AsyncFunctionDef)
_MISSING = object()  # not derived yet (a derived value may be None)

#: Device modules whose ``empty_cache()`` is manual cleanup (torch.cuda, torch.npu, ...).
CACHE_DEVICES = frozenset({"cuda", "npu", "xpu", "hpu", "mps", "accelerator", "musa", "mlu"})

#: vLLM's tests' own cleanup helper before ``cleanup_dist_env_and_memory`` (``cleanup()`` in
#: vLLM's ``tests/conftest.py`` and ``tests/utils.py``): cleanup under ``target = "vllm"``
#: when imported from a ``conftest`` or ``utils`` module.
LEGACY_VLLM_CLEANUP = "cleanup"

#: What :meth:`ModuleAnalysis.nodes_of` does not descend into (lambdas are walked: they run
#: in the function's scope of references).
NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

#: Module-level xunit functions (pytest's and unittest's): pytest runs the one it finds in a
#: test module's namespace, defined there or imported, around the module or each test.
MODULE_XUNIT_FUNCTIONS = frozenset({"setup_module", "teardown_module", "setup_function",
                                    "teardown_function", "setUpModule", "tearDownModule"})
#: Prefix of the entry a conftest's fixture index holds when the conftest defines a fixture
#: named like the runner fixture (``own-runner-fixture:vllm_runner``; not an identifier, so
#: never an engine fixture's name).
OWN_RUNNER_FIXTURE = "own-runner-fixture:"
#: Prefix of the entry a conftest's fixture index holds when its runner fixture (one named
#: like ``runner-fixture``) hands out a class of the conftest whose ``__init__`` takes the
#: model first under another name, with no default (``own-runner-model:model_name``): a
#: runner call passing ``model=`` would raise ``TypeError``.
OWN_RUNNER_MODEL = "own-runner-model:"
#: The entry of a conftest's index whose runner fixture (named like ``runner-fixture``)
#: hands out one runner it builds (``yield runner`` after ``runner = cache.get(...)``), not
#: a factory: a test calling ``vllm_runner(...)`` would call that runner.
OWN_RUNNER_INSTANCE = "own-runner-instance"
#: Prefix of the entries of a conftest's index naming the classes it defines that derive from
#: a runner class (``runner-class:DPVllmRunner``: vllm-ascend's data-parallel
#: ``DPVllmRunner(VllmRunner)``): a test module that imports one calls a runner. (A class
#: that is a runner only by its ``__exit__``, such as vLLM's ``HfRunner``, is not one.)
RUNNER_CLASS = "runner-class:"
#: Prefix of the entries of a conftest's index naming the environment variables its
#: functions read by name (``env-read:VLLM_X``; :func:`environment_reads`): a change a test
#: module leaves behind can reach them, and ending the leak changes what they see.
ENV_READ = "env-read:"
#: Prefix of the entries of a conftest's index naming its factory fixtures
#: (``factory-fixture:make_llm``; :attr:`ModuleAnalysis.factory_fixtures`).
FACTORY_FIXTURE = "factory-fixture:"
#: Prefix of the entries of a conftest's index naming each fixture that hands out a factory
#: whose calls each build an engine or a runner (:meth:`ModuleAnalysis.handed_out_factories`),
#: with the ``gpu_memory_utilization`` its engine or runner call writes
#: (``factory-share:make_runner|0.5``; ``default`` where it writes none, empty where not a
#: literal): GPU007 counts each engine a test builds through it.
FACTORY_SHARE = "factory-share:"
#: The scope field of an engine helper's summary (:func:`engine_helpers`) when the rules look
#: at its module.
SCOPED = "t"
#: The extra field of a cleanup helper's summary (kind ``"x"``) whose whole body is hand
#: cleanup (:attr:`ModuleAnalysis.cleanup_helpers`): any call of it is cleanup.
WHOLE_CLEANUP = "*"


@dataclass(frozen=True)
class ImportedHelper:
    """An engine helper of another module of the tree, as a module imports it.

    Attributes:
        key: the qualified name the importing module reaches it by (``tests.utils.setup_engine``,
            ``.utils.setup_engine``).
        kind: ``"f"``, a function that builds an engine and returns it; ``"t"``, one that
            returns it in a tuple with other values; ``"c"``, a class whose methods store
            an engine on ``self.<attribute>``; ``"m"``, a class with factory methods (methods
            that build an engine and return it), which a class of the importing module
            may inherit; ``"k"``, a function that builds an engine and returns it through a
            cache (``@functools.cache``), which keeps it for every caller; ``"x"``, a
            cleanup helper (:attr:`ModuleAnalysis.cleanup_helpers`, or one that shuts down
            an engine it is given and does more: :attr:`ModuleAnalysis.shutdown_helpers`),
            no engine helper (:meth:`ModuleAnalysis.helper_called` leaves it out); ``"e"``, a
            fixture that provides an engine, which a test of the importing module receives
            (no helper either); ``"g"``, a fixture that hands out a factory of engines and
            keeps none of them (:attr:`ModuleAnalysis.factory_fixtures`; no helper either);
            ``"p"``, a launcher helper, which runs a function it is given as its own process
            (:attr:`ModuleAnalysis.launcher_helpers`; no helper either).
        name: its name in the module that defines it.
        line: the line of its ``def``/``class``.
        extra: for a function, the engine's ``gpu_memory_utilization`` written in it as a
            literal, ``"default"`` when it passes none, ``""`` when unknown; for a tuple,
            the engine's index in it; for a class, the attributes holding the engine,
            comma-separated; for a class with factory methods, their names, comma-separated;
            for a cached function, its caching decorator as written; for a cleanup helper,
            :data:`WHOLE_CLEANUP`, or the index of the parameter whose engine it shuts
            down; for a fixture, the ``name=`` tests request it by where its decorator
            gives one, else ``""`` (its name where it is imported); for a launcher helper,
            ``index,name`` of the parameter it runs (:data:`Launch`).
        module: the defining module's path from the tree's root (``tests/utils.py``).
        in_scope: the defining module is in the rules' scope (a test module, a conftest,
            under ``test-roots``, or defining tests or fixtures: :func:`is_test_module_path`,
            :meth:`ModuleAnalysis.defines_pytest_items`), so GPU001 reports the engine a
            function helper builds there; a call of one out of scope is reported instead.
        via: the module that re-exports it under this key (``tests/utils/__init__.py``), or
            ``""``.
    """

    key: str
    kind: str
    name: str
    line: int
    extra: str
    module: str
    via: str = ""
    in_scope: bool = False

    @classmethod
    def parse(cls, entry: str) -> ImportedHelper | None:
        """The helper an :data:`ENGINE_HELPER` entry names; ``None`` for a malformed one."""
        parts = entry[len(ENGINE_HELPER):].split("|")
        if len(parts) != 8 or not parts[3].isdigit():
            return None
        return cls(parts[0], parts[1], parts[2], int(parts[3]), parts[4], parts[6], parts[7],
                   parts[5] == SCOPED)

    @property
    def launch(self) -> Launch | None:
        """For a launcher helper (kind ``"p"``), the parameter it runs as its own process."""
        index, _, name = self.extra.partition(",")
        if self.kind != "p" or not name.isidentifier() or not index.lstrip("-").isdigit():
            return None
        return int(index), name

    @property
    def attributes(self) -> frozenset[str]:
        """The attributes of a class helper that hold the engine."""
        return self._listed("c")

    @property
    def methods(self) -> frozenset[str]:
        """The factory methods of a class helper of kind ``"m"``."""
        return self._listed("m")

    def _listed(self, kind: str) -> frozenset[str]:
        """The comma-separated names of :attr:`extra` for a helper of ``kind``, else none."""
        return frozenset(a for a in self.extra.split(",") if a) if self.kind == kind \
            else frozenset()

    @property
    def where(self) -> str:
        """Where it is defined, for messages: ``tests/utils.py`` (line 12), with the module
        that re-exports it."""
        via = f", re-exported by `{self.via}`" if self.via else ""
        return f"`{self.module}` (line {self.line}){via}"


def is_test_module_path(path: str, config: Config) -> bool:
    """True when ``path`` is a test module (:func:`is_test_module`), a ``conftest.py``, or
    lies under a test root: the modules the rules look at."""
    if os.path.basename(path) == "conftest.py" or is_test_module(path):
        return True
    if config.test_roots:
        full = os.path.abspath(path)
        for root in config.test_roots:
            root_abs = os.path.abspath(os.path.join(config.root, root))
            if full == root_abs or full.startswith(root_abs.rstrip(os.sep) + os.sep):
                return True
    return False


class FunctionKind(str, enum.Enum):
    """What a function is to pytest (:attr:`FunctionInfo.kind`); the values are the words
    the docs use."""

    TEST = "test"
    FIXTURE = "fixture"
    #: A module-level or nested function.
    HELPER = "helper"
    #: A function directly in a class that is not a test class.
    METHOD = "method"


@dataclass
class FunctionInfo:
    """Facts about one function definition.

    Attributes:
        node: the ``def``.
        kind: a test, a fixture, a helper (module-level or nested function) or a method
            (inside a class that is not a test class); see :class:`FunctionKind`.
        fixture_scope: ``"function"`` ... ``"session"`` for fixtures, else ``None``;
            ``"dynamic"`` when the scope is not a literal.
        isolated: decorated with a process-isolation decorator, or run as a process of its
            own (see :meth:`ModuleAnalysis._mark_process_targets`).
        params: parameter names, in order.
        parent: the enclosing function, for nested functions.
        owner_class: the class whose body holds the ``def`` directly (its syntactic
            parent), else ``None``.
        fixture_name: for a fixture, the name tests request it by (its decorator's literal
            ``name=``, else its own name: :func:`fixture_request_name`), else ``None``.
    """

    node: FunctionNode
    kind: FunctionKind
    fixture_scope: str | None = None
    isolated: bool = False
    params: list[str] = field(default_factory=list)
    parent: FunctionInfo | None = None
    in_runner_class: bool = False
    in_base_class: bool = False
    owner_class: ast.ClassDef | None = None
    fixture_name: str | None = None

    @property
    def name(self) -> str:
        """The function's name."""
        return self.node.name


@dataclass
class EngineSite:
    """One engine construction (a call of a configured engine class).

    Attributes:
        call: the ``Call`` node.
        function: enclosing function, or ``None`` at module or class level.
        statement: the statement holding the call.
        bound_name: ``x`` for ``x = LLM(...)`` (plain, single target), else ``None``.
        in_raises: the statement is directly in a ``with pytest.raises(...)`` body.
        under_main_guard: inside ``if __name__ == "__main__":``.
        in_runner_class: inside a class that is itself a runner (its ``__exit__`` tears
            the engine down).
    """

    call: ast.Call
    function: FunctionInfo | None
    statement: ast.stmt
    bound_name: str | None
    in_raises: bool = False
    under_main_guard: bool = False
    in_runner_class: bool = False


@dataclass
class RunnerCall:
    """A call of the runner fixture or a runner class, with how it is used.

    ``context`` is ``"with"`` (a with-item's context expression), ``"enter_context"``
    (argument of ``ExitStack.enter_context``), ``"returned"`` (returned from a helper:
    a factory whose caller manages it), ``"guarded"`` (bound to a name in a ``try`` that
    guards its build, the name entered by the with-statement right after it:
    :func:`guarded_with`) or ``"bare"`` (anything else).
    """

    call: ast.Call
    function: FunctionInfo | None
    context: str
    under_main_guard: bool = False


@dataclass
class ModuleAnalysis:
    """Everything the rules need to know about one module.

    Build it with :meth:`build`; rules read its lists and helper methods only.
    """

    tree: ast.Module
    text: str
    path: str
    config: Config
    in_scope: bool = True
    imports: dict[str, str] = field(default_factory=dict)
    #: Module-level functions that run one of their parameters as its own process, by name,
    #: with that parameter (:func:`~lint_gpu_tests.analysis.process_targets.process_targets`).
    launcher_helpers: dict[str, Launch] = field(default_factory=dict)
    #: Names the module's top-level relative imports bind, with what they name
    #: (``from .utils import x``: ``x`` -> ``.utils.x``); kept apart from :attr:`imports`,
    #: which name modules outside the package.
    relative_imports: dict[str, str] = field(default_factory=dict)
    functions: list[FunctionInfo] = field(default_factory=list)
    engines: list[EngineSite] = field(default_factory=list)
    runner_calls: list[RunnerCall] = field(default_factory=list)
    engine_fixtures: set[str] = field(default_factory=set)
    #: The factory fixtures (:attr:`factory_fixtures`) this module imports from another
    #: module of the tree, by the name tests request them by, with that module's path from
    #: the tree's root (filled with :attr:`factory_fixtures`).
    imported_factory_fixtures: dict[str, str] = field(default_factory=dict)
    #: Where a fixture named like the configured ``runner-fixture`` is defined by the project
    #: itself (this module, or a conftest pytest loads for it), which then shadows the
    #: bundled plugin's: ``"this module"``, ``"a conftest.py"``, or ``None``.
    own_runner_fixture: str | None = None
    runner_classes_local: set[str] = field(default_factory=set)
    #: Classes of this module deriving from a runner class (configured, or a conftest's):
    #: ``DPVllmRunner(VllmRunner)``; a conftest's are runner classes of the modules it serves.
    runner_subclasses: set[str] = field(default_factory=set)
    local_shadowed: set[str] = field(default_factory=set)
    parents: dict[int, ast.AST] = field(default_factory=dict)
    #: The meaning of names in the scopes that rebind an import (see
    #: :class:`~lint_gpu_tests.analysis.scopes.ScopeIndex`); ``None`` until the module is analysed.
    scopes: ScopeIndex | None = None

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, tree: ast.Module, text: str, path: str, config: Config,
              conftest_fixtures: frozenset[str] = frozenset(), *,
              summarise: bool = False) -> ModuleAnalysis:
        """Analyse ``tree`` (parsed from ``text``) for ``path`` under ``config``.

        ``conftest_fixtures`` names engine fixtures defined in the conftests pytest loads for
        this module (see :mod:`lint_gpu_tests.checking.conftest_index`); a fixture of the same name
        in the module itself overrides them, as in pytest. Its :data:`ENGINE_HELPER`
        entries are the engine helpers of other modules of the tree. ``summarise``: analyse
        a module that is not a test module too (for :func:`engine_helpers`).
        """
        module = cls(tree=tree, text=text, path=path, config=config)
        module._conftest_fixtures = conftest_fixtures
        module._entries = _entries_view(conftest_fixtures)
        module.conftest_runner_classes = module._entries.runner_classes
        module._collect_imports()
        module.in_scope = summarise or is_test_module_path(path, config) or \
            module.defines_pytest_items()
        if not module.in_scope:
            return module
        module.scopes = ScopeIndex(tree, module.imports, text, module._top_ids)
        module._collect_runner_classes()
        _Walker(module).visit(tree)
        module._mark_process_targets()
        module._mark_script_functions()
        module._collect_engine_fixtures()
        return module

    @property
    def conftest_entries(self) -> frozenset[str]:
        """What the conftests pytest loads for this module hold, as their index names it
        (:mod:`lint_gpu_tests.checking.conftest_index`): engine fixtures, and the entries marked
        :data:`OWN_RUNNER_FIXTURE`, :data:`RUNNER_CLASS`, :data:`ENV_READ`."""
        return self._conftest_fixtures

    @property
    def imported_by_tree(self) -> bool:
        """Whether another module of the tree imports one of this test module's engine
        helpers, or the module whole (:data:`IMPORTED_TEST_MODULE`): its public helpers may
        have callers there."""
        return IMPORTED_TEST_MODULE in self._conftest_fixtures

    @property
    def private_to_tree(self) -> bool:
        """Whether this is a test module or a ``conftest.py`` that no file of its tree
        imports or names for a dynamic import (:data:`PRIVATE_TEST_MODULE`; never known for
        a module checked without its tree): its public helpers serve its own functions
        only."""
        return PRIVATE_TEST_MODULE in self._conftest_fixtures

    def derived(self, build: Callable[[ModuleAnalysis], T]) -> T:
        """``build(self)``, made once per analysis: what a layer above derives from the
        analysis and several of its callers ask for (the fix planner, GPU008's
        mutations), kept here rather than in attributes set from outside."""
        known = self._derived.get(build, _MISSING)
        if known is _MISSING:
            known = self._derived[build] = build(self)
        return cast(T, known)

    def parent(self, node: ast.AST) -> ast.AST | None:
        """The syntactic parent of ``node`` (``None`` for the module). The index is built on
        first use, one top-level statement at a time: a question about a node inside a
        test indexes that test, not the whole module (the statement is found by line; a
        node without a line, or not found there, indexes the whole module)."""
        parents = self.parents
        found = parents.get(id(node))
        if found is not None or node is self.tree or self._fully_indexed:
            return found
        line = getattr(node, "lineno", None)
        if self._top is None:
            self._top = TopLevel(self.tree.body)
        for top in self._top.at(line) if line is not None else ():
            if id(top) not in self._indexed:
                self._indexed.add(id(top))
                parents[id(top)] = self.tree
                parents.update(parent_index(top))
        found = parents.get(id(node))
        if found is not None:
            return found
        parents.update(parent_index(self.tree))
        self._fully_indexed = True
        return parents.get(id(node))

    def _collect_imports(self) -> None:
        """Map local names to qualified names; a local def/class/assignment shadows.
        Imports inside functions and classes count too (their own scopes resolve them
        first, see :class:`_ScopeResolver`); the module's own imports win over them.
        Also remembers the module's classes for :meth:`_collect_runner_classes`."""
        self._top_ids = top = {id(s) for s in iter_statements(self.tree.body,
                                                               definitions=False)}
        nested: dict[str, str] = {}
        for node in iter_statements(self.tree.body):
            if isinstance(node, ast.ClassDef):
                self._classes.append(node)
                continue
            into = self.imports if id(node) in top else nested
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        into[alias.asname] = alias.name
                    else:
                        first = alias.name.split(".")[0]
                        into[first] = first
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name != "*":
                        into[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.ImportFrom) and id(node) in top:
                for alias in node.names:
                    if alias.name != "*":
                        self.relative_imports[alias.asname or alias.name] = "." * node.level + (
                            f"{node.module}.{alias.name}" if node.module else alias.name)
        self.imports = {**nested, **self.imports}
        for stmt in self.tree.body:
            shadow: list[str] = []
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                shadow.append(stmt.name)
            elif isinstance(stmt, ast.Assign):
                shadow.extend(t.id for t in stmt.targets if isinstance(t, ast.Name))
            for name in shadow:
                self.local_shadowed.add(name)
                self.imports.pop(name, None)
                self.relative_imports.pop(name, None)

    def defines_pytest_items(self) -> bool:
        """True when a top-level function of the module is a test, a fixture or a
        module-level xunit function (:data:`MODULE_XUNIT_FUNCTIONS`): pytest collects it
        as a test module, or it serves fixtures or set-ups to the test modules that import
        them (``from tests.utils import setup_function``: pytest runs the set-up it finds
        in a test module's namespace around each of its tests); the rules look at it."""
        for stmt in self.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if stmt.name.startswith("test") or stmt.name in MODULE_XUNIT_FUNCTIONS or \
                        fixture_decorator(stmt) is not None:
                    return True
        return False

    def _collect_runner_classes(self) -> None:
        """Classes that are runners: named in ``runner-classes``, that build an engine and
        tear it down in ``__exit__``/``__aexit__`` (a project's own ``VllmRunner``), or that
        derive from a runner class (``DPVllmRunner(VllmRunner)``)."""
        for node in self._classes:
            if node.name in self.config.runner_classes:
                self.runner_classes_local.add(node.name)
                continue
            for item in node.body:
                if (
                    isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and item.name in ("__exit__", "__aexit__")
                    and (self._tears_down(item) or self._exits_held_runner(node, item))
                ):
                    self.runner_classes_local.add(node.name)
        known = set(self.config.runner_classes) | self.conftest_runner_classes
        changed = True
        while changed:
            changed = False
            for node in self._classes:
                if node.name not in self.runner_subclasses and any(
                        last_name(b) in known | self.runner_subclasses for b in node.bases):
                    self.runner_subclasses.add(node.name)
                    self.runner_classes_local.add(node.name)
                    changed = True

    def _exits_held_runner(self, cls: ast.ClassDef, func: FunctionNode) -> bool:
        """True when ``func`` exits a runner the class holds (``self._runner.__exit__(...)``
        after ``self._runner = VllmRunner(...)``: what the helper-class fix writes)."""
        held = {t.attr for n in walk_breadth(cls) if isinstance(n, ast.Assign)
                and self.is_runner_call(n.value)
                for t in n.targets if isinstance(t, ast.Attribute)}
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr in ("__exit__", "close")
                   and isinstance(n.func.value, ast.Attribute) and n.func.value.attr in held
                   for n in walk_breadth(func))

    def _tears_down(self, func: FunctionNode) -> bool:
        for node in walk_breadth(func):
            if isinstance(node, ast.Delete) and any(
                isinstance(t, ast.Attribute) and t.attr in self.runner_attributes()
                for t in node.targets
            ):
                return True
            if isinstance(node, ast.Call) and (
                self.cleanup_call_kind(node) is not None or last_name(node.func) == "shutdown"
            ):
                return True
        return False

    def _collect_engine_fixtures(self) -> None:
        """Fixtures that provide an engine (or a runner's engine): this module's, and the
        conftests' ones this module does not override."""
        local = {info.fixture_name for info in self.functions
                 if info.fixture_name is not None}
        marker = OWN_RUNNER_FIXTURE + self.config.runner_fixture
        if self.config.runner_fixture in local:
            self.own_runner_fixture = "this module"
        elif marker in self._conftest_fixtures:
            self.own_runner_fixture = "a conftest.py"
        self.engine_fixtures |= self._entries.fixtures - local
        self.engine_fixtures.update(name for name, _ in self._imported_fixtures("e", local))
        for info in self.functions:
            if info.kind is not FunctionKind.FIXTURE:
                continue
            for node in self.nodes_of(info):
                if isinstance(node, (ast.Yield, ast.Return)) and node.value is not None:
                    value = node.value
                    if isinstance(value, ast.Call) and self.qualified(value.func) == \
                            "weakref.proxy" and value.args:
                        value = value.args[0]  # a proxy of the engine is still the engine
                    if self.provides_engine(value, info) and info.fixture_name:
                        self.engine_fixtures.add(info.fixture_name)

    def _imported_fixtures(self, kind: str, local: set[str]
                           ) -> Iterator[tuple[str, ImportedHelper]]:
        """The fixtures of another module of the tree, of the summary ``kind`` (``"e"``, an
        engine fixture; ``"g"``, a factory fixture), that this module imports by name or by
        a star import (its public names), which pytest makes this module's: each with the
        name tests request it by, less those ``local`` (the module's own) hides."""
        if not self._entries.helpers:
            return
        for name, qualified in (*self.imports.items(), *self.relative_imports.items()):
            helper = self.imported_helpers.get(qualified)
            if helper is not None and helper.kind == kind and \
                    (helper.extra or name) not in local:
                yield helper.extra or name, helper
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                prefix = "." * stmt.level + (f"{stmt.module}." if stmt.module else "")
                for key, entry in self._entries.helpers.items():
                    name = key[len(prefix):]
                    if key.startswith(prefix) and name.isidentifier() and \
                            not name.startswith("_") and \
                            (helper := ImportedHelper.parse(entry)) is not None and \
                            helper.kind == kind and (helper.extra or name) not in local:
                        yield helper.extra or name, helper

    def _mark_process_targets(self) -> None:
        """Mark the functions that run as their own process as isolated (see
        :func:`lint_gpu_tests.analysis.process_targets.process_targets`), and find the
        module's launcher helpers (:attr:`launcher_helpers`). A test that pytest collects
        from a test file also runs in pytest's own process, so it is left as it is."""
        # The names a call of an imported launcher helper may spell: its import's, its own.
        imported: set[str] = set()
        if self._entries.helpers:
            named = {h.key: h.name for h in self.imported_helpers.values() if h.kind == "p"}
            imported.update(name for name, key in (*self.imports.items(),
                                                   *self.relative_imports.items())
                            if key in named)
            imported.update(named.values())

        def imported_launch(func: ast.expr) -> Launch | None:
            helper = self.imported_helper(func)
            return helper.launch if helper is not None else None

        targets, self.launcher_helpers = process_targets(
            self.tree, self.text, self.imports, self.qualified,
            frozenset(self.config.process_launchers), imported, imported_launch)
        if not targets:
            return
        collected = is_test_module(self.path)
        for info in self.functions:
            if info.name in targets and not (info.kind is FunctionKind.TEST and collected):
                info.isolated = True

    def _mark_script_functions(self) -> None:
        """A module named as a test module that pytest collects nothing from (no test
        function or ``Test*`` class, no fixture, no xunit function) and that runs as a script
        (a top-level ``if __name__ == "__main__":``), imported by no module of its tree: its
        functions run in the script's own process, never in pytest's (``*_test.py``
        examples with a ``main()``), so they count as isolated. Its top level still runs
        when pytest imports it, so GPU008 still looks there."""
        if self.imported_by_tree or not is_test_module(self.path) or \
                self.defines_pytest_items():
            return
        body = self.tree.body
        if any(isinstance(s, ast.ClassDef) and s.name.startswith("Test") for s in body) or \
                not any(isinstance(s, ast.If) and is_main_guard(s) for s in body):
            return
        for info in self.functions:
            info.isolated = True

    # ------------------------------------------------------------------ queries
    def qualified(self, node: ast.AST) -> str | None:
        """The qualified name an expression refers to through imports (``vllm.LLM``), in
        the scope it is in: a parameter or local binding of the name shadows the import, a
        local alias (``Engine = LLM``) or import follows it."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if self.scopes is not None:
            head_node = node
            while isinstance(head_node, ast.Attribute):
                head_node = head_node.value
            assert isinstance(head_node, ast.Name)  # a dotted name ends in one
            rebound, scoped = self.scopes.lookup(head_node)
            if rebound:
                if scoped is None:
                    return None
                return f"{scoped}.{rest}" if rest else scoped
        if head not in self.imports:
            return None
        base = self.imports[head]
        return f"{base}.{rest}" if rest else base

    def is_engine_call(self, node: ast.AST) -> bool:
        """True for a call of a configured engine class (``vllm.LLM(...)`` however imported)."""
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        # What ``a.b.X`` refers to ends in ``.X`` (:meth:`qualified`): an attribute that is
        # no engine class's last name needs no lookup.
        if isinstance(func, ast.Attribute) and func.attr not in self._engine_last_names():
            return False
        qualified = self.qualified(func)
        return qualified is not None and self.is_engine_class(qualified)

    def _engine_last_names(self) -> frozenset[str]:
        """The last segment of every qualified name :meth:`is_engine_class` accepts."""
        names = self._engine_last
        if names is None:
            classes = self.config.engine_classes
            names = self._engine_last = frozenset(
                name.rsplit(".", 1)[-1]
                for name in (*classes, *(k for k, v in REEXPORTS.items() if v in classes)))
        return names

    def is_engine_class(self, qualified: str) -> bool:
        """True when a qualified name is a configured engine class, re-exports included."""
        classes = self.config.engine_classes
        return qualified in classes or REEXPORTS.get(qualified) in classes

    def builds_engine(self, node: ast.AST) -> bool:
        """True for an engine class call or one of its ``from_*`` factory classmethods."""
        return self.is_engine_call(node) or self.is_engine_factory_call(node)

    def is_engine_factory_call(self, node: ast.AST) -> bool:
        """True for a factory classmethod of an engine class (``LLM.from_engine_args(...)``)."""
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or \
                not node.func.attr.startswith("from_"):
            return False
        owner = self.qualified(node.func.value)
        return owner is not None and self.is_engine_class(owner)

    def is_runner_call(self, node: ast.AST) -> bool:
        """True for ``vllm_runner(...)`` or ``VllmRunner(...)`` (configured names), or a call
        of a runner class a conftest pytest loads for this module defines
        (:data:`RUNNER_CLASS`: ``DPVllmRunner(...)``)."""
        if not isinstance(node, ast.Call):
            return False
        name = last_name(node.func)
        if name is None:
            return False
        return name == self.config.runner_fixture or name in self.config.runner_classes or \
            name in self.conftest_runner_classes

    def is_engine_call_stmt(self, stmt: ast.stmt) -> bool:
        """True when ``stmt`` (at any depth) builds an engine or a runner."""
        return any(
            isinstance(n, ast.Call) and (self.builds_engine(n) or self.is_runner_call(n))
            for n in walk_breadth(stmt)
        )

    def engine_names(self, func: FunctionInfo) -> set[str]:
        """Every name ``func`` binds to an engine."""
        return set(self.function_bindings(func).engines)

    def runner_attributes(self) -> frozenset[str]:
        """Attributes of a runner that hold its engine (``llm``, ``model``, configured)."""
        return frozenset({self.config.runner_attribute, "llm", "model"})

    def cleanup_call_kind(self, call: ast.Call) -> str | None:
        """Name the manual cleanup a call performs, or ``None``.

        Recognised: ``gc.collect()``, ``torch.<device>.empty_cache()``, vLLM's cleanup
        helpers (``cleanup_dist_env_and_memory`` ...; under ``target = "vllm"`` also the
        older ``cleanup()`` of vLLM's ``tests/conftest.py``/``tests/utils.py``), configured
        ``cleanup-functions`` (a bare name matches the call's last name, a dotted one its
        qualified name however it is imported), a direct ``....engine_core.shutdown()``, and
        a cleanup helper of the module (:attr:`cleanup_helpers`: ``_shutdown(llm)``).
        """
        kind = self._known_cleanup_kind(call)
        if kind is None and isinstance(call.func, ast.Name) and \
                call.func.id in self.cleanup_helpers:
            return f"{call.func.id}()"
        if kind is None and self.imported_helpers:
            helper = self.imported_helper(call.func)
            if helper is not None and helper.kind == "x" and helper.extra == WHOLE_CLEANUP:
                return f"{dotted_name(call.func) or helper.name}()"
        return kind

    @property
    def cleanup_helpers(self) -> frozenset[str]:
        """The module-level functions of this module whose whole body is hand cleanup of
        what they are given and of the process (computed once): ``def _shutdown(llm):``
        with only ``llm.llm_engine.engine_core.shutdown()``, ``llm.shutdown()``, ``del
        llm``, ``gc.collect()``, ``torch.cuda.empty_cache()`` and the other cleanup calls
        (:meth:`cleanup_call_kind`), each alone or under an ``if`` of its own. A call of one
        is manual cleanup, like a call of vLLM's own cleanup helpers."""
        if self._cleanup_helpers is None:
            self._cleanup_helpers = frozenset(
                func.name for func in self.functions
                if func.kind is FunctionKind.HELPER and func.parent is None
                and func.owner_class is None and not func.node.decorator_list
                and _only_cleanup(self, _without_docstring(func.node.body), set(func.params)))
        return self._cleanup_helpers

    @property
    def shutdown_helpers(self) -> dict[str, int]:
        """The module-level functions of this module, other than its
        :attr:`cleanup_helpers`, that shut down an engine they are given and do other work
        too, by name, with the index of that parameter (computed once): the body calls
        ``.shutdown()`` on the parameter or on an attribute of it
        (``engine_core.shutdown()``, ``llm.llm_engine.engine_core.shutdown()``), or hands
        it (or an attribute of it) to another such function or cleanup helper of the
        module, as vllm-spyre's ``force_engine_shutdown(llm)`` hands
        ``llm.llm_engine.engine_core`` to a helper that shuts it down, then sleeps. A call
        of one on an engine the caller owns is hand cleanup that no fix removes (the
        runner's teardown would not do the other work)."""
        if self._shutdown_helpers is None:
            self._shutdown_helpers = _shutdown_helpers(self)
        return self._shutdown_helpers

    def shutdown_helper_call(self, call: ast.Call) -> tuple[str, int, str] | None:
        """For a call of a shutdown helper (:attr:`shutdown_helpers`) of the module or of
        another module of the tree (summary kind ``"x"`` with the parameter's index):
        ``(the call as spelled, the index of the engine's parameter, where it is defined:
        "line N" or "`tests/utils.py` (line N)")``; else ``None``."""
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.shutdown_helpers:
            line = next(f.node.lineno for f in self.functions if f.name == func.id
                        and f.parent is None and f.owner_class is None)
            return func.id, self.shutdown_helpers[func.id], f"line {line}"
        if not self.imported_helpers:
            return None
        helper = self.imported_helper(func)
        if helper is None or helper.kind != "x" or not helper.extra.isdigit():
            return None
        return dotted_name(func) or helper.name, int(helper.extra), helper.where

    def _known_cleanup_kind(self, call: ast.Call) -> str | None:
        """:meth:`cleanup_call_kind` but for the module's own cleanup helpers."""
        func = call.func
        qualified = self.qualified(func)
        if qualified == "gc.collect":
            return "gc.collect()"
        if qualified is not None:
            parts = qualified.split(".")
            if parts[-1] == "empty_cache" and (
                (parts[0] == "torch" and len(parts) >= 3 and parts[1] in CACHE_DEVICES)
                or (len(parts) >= 2 and parts[-2] == "current_platform")
            ):
                return f"{'.'.join(parts[-3:])}()"
        name = last_name(func)
        if name in CLEANUP_FUNCTIONS or (name and name in self.config.cleanup_functions):
            return f"{name}()"
        if qualified is not None and qualified in self.config.cleanup_functions:
            return f"{name}()"  # a dotted entry (`pkg.mod.force_shutdown`), however imported
        if name == LEGACY_VLLM_CLEANUP and self.config.target == "vllm" and qualified and \
                qualified.split(".")[-2:-1] in (["conftest"], ["utils"]):
            return f"{name}()"
        if name == "shutdown" and isinstance(func, ast.Attribute):
            target = dotted_name(func.value) or ""
            if target.endswith("engine_core"):
                return "engine_core.shutdown()"
        return None

    def provides_engine(self, value: ast.AST, func: FunctionInfo) -> bool:
        """True when ``value`` (a yield/return value) is an engine, ``runner.llm``, or an
        alias of either, not wrapped in ``weakref.proxy``."""
        return self.engine_expr_kind(value, func) is not None

    def engine_expr_kind(self, value: ast.AST, func: FunctionInfo) -> str | None:
        """Classify an expression that hands out an engine: ``"engine"`` (a construction
        or a name bound to one), ``"runner-attr"`` (``runner.llm`` or an alias of it), or
        ``None`` (anything else, a ``weakref.proxy`` included)."""
        if self.builds_engine(value):
            return "engine"
        names = self.function_bindings(func)
        if isinstance(value, ast.Attribute) and value.attr in self.runner_attributes():
            if isinstance(value.value, ast.Name) and value.value.id in names.runners:
                return "runner-attr"
        if isinstance(value, ast.Name):
            if value.id in names.engines:
                return "engine"
            if value.id in names.strong_aliases:
                return "runner-attr"
        return None

    def function_bindings(self, func: FunctionInfo) -> Bindings:
        """Names a function binds to engines, runners and strong runner aliases (cached)."""
        key = id(func.node)
        cached = self._bindings_cache.get(key)
        if cached is None:
            if self._busy_functions is None:
                # Only functions that build an engine or call a runner can bind one.
                self._busy_functions = {id(site.function.node) for site in self.engines
                                        if site.function is not None}
                self._busy_functions |= {id(call.function.node) for call in self.runner_calls
                                         if call.function is not None}
                if self.engine_factories or self.imported_helpers or self.tuple_factories \
                        or self.method_factories or self.imported_method_factories \
                        or self.factory_fixtures:
                    self._busy_functions |= {
                        id(f.node) for f in self.functions
                        if any(self.factory_called(n) or self.helper_called(n)
                               or self.tuple_factory_called(n) for n in self.nodes_of(f))}
            if key not in self._busy_functions:
                return _EMPTY_BINDINGS
            cached = Bindings.collect(self, func)
            self._bindings_cache[key] = cached
        return cached

    def nodes_of(self, func: FunctionInfo) -> list[ast.AST]:
        """Every node of ``func``'s body, nested functions and classes excluded (cached: the
        rules walk the same functions many times)."""
        key = id(func.node)
        nodes = self._nodes_cache.get(key)
        if nodes is None:
            nodes = self._nodes_cache[key] = walk_nodes(func.node.body, NESTED_SCOPES)
        return nodes

    def bound_names(self, func: FunctionInfo) -> frozenset[str]:
        """Names ``func`` binds itself: its parameters and the names its body stores to
        (assignments, loop and ``with`` targets; nested functions and classes excluded).
        Cached: several rules ask it of the same functions."""
        key = id(func.node)
        names = self._bound_cache.get(key)
        if names is None:
            stored = {n.id for n in self.nodes_of(func)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            names = self._bound_cache[key] = frozenset(stored | set(func.params))
        return names

    @property
    def engine_factories(self) -> dict[str, int]:
        """The module-level helper functions that build an engine and return it, by name, with
        the line of their ``def``: ``return LLM(...)``, or ``llm = LLM(...)`` ... ``return
        llm`` (computed once). A function that calls one owns the engine it gets back."""
        if self._factories is None:
            self._factories, self._tuple_factories = {}, {}
            methods: dict[str, dict[str, int]] = {}
            # A method can be a factory only if it builds an engine itself.
            building = {id(s.function) for s in self.engines if s.function is not None
                        and s.function.owner_class is not None}
            for func in self.functions:
                if caching_decorator(func.node) is not None:
                    continue  # what it returns is the cache's, not its caller's
                if func.owner_class is not None:
                    if id(func) in building and func.parent is None and not func.isolated \
                            and _may_be_factory_method(func):
                        returns, engine = self._returned_values(func)
                        if any(engine(value) for value in returns):
                            methods.setdefault(func.owner_class.name, {})[func.name] = \
                                func.node.lineno
                    continue
                if func.kind is not FunctionKind.HELPER or func.parent is not None or \
                        func.isolated:
                    continue
                returns, engine = self._returned_values(func)
                if any(engine(value) for value in returns):
                    self._factories[func.name] = func.node.lineno
                    continue
                place = next((i for value in returns if isinstance(value, ast.Tuple)
                              for i, e in enumerate(value.elts) if engine(e)), None)
                if place is not None:
                    self._tuple_factories[func.name] = (func.node.lineno, place)
            self._method_factories = _inherited(self, methods) if methods else {}
        return self._factories

    def _returned_values(self, func: FunctionInfo
                         ) -> tuple[list[ast.expr], Callable[[ast.AST], bool]]:
        """What ``func``'s ``return`` statements return, and the test of whether a value is
        an engine ``func`` builds: a construction, or a name ``func`` assigned one to."""
        nodes = self.nodes_of(func)
        built = {t.id for n in nodes if isinstance(n, ast.Assign) and self.builds_engine(n.value)
                 for t in n.targets if isinstance(t, ast.Name)}

        def engine(value: ast.AST) -> bool:
            return self.builds_engine(value) or (isinstance(value, ast.Name)
                                                 and value.id in built)

        return [n.value for n in nodes if isinstance(n, ast.Return) and n.value is not None], \
            engine

    def enclosing(self, node: ast.AST, kinds: tuple[type[T], ...]) -> T | None:
        """The innermost node of one of ``kinds`` holding ``node``, else ``None``."""
        current = self.parent(node)
        while current is not None and not isinstance(current, kinds):
            current = self.parent(current)
        return current

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        """The innermost class statement holding ``node``, else ``None``."""
        return self.enclosing(node, (ast.ClassDef,))

    @property
    def classes(self) -> list[ast.ClassDef]:
        """Every class statement of the module, at any depth, in source order."""
        return self._classes

    @property
    def factory_fixtures(self) -> dict[str, int]:
        """The fixtures that hand out a factory of engines and keep none of them, by name,
        with the line of their ``def`` (``0``: one of a conftest, whose module does not
        define a fixture of that name): the fixture returns or yields a function it defines
        whose every ``return`` is an engine that function builds
        (``def _make(**kw): return LLM(MODEL, **kw)``), and which neither stores nor
        registers it (no ``append``, ``addfinalizer``, ``enter_context``, no assignment to an
        attribute or item, no ``global``/``nonlocal``). A test or fixture that calls the
        factory it receives owns the engine it gets (computed once)."""
        if self._factory_fixtures is None:
            # A class's fixture of the name serves that class's tests alone: it hides a
            # conftest's, and leaves the module's own for the other tests
            # (:meth:`factory_fixture_called` looks at the class).
            local = {f.fixture_name for f in self.functions
                     if f.fixture_name is not None and f.parent is None}
            found = {name: 0 for name in self._entries.factory_fixtures if name not in local}
            for name, helper in self._imported_fixtures("g", local):
                found[name] = 0
                self.imported_factory_fixtures[name] = helper.module
            for func in self.functions:
                if func.fixture_name is not None and func.parent is None and \
                        func.owner_class is None and self._hands_out_factory(func):
                    found[func.fixture_name] = func.node.lineno
            self._factory_fixtures = found
        return self._factory_fixtures

    def _hands_out_factory(self, fixture: FunctionInfo) -> bool:
        """Whether the fixture ``fixture`` hands out a factory of engines it keeps none of
        (:attr:`factory_fixtures`)."""
        nested = {f.name: f for f in self.functions if f.parent is fixture}
        handed = [n.value for n in self.nodes_of(fixture)
                  if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None]
        if len(handed) != 1 or not isinstance(handed[0], ast.Name) or \
                handed[0].id not in nested:
            return False
        factory = nested[handed[0].id]
        if caching_decorator(factory.node) is not None:
            return False  # its cache keeps the engines
        returns, engine = self._returned_values(factory)
        if not returns or not all(engine(value) for value in returns):
            return False
        for node in walk_breadth(factory.node):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                return False
            if isinstance(node, ast.Call) and last_name(node.func) in _KEEPS_ENGINE:
                return False
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets):
                    return False
        return True

    @property
    def conftest_factory_shares(self) -> Mapping[str, str]:
        """The conftests' fixtures that hand out a factory of engines or runners, by name,
        with the share their engine or runner call writes (:data:`FACTORY_SHARE`)."""
        return self._entries.factory_shares

    @property
    def own_runner_instance(self) -> bool:
        """Whether the project's own runner fixture (:attr:`own_runner_fixture`) hands out
        one runner it builds rather than a factory (:func:`runner_fixture_hands_instance`,
        :data:`OWN_RUNNER_INSTANCE`)."""
        if self.own_runner_fixture == "this module":
            return runner_fixture_hands_instance(self)
        return self.own_runner_fixture is not None and self._entries.own_runner_instance

    @property
    def own_runner_model(self) -> str | None:
        """The name the project's own runner fixture (:attr:`own_runner_fixture`) takes the
        model under, where it hands out a class of its module whose ``__init__`` takes it
        first, with no default, under another name than ``model``
        (:data:`OWN_RUNNER_MODEL`); else ``None``."""
        if self.own_runner_fixture == "this module":
            return runner_model_parameter(self)
        return self._entries.own_runner_model if self.own_runner_fixture is not None \
            else None

    def top_fixture(self, name: str) -> FunctionInfo | None:
        """The fixture the module defines at its top level that tests request as
        ``name``, else ``None``."""
        return next((f for f in self.functions if f.fixture_name == name and f.parent is None
                     and f.owner_class is None), None)

    def handed_out_factories(self) -> dict[str, ast.Call]:
        """The fixtures of the module that hand out a nested function building an engine
        or returning a runner (which its caller enters), by the name tests request them
        by, with that function's engine or runner call: each call of the factory builds
        one engine (computed once)."""
        return self.derived(_handed_out_factories)

    def factory_fixture_called(self, node: ast.AST) -> str | None:
        """The name of the factory fixture (:attr:`factory_fixtures`) whose factory ``node``
        calls: ``make_llm(...)`` in a test or fixture that takes ``make_llm`` as a
        parameter; else ``None``."""
        fixtures = self.factory_fixtures
        if not fixtures or not isinstance(node, ast.Call) or \
                not isinstance(node.func, ast.Name) or node.func.id not in fixtures:
            return None
        scope = self.enclosing(node, FUNCTION_DEFS)
        if scope is None or node.func.id not in parameter_names(scope.args, variadic=False):
            return None
        cls = self.enclosing_class(scope)
        if cls is not None and any(
                f.owner_class is cls and f.fixture_name == node.func.id for f in self.functions):
            return None  # the class's own fixture of the name
        return node.func.id

    @property
    def test_classes(self) -> frozenset[str]:
        """The classes of the module whose ``test*`` methods pytest runs: those named
        ``Test*``, and the classes of the module they derive from (named by a plain name,
        at any depth: ``class TestQwen(_DualBase)`` runs ``_DualBase``'s tests; computed
        once)."""
        if self._test_classes is None:
            found = {c.name for c in self._classes if c.name.startswith("Test")}
            bases = self.local_bases
            todo = list(found)
            while todo:
                for base in bases.get(todo.pop(), ()):
                    if base not in found:
                        found.add(base)
                        todo.append(base)
            self._test_classes = frozenset(found)
        return self._test_classes

    @property
    def test_aliases(self) -> frozenset[str]:
        """The names a test class's body binds to a ``test*`` attribute
        (``test_multi_image = _multi_image_test``): the module-level functions of those
        names are tests of the class (computed once)."""
        if self._test_aliases is None:
            tests = self.test_classes
            self._test_aliases = frozenset(
                stmt.value.id for cls in self._classes if cls.name in tests
                for stmt in cls.body if isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.Name)
                and any(isinstance(t, ast.Name) and t.id.startswith("test")
                        for t in stmt.targets))
        return self._test_aliases

    @property
    def local_bases(self) -> dict[str, tuple[str, ...]]:
        """The bases of each class of the module that are classes of the module, named by a
        plain name, in the order written, by the class's name (a later class of a name
        takes the place of an earlier one; computed once)."""
        if self._local_bases is None:
            names = {c.name for c in self._classes}
            self._local_bases = {c.name: tuple(b.id for b in c.bases
                                               if isinstance(b, ast.Name) and b.id in names)
                                 for c in self._classes}
        return self._local_bases

    @property
    def method_factories(self) -> dict[str, dict[str, int]]:
        """The methods that build an engine and return it (as :attr:`engine_factories`
        does), by the name of a class of the module that has them, its own or inherited
        from a base class of the module: ``{"TestModels": {"_make_llm": 8}}`` (the line of
        the ``def``; computed once). A method of the class that calls one
        (``llm = self._make_llm(...)``) owns the engine it gets back."""
        if self._method_factories is None:
            self.engine_factories  # noqa: B018  (one pass finds every kind of factory)
        assert self._method_factories is not None
        return self._method_factories

    def method_factory_of(self, node: ast.AST) -> tuple[str, int] | None:
        """For a call of a factory method (:attr:`method_factories`) on ``self`` or ``cls``
        within a method of a class that has it, or on a class of the module that has it
        (``TestLora._make_llm(self)``, a static method's ``TestLora._make_llm()``), anywhere
        in the module: ``(the call as spelled, "self._make_llm"; the line of the method's
        ``def``)``; else ``None``."""
        methods = self.method_factories
        found = self._method_call(node, methods) if methods else None
        if found is None:
            return None
        spelled, owner, name = found
        line = methods.get(owner, {}).get(name)
        return None if line is None else (spelled, line)

    def _method_call(self, node: ast.AST, methods: Mapping[str, Mapping[str, object]]
                     ) -> tuple[str, str, str] | None:
        """For a call ``node`` of a method one of ``methods`` (class name -> its methods)
        names, on ``self`` or ``cls`` within a class, on a class of the module by its name,
        on an instance of one bound once to a name (:meth:`_instance_of`) or made for the
        call (``EngineFactory().create()``): ``(the call as spelled, the class's name, the
        method's name)``."""
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        if not isinstance(func, ast.Attribute) or \
                not any(func.attr in names for names in methods.values()):
            return None
        made = func.value
        if isinstance(made, ast.Call) and isinstance(made.func, ast.Name) and \
                made.func.id in methods and made.func.id in self.local_bases:
            # An instance made for the call: ``TestMaker()._make_llm(...)``.
            return f"{made.func.id}().{func.attr}", made.func.id, func.attr
        if not isinstance(made, ast.Name):
            return None
        owner = made.id
        if owner in ("self", "cls"):
            current = self.enclosing_class(node)
            if current is None:
                return None
            return f"{owner}.{func.attr}", current.name, func.attr
        if owner in methods and not (self.scopes is not None and
                                     self.scopes.lookup(made)[0]):
            return f"{owner}.{func.attr}", owner, func.attr  # the class, not a local name
        instance = self._instance_of(made)
        if isinstance(instance, str) and instance in methods:
            return f"{owner}.{func.attr}", instance, func.attr
        return None

    def _instance_of(self, name: ast.Name) -> str | ImportedHelper | None:
        """The class whose instance ``name`` holds, when it is bound once, to a call of the
        class (``factory = EngineFactory()``), in the function that reads it and nowhere
        else, or at module level and nowhere else, and is no parameter: a class of the
        module, by its name, or a class of another module of the tree with factory methods
        (kind ``"m"``); else ``None``."""
        scope = self.enclosing(name, FUNCTION_SCOPES)
        if scope is not None and name.id in parameter_names(scope.args):
            return None

        def stores(root: ast.AST) -> list[ast.Name]:
            return [n for n in walk_breadth(root) if isinstance(n, ast.Name)
                    and n.id == name.id and not isinstance(n.ctx, ast.Load)]

        found = stores(scope) if scope is not None else []
        if not found:
            found = stores(self.tree)
        if len(found) != 1:
            return None
        assign = self.parent(found[0])
        if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1
                and assign.targets[0] is found[0] and isinstance(assign.value, ast.Call)):
            return None
        cls = assign.value.func
        if isinstance(cls, ast.Name) and cls.id in self.local_bases:
            return cls.id
        helper = self.imported_helper(cls)
        return helper if helper is not None and helper.kind == "m" else None

    @property
    def tuple_factories(self) -> dict[str, tuple[int, int]]:
        """The module-level helper functions that build an engine and return it with other
        values in a tuple (``return llm, params``), by name, with the line of their ``def``
        and the engine's place in the tuple (computed once). A function that unpacks the
        call (``llm, params = setup(...)``) owns that engine, and the helper's fix is one unit
        with its calls (:mod:`lint_gpu_tests.fixplan.factories`)."""
        if self._tuple_factories is None:
            self.engine_factories  # noqa: B018  (one pass finds both kinds of helper)
        assert self._tuple_factories is not None
        return self._tuple_factories

    @property
    def imported_method_factories(self) -> dict[str, dict[str, ImportedHelper]]:
        """The factory methods a class of the module inherits from a class of another module
        of the tree (:meth:`helper_called` of kind ``"m"``: ``class TestLora(EngineMixin)``
        after ``from tests.utils import EngineMixin``), directly or through classes of the
        module, by the class's name: ``{"TestLora": {"_make_llm": <EngineMixin>}}``; a
        method of that name in the class or a base of the module between takes their place
        (computed once)."""
        if self._imported_methods is None:
            self._imported_methods = {}
            if self.imported_method_names:
                self._imported_methods = _inherited_from_tree(self)
        return self._imported_methods

    def imported_method_of(self, node: ast.AST) -> tuple[str, ImportedHelper] | None:
        """For a call of a factory method a class of the module inherits from a class of
        another module (:attr:`imported_method_factories`), on ``self`` or ``cls`` within
        a method of that class, or on the class itself: ``(the call as spelled,
        "self._make_llm"; the class that defines it)``; else ``None``. A factory method of
        the module (:meth:`method_factory_of`) comes first."""
        names = self.imported_method_names
        if not names or not isinstance(node, ast.Call) or \
                not isinstance(node.func, ast.Attribute) or node.func.attr not in names:
            return None
        methods = self.imported_method_factories
        found = self._method_call(node, methods) if methods else None
        if found is not None:
            spelled, owner, name = found
            if name in self.method_factories.get(owner, {}):
                return None
            helper = methods.get(owner, {}).get(name)
            return None if helper is None else (spelled, helper)
        func = node.func
        if not isinstance(func.value, ast.Name) or func.value.id in ("self", "cls"):
            return None
        instance = self._instance_of(func.value)  # an instance of the class itself
        if isinstance(instance, ImportedHelper) and func.attr in instance.methods:
            return f"{func.value.id}.{func.attr}", instance
        return None

    @property
    def imported_method_names(self) -> frozenset[str]:
        """The names of the factory methods of the classes of other modules of the tree
        this module imports (kind ``"m"``; computed once)."""
        if self._imported_method_names is None:
            self._imported_method_names = frozenset(
                m for h in self.imported_helpers.values() for m in h.methods)
        return self._imported_method_names

    def tuple_factory_called(self, node: ast.AST) -> str | None:
        """The name of the tuple factory (:attr:`tuple_factories`) ``node`` calls, else
        ``None``."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in self.tuple_factories:
            return node.func.id
        return None

    def tuple_helper_of(self, node: ast.AST) -> tuple[str, int, str] | None:
        """For a call of a helper that returns the engine in a tuple, of the module
        (:attr:`tuple_factories`) or of another module of the tree (:meth:`helper_called`,
        kind ``"t"``): ``(its name as the call spells it, the engine's index in the tuple,
        where it is defined: "line N" or "`tests/utils.py` (line N)")``; else ``None``."""
        name = self.tuple_factory_called(node)
        if name is not None:
            line, place = self.tuple_factories[name]
            return name, place, f"line {line}"
        helper = self.helper_called(node)
        if helper is not None and helper.kind == "t" and helper.extra.isdigit():
            spelled = dotted_name(node.func) or helper.name  # type: ignore[attr-defined]
            return spelled, int(helper.extra), helper.where
        return None

    def factory_called(self, node: ast.AST) -> str | None:
        """The name of the factory helper ``node`` calls, as the call spells it: one of the
        module (:attr:`engine_factories`: ``setup_engine(...)``) or one of another module
        of the tree that builds and returns an engine (:meth:`helper_called`:
        ``u.setup_engine(...)``); else ``None``."""
        if not isinstance(node, ast.Call):
            return None
        if isinstance(node.func, ast.Name) and node.func.id in self.engine_factories:
            return node.func.id
        method = self.method_factory_of(node) or self.imported_method_of(node)
        if method is not None:
            return method[0]
        fixture = self.factory_fixture_called(node)
        if fixture is not None:
            return fixture
        helper = self.helper_called(node)
        if helper is not None and helper.kind == "f":
            return dotted_name(node.func)
        return None

    @property
    def imported_helpers(self) -> dict[str, ImportedHelper]:
        """The engine helpers of other modules of the tree (:data:`ENGINE_HELPER`) that
        this module imports, by the qualified name it reaches each by (computed once; a
        module importing none of them pays one look-up per import)."""
        found = self._imported_helpers
        if found is None:
            found = self._imported_helpers = {}
            view = self._entries
            if view.helpers:
                for imported in (*self.imports.values(), *self.relative_imports.values()):
                    for key in view.under.get(imported, ()):
                        helper = ImportedHelper.parse(view.helpers[key])
                        if helper is not None:
                            found[key] = helper
        return found

    def helper_called(self, node: ast.AST) -> ImportedHelper | None:
        """The engine helper of another module of the tree that ``node`` calls
        (``setup_engine(...)`` after ``from tests.utils import setup_engine``,
        ``u.setup_engine(...)`` after ``import tests.utils as u``, ``Helper(...)``), else
        ``None``."""
        if not isinstance(node, ast.Call):
            return None
        found = self.imported_helper(node.func)
        return None if found is None or found.kind in ("m", "x", "e", "g", "p") else found

    def imported_helper(self, func: ast.expr) -> ImportedHelper | None:
        """The engine helper of another module of the tree that the expression ``func``
        names, of any kind (a class with factory methods too: a base class), else
        ``None``."""
        helpers = self.imported_helpers
        if not helpers:
            return None
        qualified = self.qualified(func)
        if qualified is None:
            dotted = dotted_name(func)
            head, _, rest = (dotted or "").partition(".")
            base = self.relative_imports.get(head)
            if base is None or (self.scopes is not None and isinstance(func, ast.Name)
                                and self.scopes.lookup(func)[0]):
                return None
            qualified = f"{base}.{rest}" if rest else base
        return helpers.get(qualified)

    def owns_engine(self, func: FunctionInfo) -> bool:
        """True when ``func`` builds an engine, holds a runner, gets an engine from a factory
        helper of the module (:attr:`engine_factories`), or receives an engine or runner
        fixture, from this module or a conftest (GPU004)."""
        names = self.function_bindings(func)
        if names.engines or names.runners or names.built_engine or names.received:
            return True
        if self.config.runner_fixture in func.params:
            return True
        return any(param in self.engine_fixtures for param in func.params)

    @property
    def lines(self) -> list[str]:
        """The source lines (computed once)."""
        if self._lines is None:
            self._lines = self.text.splitlines()
        return self._lines

    def statement_of(self, node: ast.AST) -> ast.stmt:
        """The innermost statement holding ``node``."""
        current: ast.AST = node
        while not isinstance(current, ast.stmt):
            parent = self.parent(current)
            assert parent is not None, "node is not inside a statement"
            current = parent
        return current

    _bindings_cache: dict[int, Bindings] = field(default_factory=dict)
    _derived: dict[Callable[[ModuleAnalysis], Any], object] = field(default_factory=dict)
    _classes: list[ast.ClassDef] = field(default_factory=list)
    _nodes_cache: dict[int, list[ast.AST]] = field(default_factory=dict)
    _bound_cache: dict[int, frozenset[str]] = field(default_factory=dict)
    _conftest_fixtures: frozenset[str] = frozenset()
    _entries: EntriesView = field(default_factory=lambda: _entries_view(frozenset()))
    #: Runner classes other than the configured ones that the conftests pytest loads for
    #: this module define (:data:`RUNNER_CLASS`).
    conftest_runner_classes: frozenset[str] = frozenset()
    _lines: list[str] | None = None
    _engine_last: frozenset[str] | None = None
    #: ids of the statements in the module's own scope (not inside a def or class).
    _top_ids: set[int] | None = None
    _busy_functions: set[int] | None = None
    _factories: dict[str, int] | None = None
    _tuple_factories: dict[str, tuple[int, int]] | None = None
    _method_factories: dict[str, dict[str, int]] | None = None
    _imported_methods: dict[str, dict[str, ImportedHelper]] | None = None
    _local_bases: dict[str, tuple[str, ...]] | None = None
    _test_classes: frozenset[str] | None = None
    _test_aliases: frozenset[str] | None = None
    _imported_method_names: frozenset[str] | None = None
    _factory_fixtures: dict[str, int] | None = None
    _cleanup_helpers: frozenset[str] | None = None
    _shutdown_helpers: dict[str, int] | None = None
    _imported_helpers: dict[str, ImportedHelper] | None = None
    _indexed: set[int] = field(default_factory=set)
    _fully_indexed: bool = False
    _top: TopLevel | None = None


_STATEMENT_NODES = (ast.stmt, ast.excepthandler, ast.match_case)


@dataclass(frozen=True)
class EntriesView:
    """What a module's conftest entries (:attr:`ModuleAnalysis.conftest_entries`) hold, by
    kind (made once per set of entries: every module of a directory shares one).

    Attributes:
        fixtures: the engine fixtures' names (the entries that are identifiers).
        runner_classes: the runner classes (:data:`RUNNER_CLASS`).
        factory_fixtures: the factory fixtures (:data:`FACTORY_FIXTURE`).
        factory_shares: name -> share, of the fixtures handing out a factory of engines or
            runners (:data:`FACTORY_SHARE`).
        own_runner_model: the name the project's runner fixture takes the model under
            (:data:`OWN_RUNNER_MODEL`), or ``None``.
        own_runner_instance: the project's runner fixture hands out one runner it builds
            (:data:`OWN_RUNNER_INSTANCE`).
        helpers: qualified name -> entry, of the engine helpers (:data:`ENGINE_HELPER`).
        under: a module's or a helper's qualified name, as an import binds it
            (``tests.utils``, ``tests``, ``tests.utils.setup_engine``) -> the helpers'
            qualified names under it: a module imports one only through these.
    """

    fixtures: frozenset[str]
    runner_classes: frozenset[str]
    helpers: dict[str, str]
    under: dict[str, tuple[str, ...]]
    factory_fixtures: frozenset[str] = frozenset()
    factory_shares: Mapping[str, str] = field(default_factory=dict)
    own_runner_model: str | None = None
    own_runner_instance: bool = False


_VIEWS: dict[frozenset[str], EntriesView] = {}
MAX_VIEWS = 64


def _entries_view(entries: frozenset[str]) -> EntriesView:
    """The :class:`EntriesView` of ``entries`` (kept for the process, at most
    :data:`MAX_VIEWS`)."""
    view = _VIEWS.get(entries)
    if view is not None:
        return view
    helpers: dict[str, str] = {}
    under: dict[str, list[str]] = {}
    for entry in entries:
        if entry.startswith(ENGINE_HELPER):
            key = entry[len(ENGINE_HELPER):].split("|", 1)[0]
            helpers[key] = entry
            parts = key.split(".")
            for k in range(1, len(parts) + 1):
                under.setdefault(".".join(parts[:k]), []).append(key)
    view = EntriesView(
        frozenset(n for n in entries if n.isidentifier()),
        frozenset(n[len(RUNNER_CLASS):] for n in entries if n.startswith(RUNNER_CLASS)),
        helpers, {k: tuple(v) for k, v in under.items()},
        frozenset(n[len(FACTORY_FIXTURE):] for n in entries if n.startswith(FACTORY_FIXTURE)),
        dict(n[len(FACTORY_SHARE):].split("|", 1) for n in entries
             if n.startswith(FACTORY_SHARE) and "|" in n),
        next((n[len(OWN_RUNNER_MODEL):] for n in entries if n.startswith(OWN_RUNNER_MODEL)),
             None),
        OWN_RUNNER_INSTANCE in entries)
    if len(_VIEWS) >= MAX_VIEWS:
        _VIEWS.clear()
    _VIEWS[entries] = view
    return view


def _call_words(module: ModuleAnalysis) -> tuple[str, ...]:
    """The names an engine or runner call of ``module`` spells somewhere in its top-level
    statement: the last name of each engine class (``vllm.LLM``, ``LLM.from_engine_args``,
    and the import a local alias ``Engine = LLM`` copies), every name an import binds to
    one (``from vllm import LLM as E``), the runner fixture and the runner classes (matched
    by their last name; those of the conftests too)."""
    config = module.config
    words = {cls.rsplit(".", 1)[-1] for cls in config.engine_classes}
    words.update(name for name, qualified in module.imports.items()
                 if module.is_engine_class(qualified))
    words.add(config.runner_fixture)
    words.update(config.runner_classes)
    words.update(module.conftest_runner_classes)
    return tuple(sorted(w for w in words if w))




#: Nodes the walker never needs to enter: names, constants and the operator/context
#: singletons hold no call, function, class, ``if`` or ``with``.
_WALKER_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.unaryop,
                  ast.boolop, ast.cmpop, ast.alias, ast.Import, ast.ImportFrom, ast.Pass)


def _unpacked_engine(module: ModuleAnalysis, targets: Sequence[ast.expr],
                    value: ast.expr) -> str | None:
    """The name an unpacking of a tuple factory's call binds to the engine
    (``llm, params = setup(...)``: ``llm``), else ``None``."""
    found = module.tuple_helper_of(value)
    if found is None or len(targets) != 1 or not isinstance(targets[0], (ast.Tuple, ast.List)):
        return None
    _, place, _ = found
    elts = targets[0].elts
    if any(isinstance(e, ast.Starred) for e in elts) or place >= len(elts):
        return None
    target = elts[place]
    return target.id if isinstance(target, ast.Name) else None


def _may_be_factory_method(func: FunctionInfo) -> bool:
    """True for a method that callers can call for an engine: a helper or plain method (not a
    test or a fixture, which pytest calls), not a dunder method (``__init__`` stores,
    ``__enter__`` is a context manager's) and not a property."""
    if func.kind not in (FunctionKind.HELPER, FunctionKind.METHOD):
        return False
    name = func.name
    if name.startswith("__") and name.endswith("__"):
        return False
    return not any(dotted_name(d) in ("property", "functools.cached_property", "cached_property")
                   for d in func.node.decorator_list)


#: The last names of calls through which a factory keeps or registers the engine it builds
#: (a list, a finalizer, an exit stack): its fixture then owns the engine, not the caller.
_KEEPS_ENGINE = frozenset({"append", "add", "extend", "insert", "setdefault", "addfinalizer",
                           "enter_context", "callback", "push", "register", "update"})


def _inherited(module: ModuleAnalysis, own: dict[str, dict[str, int]]
               ) -> dict[str, dict[str, int]]:
    """``own`` (class name -> its factory methods) with each class of ``module`` also given
    the factory methods of its bases that are classes of the module
    (:attr:`ModuleAnalysis.local_bases`), a method of its own of the same name taking their
    place."""
    return _resolve_methods(module, lambda name, cls: own.get(name, {}), lambda base: {})


def _inherited_from_tree(module: ModuleAnalysis) -> dict[str, dict[str, ImportedHelper]]:
    """:attr:`ModuleAnalysis.imported_method_factories`, worked out."""

    def from_tree(base: ast.expr) -> dict[str, ImportedHelper]:
        helper = module.imported_helper(base)
        if helper is None or helper.kind != "m":
            return {}
        return dict.fromkeys(sorted(helper.methods), helper)

    return _resolve_methods(module, lambda name, cls: {}, from_tree)


def _resolve_methods(module: ModuleAnalysis,
                     own: Callable[[str, ast.ClassDef], Mapping[str, T]],
                     other_base: Callable[[ast.expr], Mapping[str, T]]
                     ) -> dict[str, dict[str, T]]:
    """Methods by class of ``module``, each class's own (``own``) over those of its bases,
    later bases first overridden by earlier ones: a base of the module resolved the same
    way, any other base by ``other_base``; a method a class defines takes the place of its
    bases' of that name. Classes with none are left out."""
    by_name = {c.name: c for c in module.classes}
    bases = module.local_bases
    out: dict[str, dict[str, T]] = {}

    def resolve(name: str, seen: frozenset[str]) -> dict[str, T]:
        if name in out:
            return out[name]
        cls = by_name[name]
        found: dict[str, T] = {}
        for base in reversed(cls.bases):
            if isinstance(base, ast.Name) and base.id in bases:
                if base.id not in seen:
                    found.update(resolve(base.id, seen | {base.id}))
            else:
                found.update(other_base(base))
        defined = {i.name for i in cls.body
                   if isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef))}
        found = {k: v for k, v in found.items() if k not in defined}
        found.update(own(name, cls))
        out[name] = found
        return found

    for name in by_name:
        resolve(name, frozenset({name}))
    return {name: methods for name, methods in out.items() if methods}


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` without its leading docstring."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _only_cleanup(module: ModuleAnalysis, body: list[ast.stmt], params: set[str]) -> bool:
    """True when every statement of ``body`` (one at least) is hand cleanup: ``del`` of
    parameters, a shutdown of one (``llm.shutdown()``, ``llm.llm_engine.engine_core
    .shutdown()``), a cleanup call GPU004 knows, or an ``if`` (no ``else``) of these."""
    if not body:
        return False
    for stmt in body:
        if isinstance(stmt, ast.Delete):
            if not all(isinstance(t, ast.Name) and t.id in params for t in stmt.targets):
                return False
        elif isinstance(stmt, ast.If):
            if stmt.orelse or not _only_cleanup(module, stmt.body, params):
                return False
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if module._known_cleanup_kind(call) is not None:
                continue
            target = call.func
            if not (isinstance(target, ast.Attribute) and target.attr == "shutdown"):
                return False
            if head_name(target.value) not in params:
                return False
        else:
            return False
    return True


def _shutdown_helpers(module: ModuleAnalysis) -> dict[str, int]:
    """:attr:`ModuleAnalysis.shutdown_helpers`, found to a fixed point (a helper may reach
    the shutdown through another)."""
    candidates = [f for f in module.functions
                  if f.kind is FunctionKind.HELPER and f.parent is None
                  and f.owner_class is None and not f.node.decorator_list
                  and f.name not in module.cleanup_helpers and f.node.args.args]
    found: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for func in candidates:
            if func.name in found:
                continue
            params = [a.arg for a in func.node.args.args]
            for node in module.nodes_of(func):
                if not isinstance(node, ast.Call):
                    continue
                target: ast.expr | None = None
                callee = node.func
                if isinstance(callee, ast.Attribute) and callee.attr == "shutdown":
                    target = callee.value
                elif isinstance(callee, ast.Name) and callee.id != func.name and (
                        callee.id in found or callee.id in module.cleanup_helpers):
                    index = found.get(callee.id, 0)
                    target = node.args[index] if index < len(node.args) else None
                root = head_name(target) if target is not None else None
                if root is not None and root in params:
                    found[func.name] = params.index(root)
                    changed = True
                    break
    return found


@dataclass
class Bindings:
    """Names one function binds (assignment, with-item, for-target, parameter).

    Attributes:
        engines: names assigned an engine construction (``llm = LLM(...)``), or aliases of one.
        runners: names bound to a runner (``with vllm_runner(...) as r``, ``r = VllmRunner(...)``).
        strong_aliases: names bound to ``runner.llm`` without ``weakref.proxy``.
        built_engine: the function constructs an engine somewhere (bound or not).
        received: names assigned an engine that a factory helper builds and returns
            (``llm = setup_engine(...)``: one of the module,
            :attr:`ModuleAnalysis.engine_factories`, or of another module of the tree,
            :meth:`ModuleAnalysis.helper_called`), or an instance of a helper class of
            another module that stores an engine on itself (``helper = Helper(...)``), or
            aliases of these; the function owns that engine, but it does not build it.
        instances: of :attr:`received`, the names bound to a helper class's instance, with
            the class.
    """

    engines: set[str] = field(default_factory=set)
    runners: set[str] = field(default_factory=set)
    strong_aliases: set[str] = field(default_factory=set)
    built_engine: bool = False
    received: set[str] = field(default_factory=set)
    instances: dict[str, ImportedHelper] = field(default_factory=dict)

    @classmethod
    def collect(cls, module: ModuleAnalysis, func: FunctionInfo) -> Bindings:
        """Collect the bindings of ``func`` (body only, nested functions excluded)."""
        out = cls()
        assigns: list[ast.Assign | ast.AnnAssign] = []
        for node in module.nodes_of(func):
            cls_ = node.__class__
            if cls_ is ast.Call:
                if not out.built_engine and module.builds_engine(node):
                    out.built_engine = True
            elif cls_ is ast.Assign or cls_ is ast.AnnAssign:
                assigns.append(node)  # type: ignore[arg-type]
            elif cls_ is ast.With or cls_ is ast.AsyncWith:
                for item in node.items:  # type: ignore[attr-defined]
                    if module.is_runner_call(item.context_expr) and isinstance(
                        item.optional_vars, ast.Name
                    ):
                        out.runners.add(item.optional_vars.id)
        # Two rounds so an alias defined before its source in walk order still resolves.
        for _ in range(2):
            for node in assigns:
                if node.value is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if not names:
                    unpacked = _unpacked_engine(module, targets, node.value)
                    if unpacked is not None:
                        out.received.add(unpacked)
                    continue
                value = node.value
                if module.builds_engine(value):
                    out.engines.update(names)
                elif module.factory_called(value):
                    out.received.update(names)
                elif (helper := module.helper_called(value)) is not None and \
                        helper.kind == "c":
                    out.received.update(names)
                    out.instances.update(dict.fromkeys(names, helper))
                elif module.is_runner_call(value) or _enter_context_arg(module, value):
                    out.runners.update(names)
                elif isinstance(value, ast.Attribute) and (
                    value.attr in module.runner_attributes()
                    and isinstance(value.value, ast.Name)
                    and value.value.id in out.runners
                ):
                    out.strong_aliases.update(names)
                elif isinstance(value, ast.Name):
                    if value.id in out.engines:
                        out.engines.update(names)
                    elif value.id in out.strong_aliases:
                        out.strong_aliases.update(names)
                    elif value.id in out.received:
                        out.received.update(names)
                        if value.id in out.instances:
                            out.instances.update(dict.fromkeys(names,
                                                               out.instances[value.id]))
        return out


_EMPTY_BINDINGS = Bindings()


def _enter_context_arg(module: ModuleAnalysis, value: ast.AST) -> bool:
    """True for ``stack.enter_context(vllm_runner(...))`` (and ``enter_async_context``)."""
    return (
        isinstance(value, (ast.Call, ast.Await))
        and isinstance(call := (value.value if isinstance(value, ast.Await) else value), ast.Call)
        and last_name(call.func) in ("enter_context", "enter_async_context")
        and bool(call.args)
        and module.is_runner_call(call.args[0])
    )


_VISITORS: dict[type, Callable[[_Walker, Any], None]] = {}
"""Node class -> the :class:`_Walker` method that visits it."""


class _Walker(ast.NodeVisitor):
    """Collects functions, engine sites and runner calls with their context.

    Every function is recorded, but only a top-level statement whose lines spell one of
    the names an engine or a runner call must spell (:func:`_call_words`) has its
    expressions walked; in any other only the nested statements are, for the functions
    and classes in them."""

    def __init__(self, module: ModuleAnalysis) -> None:
        self.module = module
        self.func_stack: list[FunctionInfo] = []
        self.class_stack: list[ast.ClassDef] = []
        self.raises_bodies: set[int] = set()
        self.main_depth = 0
        self.structural = False
        self._module_marked: bool | None = None

    def visit(self, node: ast.AST) -> None:
        """:meth:`ast.NodeVisitor.visit`, with the method for each node class looked up once
        (not a string built and an attribute looked up per node)."""
        cls = node.__class__
        method = _VISITORS.get(cls)
        if method is None:
            method = _VISITORS[cls] = getattr(_Walker, "visit_" + cls.__name__,
                                              _Walker.generic_visit)
        method(self, node)

    def visit_Module(self, node: ast.Module) -> None:
        lines = lines_naming(self.module.text, _call_words(self.module))
        for stmt in node.body:
            self.structural = not spans_a_line(stmt, lines)
            self.visit(stmt)
        self.structural = False

    def generic_visit(self, node: ast.AST) -> None:
        """Visit the children of ``node``, skipping leaves that cannot hold what the walker
        records (the same visits as :class:`ast.NodeVisitor`'s, at about half the cost);
        in a statement that names no call the walker records, only nested statements."""
        fields = child_fields(node.__class__)
        if self.structural:
            for name in fields:
                value = getattr(node, name, None)
                if value.__class__ is list:
                    for item in value:
                        if isinstance(item, _STATEMENT_NODES):
                            self.visit(item)
            return
        # A node without a method of its own is expanded here, in a loop, rather than
        # visited: the same nodes in the same order (each before its children, children
        # left to right), without a call per node. ``structural`` does not change inside a
        # top-level statement, so expanding one is what visiting it would do.
        visit, node_type, leaves = self.visit, ast.AST, _WALKER_LEAVES
        special = _SPECIAL_VISITS
        stack: list[ast.AST] = [node]
        pop, push = stack.pop, stack.append
        while stack:
            current = pop()
            if current is not node and current.__class__ in special:
                visit(current)
                continue
            for name in reversed_child_fields(current.__class__):
                value = getattr(current, name, None)
                if value.__class__ is list:
                    for item in reversed(value):
                        if isinstance(item, node_type) and not isinstance(item, leaves):
                            push(item)
                elif isinstance(value, node_type) and not isinstance(value, leaves):
                    push(value)

    # functions and classes ---------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.class_stack.append(node)
        self.generic_visit(node)
        self.class_stack.pop()

    def _marked_isolated(self, in_class: bool) -> bool:
        """Whether pytest marks the test being visited with an isolation decorator
        (``@pytest.mark.forked``) from above: a decorator or a ``pytestmark`` of its
        classes (for a method), or the module's ``pytestmark``."""
        config = self.module.config
        if self._module_marked is None:
            self._module_marked = _names_isolation(_pytestmarks(self.module.tree.body), config)
        return self._module_marked or in_class and any(
            _names_isolation([*cls.decorator_list, *_pytestmarks(cls.body)], config)
            for cls in self.class_stack)

    def _visit_function(self, node: FunctionNode) -> None:
        module = self.module
        config = module.config
        deco = fixture_decorator(node)
        cls = self.class_stack[-1] if self.class_stack else None
        # A def directly in a class body is a method of that class.
        direct_in_class = cls is not None and node in cls.body
        if deco is not None:
            kind = FunctionKind.FIXTURE
        elif not self.func_stack and (
            node.name.startswith("test") and (cls is None or cls.name in module.test_classes)
            or cls is None and node.name in module.test_aliases
        ):
            kind = FunctionKind.TEST
        elif direct_in_class:
            kind = FunctionKind.METHOD
        else:
            kind = FunctionKind.HELPER
        isolated = _names_isolation(node.decorator_list, config) or (
            kind is FunctionKind.TEST and self._marked_isolated(direct_in_class))
        info = FunctionInfo(
            node=node,
            kind=kind,
            fixture_scope=fixture_scope(deco) if deco is not None else None,
            fixture_name=_requested_as(module, node, deco) if deco is not None else None,
            isolated=isolated,
            params=[a.arg for a in (*node.args.posonlyargs, *node.args.args,
                                    *node.args.kwonlyargs)],
            parent=self.func_stack[-1] if self.func_stack else None,
            in_runner_class=cls is not None and cls.name in module.runner_classes_local,
            # unittest.TestCase and other based classes: pytest injects no fixtures there.
            in_base_class=cls is not None and any(
                not (isinstance(b, ast.Name) and b.id == "object") for b in cls.bases),
            owner_class=cls if direct_in_class else None,
        )
        module.functions.append(info)
        self.func_stack.append(info)
        saved = self.class_stack
        self.class_stack = saved if direct_in_class else []
        self.generic_visit(node)
        self.class_stack = saved
        self.func_stack.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    # context -----------------------------------------------------------------
    def visit_If(self, node: ast.If) -> None:
        if not self.structural and is_main_guard(node):
            self.main_depth += 1
            for child in node.body:
                self.visit(child)
            self.main_depth -= 1
            for child in node.orelse:
                self.visit(child)
            self.visit(node.test)
            return
        self.generic_visit(node)

    def _visit_with(self, node: ast.With | ast.AsyncWith) -> None:
        if self.structural:
            self.generic_visit(node)
            return
        if is_raises_with(node):
            for stmt in node.body:
                self.raises_bodies.add(id(stmt))
        for item in node.items:
            if self.module.is_runner_call(item.context_expr):
                self._record_runner(item.context_expr, "with")  # type: ignore[arg-type]
                self._visit_call_children(item.context_expr)  # type: ignore[arg-type]
            else:
                self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
        for stmt in node.body:
            self.visit(stmt)

    visit_With = _visit_with
    visit_AsyncWith = _visit_with

    def _visit_call_children(self, node: ast.Call) -> None:
        self.visit(node.func)
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            self.visit(kw.value)

    def visit_Call(self, node: ast.Call) -> None:
        module = self.module
        if last_name(node.func) in ("enter_context", "enter_async_context") and node.args:
            first = node.args[0]
            if module.is_runner_call(first):
                self._record_runner(first, "enter_context")  # type: ignore[arg-type]
                self.visit(node.func)
                self._visit_call_children(first)  # type: ignore[arg-type]
                for arg in node.args[1:]:
                    self.visit(arg)
                return
        if module.is_engine_call(node) or module.is_engine_factory_call(node):
            self._record_engine(node)
        elif module.is_runner_call(node):
            parent = module.parent(node)
            func = self.func_stack[-1] if self.func_stack else None
            returned = (
                isinstance(parent, ast.Return)
                and func is not None
                and func.kind is not FunctionKind.FIXTURE
            )
            self._record_runner(node, "returned" if returned else "guarded" if isinstance(
                parent, ast.Assign) and guarded_with(module, node) is not None else "bare")
        self.generic_visit(node)

    def _record_runner(self, node: ast.Call, context: str) -> None:
        self.module.runner_calls.append(
            RunnerCall(
                call=node,
                function=self.func_stack[-1] if self.func_stack else None,
                context=context,
                under_main_guard=self.main_depth > 0,
            )
        )

    def _record_engine(self, node: ast.Call) -> None:
        module = self.module
        statement = self.module.statement_of(node)
        bound: str | None = None
        if (
            isinstance(statement, (ast.Assign, ast.AnnAssign))
            and statement.value is node
        ):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                bound = targets[0].id
        cls = self.class_stack[-1] if self.class_stack else None
        func = self.func_stack[-1] if self.func_stack else None
        in_runner_class = (cls is not None and cls.name in module.runner_classes_local) or (
            func is not None and func.in_runner_class
        )
        module.engines.append(
            EngineSite(
                call=node,
                function=func,
                statement=statement,
                bound_name=bound,
                in_raises=id(statement) in self.raises_bodies,
                under_main_guard=self.main_depth > 0,
                in_runner_class=in_runner_class,
            )
        )


#: The node classes :class:`_Walker` has a method of its own for (every other one it expands
#: in :meth:`_Walker.generic_visit`).
_SPECIAL_VISITS = frozenset(getattr(ast, name[len("visit_"):]) for name in vars(_Walker)
                            if name.startswith("visit_") and hasattr(ast, name[len("visit_"):]))


# ------------------------------------------------------------------ semantic queries
#: Calls that never return: they raise (pytest's outcomes, ``sys.exit``) or end the process.
NO_RETURN_CALLS = frozenset({"pytest.skip", "pytest.fail", "pytest.xfail", "pytest.exit",
                             "sys.exit", "os._exit"})


def leaves(module: ModuleAnalysis, body: list[ast.stmt]) -> bool:
    """True when ``body`` (a handler's statements) never falls through to the statement
    after its ``try``: it ends in ``raise``, ``return``, ``break``, ``continue`` or a call
    of :data:`NO_RETURN_CALLS`."""
    last = body[-1] if body else None
    if isinstance(last, (ast.Raise, ast.Return, ast.Break, ast.Continue)):
        return True
    return isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and \
        module.qualified(last.value.func) in NO_RETURN_CALLS


def guarding_try(module: ModuleAnalysis, stmt: ast.stmt, bound: str) -> ast.Try | None:
    """The ``try`` whose whole body is ``stmt`` (binding ``bound``), with neither ``else``
    nor ``finally``, whose every handler leaves (:func:`leaves`) without naming
    ``bound``: the build it guards either binds the name or ends the function's run
    there (``except Exception as e: pytest.skip(...)``). ``None`` otherwise."""
    parent = module.parent(stmt)
    if not isinstance(parent, ast.Try) or len(parent.body) != 1 or parent.body[0] is not \
            stmt or parent.orelse or parent.finalbody:
        return None
    for handler in parent.handlers:
        if not leaves(module, handler.body) or any(
                isinstance(n, ast.Name) and n.id == bound for n in ast.walk(handler)):
            return None
    return parent


def statement_block(module: ModuleAnalysis, stmt: ast.stmt) -> list[ast.stmt] | None:
    """The statement list that directly holds ``stmt`` (a body, an ``else``, a
    ``finally``, a handler's or a ``case``'s body); ``None`` for a statement of no block."""
    parent = module.parent(stmt)
    if parent is None:
        return None
    for attr in ("body", "orelse", "finalbody"):
        block = getattr(parent, attr, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    for handler in getattr(parent, "handlers", []) or []:
        if any(s is stmt for s in handler.body):
            return handler.body  # type: ignore[no-any-return]
    if isinstance(parent, ast.match_case) and any(s is stmt for s in parent.body):
        return parent.body
    return None


def guarded_with(module: ModuleAnalysis, call: ast.Call) -> ast.With | None:
    """For a runner's call bound to a name in a guarding ``try`` (:func:`guarding_try`),
    the with-statement right after that ``try`` that enters the name alone (``with
    runner:``, ``with runner as model:``), which holds the runner until its end; ``None``
    for any other call."""
    stmt = module.parent(call)
    if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return None
    trying = guarding_try(module, stmt, stmt.targets[0].id)
    block = statement_block(module, trying) if trying is not None else None
    if not block:
        return None
    after = next((block[i + 1] for i, s in enumerate(block[:-1]) if s is trying), None)
    if isinstance(after, ast.With) and len(after.items) == 1 and \
            isinstance(after.items[0].context_expr, ast.Name) and \
            after.items[0].context_expr.id == stmt.targets[0].id:
        return after
    return None


def _pytestmarks(body: list[ast.stmt]) -> list[ast.expr]:
    """The marks ``pytestmark = ...`` gives in ``body`` (a module's or a class's): the value,
    or the items of a list or tuple."""
    out: list[ast.expr] = []
    for stmt in body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            value = stmt.value
            out += value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    return out


def _names_isolation(decorators: list[ast.expr], config: Config) -> bool:
    """Whether one of ``decorators`` (or marks) is a configured isolation decorator, by its
    last name (``create_new_process_for_each_test()``, ``pytest.mark.forked``)."""
    return any(last_name(d.func if isinstance(d, ast.Call) else d) in config.isolation_decorators
               for d in decorators)


def is_isolated(func: FunctionInfo | None) -> bool:
    """True when ``func`` or a function around it runs in its own process."""
    while func is not None:
        if func.isolated:
            return True
        func = func.parent
    return False


def _requested_as(module: ModuleAnalysis, node: FunctionNode, deco: ast.expr) -> str:
    """:func:`fixture_request_name`, with a ``name=`` given as a module constant
    (``name=ENGINE`` after ``ENGINE = "llm"``) read through :func:`module_constants`."""
    if isinstance(deco, ast.Call):
        for kw in deco.keywords:
            if kw.arg == "name" and isinstance(kw.value, ast.Name):
                value = module_constants(module).get(kw.value.id)
                if isinstance(value, str) and value.isidentifier():
                    return value
    return fixture_request_name(node, deco)


def module_constants(module: ModuleAnalysis) -> dict[str, object]:
    """Names bound exactly once at module level to a literal (``GPU_UTIL = 0.4``,
    ``ENV_KEY = "VLLM_X"``), with their values; read with :func:`ast.literal_eval`, so a
    name bound twice, or to anything computed, is left out. Rules compute it once per
    module and pass it to :func:`literal_value`."""
    counts: dict[str, int] = {}
    values: dict[str, object] = {}
    for stmt in module.tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = list(stmt.targets), stmt.value
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [stmt.target], stmt.value
        for name in (n for target in targets for n in walk_breadth(target)):
            if isinstance(name, ast.Name):
                counts[name.id] = counts.get(name.id, 0) + 1
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and len(targets) == 1 and \
                isinstance(targets[0], ast.Name) and value is not None:
            try:
                values[targets[0].id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
    return {name: v for name, v in values.items() if counts.get(name) == 1}


def literal_value(node: ast.AST, constants: dict[str, object],
                  local_names: frozenset[str] = frozenset()) -> object | None:
    """The value of a literal, or of a module constant's name (``constants`` from
    :func:`module_constants`) that the function does not rebind (``local_names``: its
    parameters and assigned names); ``None`` when it is known only at run time."""
    if isinstance(node, ast.Name):
        return None if node.id in local_names else constants.get(node.id)
    try:
        value: object = ast.literal_eval(node)
        return value
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def local_names(module: ModuleAnalysis, func: FunctionInfo | None) -> frozenset[str]:
    """Names ``func`` binds itself (parameters, assignments, loop and with targets), which
    hide module constants of the same name; empty at module level."""
    return frozenset() if func is None else module.bound_names(func)


def environment_reads(module: ModuleAnalysis) -> dict[str, list[ast.AST]]:
    """The environment variables ``module``'s functions read by name, with the reading
    nodes: ``os.environ[NAME]``, ``os.environ.get(NAME)``, ``os.getenv(NAME)``, ``NAME in
    os.environ`` (``not in`` too), ``NAME`` a literal or a module constant. A read at module
    or class level runs at import, before any test, and is left out. Computed once per
    analysis."""
    return module.derived(_environment_reads)


def _environment_reads(module: ModuleAnalysis) -> dict[str, list[ast.AST]]:
    out: dict[str, list[ast.AST]] = {}
    if "environ" not in module.text and "getenv" not in module.text:
        return out
    constants = module_constants(module)
    seen: set[int] = set()
    for scope in walk_nodes([module.tree]):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for node in walk_nodes([scope]):
            if id(node) in seen:
                continue
            seen.add(id(node))
            key: ast.AST | None = None
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
                    module.qualified(node.value) == "os.environ":
                key = node.slice
            elif isinstance(node, ast.Call) and node.args and (
                    module.qualified(node.func) == "os.getenv" or isinstance(
                        node.func, ast.Attribute) and node.func.attr == "get"
                    and module.qualified(node.func.value) == "os.environ"):
                key = node.args[0]
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
                    node.ops[0], (ast.In, ast.NotIn)) and \
                    module.qualified(node.comparators[0]) == "os.environ":
                key = node.left
            if key is not None:
                name = literal_value(key, constants)
                if isinstance(name, str):
                    out.setdefault(name, []).append(node)
    return out


def engine_helpers(module: ModuleAnalysis) -> tuple[str, ...]:
    """The summary of ``module``'s engine helpers for other modules of its tree
    (:mod:`lint_gpu_tests.checking.helper_index`): ``f|name|line|share|scope`` for each
    module-level function that builds an engine and returns it
    (:attr:`ModuleAnalysis.engine_factories`; share: the engine's literal
    ``gpu_memory_utilization``, ``default`` when it passes none, else empty),
    ``t|name|line|place|scope`` for each that returns it in a tuple with other values
    (:attr:`ModuleAnalysis.tuple_factories`; place: the engine's index in the tuple),
    ``c|name|line|attr,...|scope`` for each module-level class whose methods store an engine
    built there (or got from such a function) on attributes of ``self``,
    ``m|name|line|method,...|scope`` for each other one with factory methods
    (:attr:`ModuleAnalysis.method_factories`, own or inherited in the module),
    ``k|name|line|decorator|scope`` for each module-level function that builds an engine and
    returns it through a cache (:func:`~lint_gpu_tests.parsing.syntax.caching_decorator`:
    the engine is the cache's, not its callers'), ``x|name|line|which|scope`` for each
    module-level cleanup helper (which: :data:`WHOLE_CLEANUP` for one whose whole body is
    cleanup, :attr:`ModuleAnalysis.cleanup_helpers`; the index of the parameter whose engine
    it shuts down for one that does more, :attr:`ModuleAnalysis.shutdown_helpers`),
    ``e|name|line||scope`` for each module-level fixture that provides an engine (a module
    importing it by name hands it to its tests, as a conftest's fixture),
    ``p|name|line|index,param|scope`` for each launcher helper
    (:attr:`ModuleAnalysis.launcher_helpers`: a function given to it runs as its own
    process); scope:
    :data:`SCOPED` when the rules look at the module (:func:`is_test_module_path`, or it
    defines tests or fixtures), else empty."""
    scope = SCOPED if is_test_module_path(module.path, module.config) or \
        module.defines_pytest_items() else ""
    out: list[str] = []
    for name, line in module.engine_factories.items():
        func = next(f for f in module.functions if f.name == name and f.parent is None
                    and f.owner_class is None)
        out.append(f"f|{name}|{line}|{_helper_share(module, func)}|{scope}")
    for name, (line, place) in module.tuple_factories.items():
        out.append(f"t|{name}|{line}|{place}|{scope}")
    for name, (index, param) in module.launcher_helpers.items():
        line = max(s.lineno for s in module.tree.body
                   if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name)
        out.append(f"p|{name}|{line}|{index},{param}|{scope}")
    if module.cleanup_helpers or module.shutdown_helpers:
        for func in module.functions:
            if func.parent is not None or func.owner_class is not None:
                continue
            if func.name in module.cleanup_helpers:
                out.append(f"x|{func.name}|{func.node.lineno}|{WHOLE_CLEANUP}|{scope}")
            elif func.name in module.shutdown_helpers:
                index = module.shutdown_helpers[func.name]
                out.append(f"x|{func.name}|{func.node.lineno}|{index}|{scope}")
    for cls in module.tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        attrs: set[str] = set()
        for item in cls.body:
            if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in walk_breadth(item):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                        and (module.builds_engine(node.value)
                             or module.factory_called(node.value)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    attrs.update(t.attr for t in targets if isinstance(t, ast.Attribute)
                                 and isinstance(t.value, ast.Name) and t.value.id == "self")
        if attrs and cls.name not in module.runner_classes_local:
            out.append(f"c|{cls.name}|{cls.lineno}|{','.join(sorted(attrs))}|{scope}")
        elif module.method_factories.get(cls.name):
            methods = ",".join(sorted(module.method_factories[cls.name]))
            out.append(f"m|{cls.name}|{cls.lineno}|{methods}|{scope}")
    for func in module.functions:
        cache = caching_decorator(func.node)
        if cache is not None and func.parent is None and func.owner_class is None and \
                func.kind is FunctionKind.HELPER:
            returns, engine = module._returned_values(func)
            if any(engine(value) for value in returns):
                out.append(f"k|{func.name}|{func.node.lineno}|{cache}|{scope}")
        elif func.kind is FunctionKind.FIXTURE and func.parent is None and \
                func.owner_class is None and os.path.basename(module.path) != "conftest.py":
            # (pytest hands a conftest's fixtures on by itself)
            requested = func.fixture_name if func.fixture_name != func.name else ""
            if func.fixture_name in module.engine_fixtures:
                out.append(f"e|{func.name}|{func.node.lineno}|{requested}|{scope}")
            elif func.fixture_name is not None and \
                    module.factory_fixtures.get(func.fixture_name) == func.node.lineno:
                out.append(f"g|{func.name}|{func.node.lineno}|{requested}|{scope}")
    return tuple(out)


def _handed_out_factories(module: ModuleAnalysis) -> dict[str, ast.Call]:
    out: dict[str, ast.Call] = {}
    built = [(site.function, site.call) for site in module.engines]
    built += [(call.function, call.call) for call in module.runner_calls
              if call.context == "returned"]
    for inner, call in built:
        if inner is None or inner.parent is None or \
                inner.parent.kind is not FunctionKind.FIXTURE:
            continue
        fixture = inner.parent
        if any(isinstance(n, (ast.Yield, ast.Return)) and isinstance(n.value, ast.Name)
               and n.value.id == inner.name for n in module.nodes_of(fixture)):
            out[fixture.fixture_name or fixture.name] = call
    return out


def _runner_fixture_handouts(module: ModuleAnalysis) -> tuple[list[ast.AST], list[ast.expr]]:
    """The nodes of the runner fixture ``module`` defines (named like ``runner-fixture``),
    and the values it returns or yields, in the order of those nodes; both empty where it
    defines none."""
    fixture = module.top_fixture(module.config.runner_fixture)
    if fixture is None:
        return [], []
    nodes = module.nodes_of(fixture)
    return nodes, [n.value for n in nodes
                   if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None]


def runner_model_parameter(module: ModuleAnalysis) -> str | None:
    """The first parameter after ``self`` of the ``__init__`` of the class of ``module`` that
    its runner fixture (named like ``runner-fixture``) returns or yields, when it has no
    default and is not named ``model`` (:attr:`ModuleAnalysis.own_runner_model`); else
    ``None``."""
    handed = [v for v in _runner_fixture_handouts(module)[1] if isinstance(v, ast.Name)]
    cls = next((c for c in module.tree.body if isinstance(c, ast.ClassDef) and handed
                and c.name == handed[0].id), None)
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef)
                 and f.name == "__init__"), None) if cls is not None else None
    if init is None:
        return None
    positional = [*init.args.posonlyargs, *init.args.args][1:]
    required = len(positional) - len(init.args.defaults)
    if not positional or required < 1 or positional[0].arg == "model":
        return None
    return positional[0].arg


def runner_fixture_hands_instance(module: ModuleAnalysis) -> bool:
    """Whether the runner fixture ``module`` defines (named like ``runner-fixture``) hands out
    one runner it builds instead of a factory tests call (vLLM's returns its ``VllmRunner``
    class): every value it returns or yields is a call (other than ``partial(...)``), or a
    name the fixture binds to one or as a with-statement's target (``runner =
    model_cache.get_or_create(config)``; ``with VllmRunner(...) as runner: yield runner``)."""
    nodes, handed = _runner_fixture_handouts(module)

    def built(value: ast.AST) -> bool:
        return isinstance(value, ast.Call) and last_name(value.func) != "partial"

    instances = {t.id for n in nodes if isinstance(n, ast.Assign) and built(n.value)
                 for t in n.targets if isinstance(t, ast.Name)}
    instances.update(i.optional_vars.id for n in nodes if isinstance(n, (ast.With, ast.AsyncWith))
                     for i in n.items if isinstance(i.optional_vars, ast.Name))
    return bool(handed) and all(
        built(v) or isinstance(v, ast.Name) and v.id in instances for v in handed)


def written_share(module: ModuleAnalysis, call: ast.Call) -> str:
    """The ``gpu_memory_utilization`` keyword ``call`` writes, as :data:`FACTORY_SHARE`
    entries carry it: the value of a literal (or a module constant's), ``default`` where
    the call writes none, empty where it is not a literal."""
    for kw in call.keywords:
        if kw.arg == "gpu_memory_utilization":
            return _literal_share(module, kw.value)
    return "default"


def _literal_share(module: ModuleAnalysis, value: ast.expr) -> str:
    """A ``gpu_memory_utilization`` value as summaries and entries write it: the number a
    literal (or a module constant) gives, else empty."""
    found = literal_value(value, module_constants(module))
    return repr(float(found)) if isinstance(found, (int, float)) and \
        not isinstance(found, bool) else ""


def _helper_share(module: ModuleAnalysis, func: FunctionInfo) -> str:
    """The ``gpu_memory_utilization`` of the engine a factory helper builds, as
    :func:`engine_helpers` writes it."""
    calls = [n for n in module.nodes_of(func) if isinstance(n, ast.Call)
             and module.builds_engine(n)]
    if len(calls) != 1 or module.is_engine_factory_call(calls[0]):
        return ""
    call = calls[0]
    for kw in call.keywords:
        if kw.arg is None:
            return ""
        if kw.arg == "gpu_memory_utilization":
            return _literal_share(module, kw.value)
    if any(isinstance(a, ast.Starred) for a in call.args):
        return ""
    return "default"

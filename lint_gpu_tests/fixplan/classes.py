"""Fix planning for helper classes that own an engine (a class whose ``__init__`` builds the
engine, as vLLM's LoRA suite had, or stores what a method of it returns:
``self.llm = self._build_llm(config)`` with ``_build_llm`` returning ``LLM(...)``).

The shape, as vLLM's LoRA suite had it before its hand migration::

    class Tester:
        def __init__(self, model):
            self.llm = LLM(model)          # or in a method __init__ calls
        def generate(self, prompts):
            return self.llm.generate(prompts)
        def close(self):
            del self.llm; gc.collect(); cleanup_dist_env_and_memory()

    def test_x():
        tester = Tester(MODEL)
        tester.generate(["hi"])
        tester.close()

The fix makes the class a context manager holding a runner (``self._runner =
VllmRunner(...)``, ``self.llm = weakref.proxy(self._runner.llm)``, ``__enter__`` entering it
and returning ``self``, ``__exit__`` exiting it) and enters every instance of this module
with ``with Tester(MODEL) as tester:``; GPU001's rule examples show both forms.

Decisions (README, "Fix safety": a safe fix keeps behaviour):

* The engine is still built where it was (``__init__`` or the method it calls): the
  bundled ``VllmRunner`` builds it on construction, so nothing moves in time, and a
  ``Tester(...)`` that is never entered behaves as before. Building it in ``__enter__``
  instead would keep behaviour only where every construction is entered at once, and would
  leave an instance built any other way without an engine.
* ``self.llm`` becomes a weak proxy, so the object no longer keeps the engine alive after
  its block. That keeps behaviour for every use through an attribute (``self.llm.generate``);
  a method that uses ``self.llm`` itself (returns it, passes it on, compares it by
  identity) has no fix: what receives it is not followed.
* The object's live range is planned as GPU005 plans a bare runner (the class is a runner
  once rewritten): construction to last use, value flow followed; the cleanup methods the
  class defines (a body of nothing but ``del self.llm``, ``gc.collect()`` ...) and their
  calls ``tester.close()`` go, the block ending where ``close()`` ran, so teardown happens
  exactly where it did.
* Always **unsafe** (a helper class's callers may hold the engine): the class's contract changes (a
  context manager, a proxy), and the rewrite is proven only for the uses in this module;
  the differential corpus (``tests/e2e/suites/test_engine_owner_class.py``) shows the same
  outcomes, configurations and outputs, so ``--unsafe-fixes`` applies it.
* No fix: the class has bases or decorators or its own ``__enter__``/``__exit__``; it builds
  several engines or rebinds ``self.llm``; a method uses ``self.llm`` itself; an instance is
  built other than as ``name = Tester(...)`` in a function, or twice in one function, or its
  use has no fix of its own (returned, used outside the block); a cleanup method is called
  other than as ``tester.close()`` inside an instance's range; the class is never
  instantiated in the module (its users are elsewhere).
* ``target = "vllm"``: the class holds vLLM's own runner class, imported as vLLM's tests
  import it, ``from tests.conftest import VllmRunner``; its differing defaults are spelled out
  as for every fix of that target. No fix when the project has no ``tests/conftest.py``
  binding ``VllmRunner`` at its top level (checked when the fix is planned), or when the
  engine's arguments come in a mapping (``LLM(**kwargs)``).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field, replace

from lint_gpu_tests.analysis.analysis import (
    FUNCTION_DEFS,
    EngineSite,
    FunctionKind,
    ModuleAnalysis,
    RunnerCall,
)
from lint_gpu_tests.analysis.mappings import hides_model
from lint_gpu_tests.config import project_module, pytest_pythonpath
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.fixplan.safety import compilation_config_equivalent
from lint_gpu_tests.fixplan.stored import read_after
from lint_gpu_tests.ftypes import Applicability, Blocked, FixInfo, FixKind, FixPlan, FixProblem
from lint_gpu_tests.parsing.source import walk_breadth

CLASS_TITLE = "Make `{cls}` a context manager over `{runner}` and enter it with `with`"
UNSAFE_REASON = (
    "the engine lives in helper class `{cls}`: the class becomes a context manager, its "
    "methods see the engine through a weak proxy, and only this module's instances are "
    "entered with `with`"
)
#: Methods a context manager must not have already (the rewrite adds them).
CONTEXT_METHODS = frozenset({"__enter__", "__exit__", "__aenter__", "__aexit__"})
#: Where the class's runner is imported from, per ``target``: the bundled runner, or vLLM's
#: own in the project's tests/conftest.py (as vLLM's tests import it).
RUNNER_CLASS_MODULES = {"bundled": "lint_gpu_tests.runtime", "vllm": "tests.conftest"}


@dataclass
class ClassPlan(FixPlan):
    """How to turn one engine-owning helper class into a context manager.

    Line numbers are 1-based ``ast`` statement starts in the module as checked.

    Attributes:
        class_name: the class.
        site_line: the statement ``self.<attribute> = LLM(...)``.
        call_line: the engine call (where GPU001 reports).
        attribute: the engine's attribute (``llm``).
        runner_attribute: the new attribute holding the runner (``_runner``).
        init_line: the ``def __init__`` line; ``__enter__``/``__exit__`` go after it.
        remove_lines: cleanup statements in the class's methods, and the ``def`` lines of
            methods that do nothing but cleanup (deleted whole), and the statements calling
            those methods on an instance.
        unwrap_try_lines: ``try`` statements replaced by their body: their ``finally`` did
            nothing but call a cleanup method (``finally: tester.close()``); the with-block
            exits on an exception too.
        cleanup_lines: the cleanup statements (what GPU004 reports).
        uses: one with-block plan per instance (``tester = Tester(...)``), GPU005-style.
        applicability / reason / title: as :class:`lint_gpu_tests.ftypes.FixInfo`.
    """

    FIX_KIND = FixKind.ENGINE_OWNER_CONTEXT_MANAGER
    class_name: str
    site_line: int
    call_line: int
    attribute: str
    runner_attribute: str
    init_line: int
    remove_lines: set[int] = field(default_factory=set)
    unwrap_try_lines: set[int] = field(default_factory=set)
    cleanup_lines: set[int] = field(default_factory=set)
    uses: list[WrapPlan] = field(default_factory=list)
    applicability: Applicability = Applicability.UNSAFE
    reason: str = ""
    title: str = ""
    #: The construction is ``return LLM(...)`` in a method whose result ``__init__`` stores
    #: (``self.llm = self._build_llm(config)``): the method keeps the runner on its first
    #: parameter, named here, and returns the proxy. ``None``: ``self.llm = LLM(...)``.
    returned_by: str | None = None
    #: The module ``VllmRunner`` is imported from (:data:`RUNNER_CLASS_MODULES`).
    import_from: str = RUNNER_CLASS_MODULES["bundled"]
    #: ``target = "vllm"``: the source of the ``compilation_config`` equivalent to the one
    #: given (:func:`~lint_gpu_tests.fixplan.safety.compilation_config_equivalent`), or
    #: ``None``.
    compilation_config: str | None = None

    @property
    def anchor(self) -> tuple[str, int]:
        """``(code, row)`` of the GPU001 violation this plan fixes."""
        return ("GPU001", self.call_line)

    def fix_info(self, title: str | None = None) -> FixInfo:
        """The fix of GPU001 (or, with ``title``, of a GPU004 the rewrite removes), carrying
        this plan."""
        return FixInfo(self.applicability, title or self.title, self.reason,
                       FixKind.ENGINE_OWNER_CONTEXT_MANAGER, self)


@dataclass(frozen=True)
class OwnerClass:
    """An engine-owning helper class found in a module (the shape, fixable or not).

    Attributes:
        node: the ``class`` statement.
        site: the engine construction ``self.<attribute> = LLM(...)``.
        attribute: the engine's attribute name.
        builder: the method holding the construction (``__init__`` or one it calls).
        plan: the class plan, or the missing fix with its reason.
        cleanup: ``(statement, what)`` of each manual cleanup in the class's methods.
        deletes: ``(statement, what)`` of each ``del tester.llm`` of the engine's attribute
            of an instance, in a function that builds the instance (``tester =
            Tester(...)``).
    """

    node: ast.ClassDef
    site: EngineSite
    attribute: str
    builder: ast.FunctionDef | ast.AsyncFunctionDef
    plan: ClassPlan | FixInfo
    cleanup: tuple[tuple[ast.stmt, str], ...]
    deletes: tuple[tuple[ast.stmt, str], ...] = ()


def owner_classes(module: ModuleAnalysis) -> list[OwnerClass]:
    """Every engine-owning helper class of ``module`` (cached on the analysis)."""
    cached: list[OwnerClass] | None = getattr(module, "_owner_classes", None)
    if cached is None:
        cached = [found for site in module.engines
                  if (found := _owner_class(module, site)) is not None]
        module._owner_classes = cached  # type: ignore[attr-defined]
    return cached


def owner_class_of(module: ModuleAnalysis, site: EngineSite) -> OwnerClass | None:
    """The owner class whose engine ``site`` builds, or ``None`` when ``site`` is not the
    shape (the other GPU001 plans apply)."""
    return next((o for o in owner_classes(module) if o.site is site), None)


def vllm_runner_class_problem(module: ModuleAnalysis) -> str | None:
    """With ``target = "vllm"``: why ``from tests.conftest import <runner class>`` would not
    import vLLM's runner class in ``module``'s project (no tests/conftest.py, or one that does
    not bind the class at its top level: a class, an assignment or an import), else ``None``
    (also for a module checked as text alone: nothing can be looked up)."""
    runner = module.config.runner_classes[0] if module.config.runner_classes \
        else "VllmRunner"
    dotted = RUNNER_CLASS_MODULES["vllm"]
    where = project_module(module.path, module.config, dotted)
    if where is None:
        return (f"`target = \"vllm\"` imports `{runner}` from `{dotted}`, and the project "
                "has no tests/conftest.py")
    if where == module.path:
        return None
    state = runner_class_state(where, runner)
    if state == "absent":
        return (f"`target = \"vllm\"` imports `{runner}` from `{dotted}`, and the project's "
                f"tests/conftest.py does not define `{runner}`")
    if state == "no-kwargs":
        return (f"the project's `{runner}` (tests/conftest.py) takes no `**kwargs`, unlike "
                "vLLM's: the engine's keywords and the runner defaults the fix spells out "
                "may not be among its parameters")
    return None


def tests_package_problem(module: ModuleAnalysis) -> str | None:
    """With ``target = "vllm"``: why ``from tests.conftest import <runner class>``, added to
    ``module`` by a fix, may fail to import where the module imports today, else ``None``.

    The import needs the project root on ``sys.path``. A plain ``pytest`` run (rootdir
    import mode ``prepend``) puts it there only when tests/ is a package (an
    ``__init__.py``: the root is the first directory above it without one), when the root
    holds a ``conftest.py``, or when pytest's ``pythonpath`` setting names the root; ``python
    -m pytest`` adds the working directory too, so the import works there alone. A module
    that already imports from ``tests`` gains no new failure. ``None`` as well where the
    project has no tests/conftest.py (:func:`vllm_runner_class_problem` says so) or the
    module is that file, or a check of text alone."""
    if any(isinstance(n, ast.ImportFrom) and n.level == 0 and n.module is not None and
           (n.module == "tests" or n.module.startswith("tests.")) or
           isinstance(n, ast.Import) and any(a.name == "tests" or a.name.startswith("tests.")
                                             for a in n.names)
           for n in walk_breadth(module.tree)):
        return None
    where = project_module(module.path, module.config, RUNNER_CLASS_MODULES["vllm"])
    if where is None or where == module.path or tests_package_importable(where):
        return None
    runner = module.config.runner_classes[0] if module.config.runner_classes \
        else "VllmRunner"
    return (f"`from {RUNNER_CLASS_MODULES['vllm']} import {runner}` imports only with the "
            "project root on `sys.path`: tests/ has no `__init__.py`, the root no "
            "`conftest.py` and pytest's `pythonpath` does not name it, so a plain `pytest` "
            "run fails to import the module (`python -m pytest` imports it)")


def tests_package_importable(conftest: str) -> bool:
    """Whether a plain ``pytest`` run puts the root of the project whose tests/conftest.py
    is at ``conftest`` (a path on disk) on ``sys.path`` (:func:`tests_package_problem`):
    tests/ has an ``__init__.py``, the root a ``conftest.py``, or the ``pythonpath`` of the
    root's pytest settings (the file pytest takes: :func:`~lint_gpu_tests.config.pytest_pythonpath`)
    names the root."""
    tests = os.path.dirname(os.path.abspath(conftest))
    if os.path.basename(conftest) == "__init__.py":
        tests = os.path.dirname(tests)
    root = os.path.dirname(tests)
    if os.path.isfile(os.path.join(tests, "__init__.py")) or \
            os.path.isfile(os.path.join(root, "conftest.py")):
        return True
    return any(os.path.normpath(os.path.join(root, entry)) == os.path.normpath(root)
               for entry in pytest_pythonpath(root))


def runner_class_state(path: str, runner: str) -> str:
    """What the module at ``path`` (a project's tests/conftest.py) binds as ``runner``:
    ``"absent"``; ``"no-kwargs"``, a class of its own whose ``__init__`` takes no
    ``**kwargs`` (vLLM's takes them: the fixes pass the engine's keywords through); else
    ``"bound"`` (a class taking them, an import, an assignment)."""
    tree = _parsed(path)
    if tree is None or runner not in _bound_names(tree):
        return "absent"
    cls = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == runner),
               None)
    init = _methods(cls).get("__init__") if cls is not None else None
    return "no-kwargs" if init is not None and init.args.kwarg is None else "bound"


def top_level_names(path: str) -> frozenset[str]:
    """Names the module at ``path`` binds at its top level (classes, functions, assignments,
    imports); empty when it cannot be read or parsed."""
    tree = _parsed(path)
    return _bound_names(tree) if tree is not None else frozenset()


def _parsed(path: str) -> ast.Module | None:
    """The module at ``path`` parsed, or ``None`` when it cannot be read or parsed."""
    try:
        with open(path, "rb") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _bound_names(tree: ast.Module) -> frozenset[str]:
    """The names ``tree`` binds at its top level (:func:`top_level_names`)."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    return frozenset(names)


# ------------------------------------------------------------------------- finding

def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {item.name: item for item in cls.body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _self_name(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    args = [*func.args.posonlyargs, *func.args.args]
    return args[0].arg if args else None


def _is_self_attr(node: ast.AST, self_name: str | None, attr: str | None = None) -> bool:
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == self_name and (attr is None or node.attr == attr))


def _owner_class(module: ModuleAnalysis, site: EngineSite) -> OwnerClass | None:
    func = site.function
    if func is None or func.kind is not FunctionKind.METHOD or site.in_runner_class \
            or site.under_main_guard:
        return None
    cls = module.parent(func.node)
    if not isinstance(cls, ast.ClassDef):
        return None
    stmt = site.statement
    self_name = _self_name(func.node)
    methods = _methods(cls)
    init = methods.get("__init__")
    if init is None:
        return None
    store: ast.Assign | None = None
    if isinstance(stmt, ast.Assign) and stmt.value is site.call and len(stmt.targets) == 1 \
            and _is_self_attr(stmt.targets[0], self_name):
        store = stmt
        if func.node is not init and not any(
                isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                and _is_self_attr(s.value.func, _self_name(init), func.name)
                for s in init.body):
            return None
    elif isinstance(stmt, ast.Return) and stmt.value is site.call and func.node is not init:
        # ``self.llm = self._build_llm(config)`` in ``__init__``, the method returning the
        # new engine: the same class, built one call away.
        init_self = _self_name(init)
        store = next((s for s in init.body if isinstance(s, ast.Assign)
                      and len(s.targets) == 1 and _is_self_attr(s.targets[0], init_self)
                      and isinstance(s.value, ast.Call)
                      and _is_self_attr(s.value.func, init_self, func.name)), None)
    if store is None:
        return None
    attribute = store.targets[0].attr  # type: ignore[attr-defined]
    cleanup = tuple(_cleanup_statements(module, cls, attribute))
    deletes = tuple(_instance_deletes(module, cls, attribute))
    plan = _ClassPlanner(module, cls, site, attribute, func.node, init, cleanup,
                         store, deletes).plan()
    return OwnerClass(cls, site, attribute, func.node, plan, cleanup, deletes)


def _cleanup_statements(module: ModuleAnalysis, cls: ast.ClassDef,
                        attribute: str) -> list[tuple[ast.stmt, str]]:
    """``(statement, what)`` for each manual cleanup in the class's methods: ``del
    self.<attribute>`` and the cleanup calls GPU004 knows (``gc.collect()`` ...)."""
    found: list[tuple[ast.stmt, str]] = []
    for method in _methods(cls).values():
        self_name = _self_name(method)
        for node in walk_breadth(method):
            if isinstance(node, ast.Delete) and node.targets and all(
                    _is_self_attr(t, self_name, attribute) for t in node.targets):
                found.append((node, f"del {self_name}.{attribute}"))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                what = module.cleanup_call_kind(node.value)
                if what is not None:
                    found.append((node, what))
    return found


def _instance_deletes(module: ModuleAnalysis, cls: ast.ClassDef,
                      attribute: str) -> list[tuple[ast.stmt, str]]:
    """``(statement, what)`` for each ``del tester.<attribute>`` in a function that binds
    ``tester = <cls>(...)`` (every target such an attribute)."""
    found: list[tuple[ast.stmt, str]] = []
    for func in module.functions:
        nodes = module.nodes_of(func)
        instances = {t.id for n in nodes if isinstance(n, ast.Assign)
                     and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                     and n.value.func.id == cls.name
                     for t in n.targets if isinstance(t, ast.Name)}
        if not instances:
            continue
        for node in nodes:
            if isinstance(node, ast.Delete) and node.targets and all(
                    isinstance(t, ast.Attribute) and t.attr == attribute and
                    isinstance(t.value, ast.Name) and t.value.id in instances
                    for t in node.targets):
                found.append((node, "del " + ", ".join(
                    f"{t.value.id}.{attribute}" for t in node.targets  # type: ignore[attr-defined]
                )))
    return found


# ------------------------------------------------------------------------- planning

class _ClassPlanner:
    """Decides the fix of one owner class (see the module docstring for the rules)."""

    def __init__(self, module: ModuleAnalysis, cls: ast.ClassDef, site: EngineSite,
                 attribute: str, builder: ast.FunctionDef | ast.AsyncFunctionDef,
                 init: ast.FunctionDef | ast.AsyncFunctionDef,
                 cleanup: tuple[tuple[ast.stmt, str], ...], store: ast.Assign,
                 deletes: tuple[tuple[ast.stmt, str], ...] = ()) -> None:
        self.module = module
        self.deletes = deletes
        self.store = store
        self.cls = cls
        self.site = site
        self.attribute = attribute
        self.builder = builder
        self.init = init
        self.cleanup = cleanup
        runner = module.config.runner_classes[0] if module.config.runner_classes \
            else "VllmRunner"
        self.title = CLASS_TITLE.format(cls=cls.name, runner=runner)

    def none(self, reason: str) -> FixInfo:
        return FixInfo(Applicability.NONE, self.title, reason)

    def plan(self) -> ClassPlan | FixInfo:
        problem = self.class_problem() or self.attribute_problem()
        if problem is not None:
            return self.none(problem)
        arg_problem = planner_for(self.module)._argument_problem(self.site.call)
        if isinstance(arg_problem, Blocked):
            return self.none(arg_problem.reason)
        compilation: str | None = None
        cc_problem: FixProblem | None = None
        if self.module.config.target == "vllm":
            if hides_model(self.site.call):
                return self.none("the engine's arguments come in a mapping, which the class's "
                                 "runner call does not map onto vLLM's `VllmRunner`")
            given = next((k.value for k in self.site.call.keywords
                          if k.arg == "compilation_config"), None)
            if given is not None:
                compilation, cc_problem = compilation_config_equivalent(given, self.module)
                if isinstance(cc_problem, Blocked):
                    return self.none(cc_problem.reason)
        cleanup_lines = {stmt.lineno for stmt, _ in self.cleanup}
        remove = set(cleanup_lines)
        cleanup_methods = self.cleanup_methods(cleanup_lines)
        remove |= {m.lineno for m in cleanup_methods.values()}
        uses = self.use_plans()
        if isinstance(uses, FixInfo):
            return uses
        calls = self.cleanup_method_calls(cleanup_methods, uses)
        if isinstance(calls, FixInfo):
            return calls
        remove |= calls
        deleted = self.instance_delete_lines(uses)
        if isinstance(deleted, FixInfo):
            return deleted
        remove |= deleted
        cleanup_lines |= deleted
        unwrap = self.finally_only_closes(remove, uses)
        reasons = [UNSAFE_REASON.format(cls=self.cls.name)]
        if cleanup_methods:
            gone = ", ".join(f"`{name}()`" for name in sorted(cleanup_methods))
            verb = "is" if len(cleanup_methods) == 1 else "are"
            reasons.append(f"its cleanup-only {gone} {verb} deleted, so a caller in another "
                           "module that still calls it breaks")
        reasons.extend(p.reason for p in (arg_problem, cc_problem) if p is not None)
        if self.module.config.target == "vllm" and \
                (unimportable := tests_package_problem(self.module)) is not None:
            reasons.append(unimportable)
        for use in uses:
            if use.reason and use.reason not in reasons:
                reasons.append(use.reason)
        taken = {n.attr for n in walk_breadth(self.cls) if isinstance(n, ast.Attribute)}
        runner_attribute, k = "_runner", 2
        while runner_attribute in taken:
            runner_attribute, k = f"_runner{k}", k + 1
        return ClassPlan(
            class_name=self.cls.name,
            site_line=self.site.statement.lineno,
            call_line=self.site.call.lineno,
            attribute=self.attribute,
            runner_attribute=runner_attribute,
            init_line=self.init.lineno,
            remove_lines=remove,
            unwrap_try_lines=unwrap,
            cleanup_lines=cleanup_lines,
            uses=uses,
            applicability=Applicability.UNSAFE,
            reason="; ".join(reasons),
            title=self.title,
            returned_by=_self_name(self.builder) if self.store is not self.site.statement
            else None,
            import_from=RUNNER_CLASS_MODULES.get(self.module.config.target,
                                                 RUNNER_CLASS_MODULES["bundled"]),
            compilation_config=compilation,
        )

    def class_problem(self) -> str | None:
        """Why the class itself cannot become a context manager, or ``None``."""
        cls = self.cls
        if self.module.config.target == "vllm":
            missing = vllm_runner_class_problem(self.module)
            if missing is not None:
                return missing
        if self.module.config.runner:
            return (f"a helper class holds a runner built in `__init__`, and the project's "
                    f"runner (`runner = \"{self.module.config.runner}\"`) is entered only by "
                    "`with`")
        if not isinstance(self.module.parent(cls), ast.Module):
            return f"`{cls.name}` is not defined at module level"
        if cls.bases or cls.keywords or cls.decorator_list:
            return (f"`{cls.name}` has bases, a metaclass or decorators: what it inherits or "
                    "how it is wrapped is not followed")
        existing = sorted(CONTEXT_METHODS & set(_methods(cls)))
        if existing:
            return f"`{cls.name}` already defines `{existing[0]}`"
        engines = [s for s in self.module.engines if s.function is not None
                   and self.module.parent(s.function.node) is cls]
        if len(engines) != 1:
            return f"`{cls.name}` builds several engines"
        if self.builder is not self.init and sum(
                1 for n in walk_breadth(cls) if isinstance(n, ast.Attribute)
                and n.attr == self.builder.name) != 1:
            return (f"`{self.builder.name}()` is called other than once from `__init__`: "
                    "the engine may be rebuilt")
        if self.store is not self.site.statement and (
                self.builder.decorator_list or _self_name(self.builder) is None):
            return (f"`{self.builder.name}()` is decorated or takes no `self`: the runner "
                    "cannot be kept on the instance")
        for node in walk_breadth(self.module.tree):
            if isinstance(node, ast.ClassDef) and node is not cls and any(
                    isinstance(b, ast.Name) and b.id == cls.name for b in node.bases):
                return f"`{node.name}` inherits from `{cls.name}`"
        return None

    def attribute_problem(self) -> str | None:
        """Why ``self.<attribute>`` cannot become a proxy, or ``None``: every use must go
        through an attribute of it (``self.llm.generate``)."""
        removed = {id(n) for stmt, _ in self.cleanup for n in walk_breadth(stmt)}
        for method in _methods(self.cls).values():
            self_name = _self_name(method)
            for node in walk_breadth(method):
                if not _is_self_attr(node, self_name, self.attribute) or id(node) in removed:
                    continue
                assert isinstance(node, ast.Attribute)
                if isinstance(node.ctx, ast.Store):
                    if node is not self.store.targets[0]:
                        return (f"`{self_name}.{self.attribute}` is rebound in "
                                f"`{method.name}()` (line {node.lineno})")
                    continue
                parent = self.module.parent(node)
                if not (isinstance(parent, ast.Attribute) and parent.value is node):
                    return (f"`{method.name}()` uses `{self_name}.{self.attribute}` itself "
                            f"(line {node.lineno}), not through its attributes: a proxy may "
                            "not keep that behaviour, and what receives it is not followed")
        return None

    def cleanup_methods(self, cleanup_lines: set[int]
                        ) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        """Methods whose body is nothing but cleanup (a docstring allowed): deleted whole."""
        out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for name, method in _methods(self.cls).items():
            body = method.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                body = body[1:]
            if body and not method.decorator_list and all(
                    s.lineno in cleanup_lines for s in body):
                out[name] = method
        return out

    def use_plans(self) -> list[WrapPlan] | FixInfo:
        """One with-block plan per instance, planned as a bare runner of a runner class
        named like this class (what the class is once rewritten)."""
        module = self.module
        name = self.cls.name
        config = replace(module.config,
                         runner_classes=(*module.config.runner_classes, name))
        as_runner = ModuleAnalysis.build(module.tree, module.text, module.path, config,
                                         module._conftest_fixtures)
        planner = planner_for(as_runner)
        calls: dict[int, RunnerCall] = {
            id(c.call.func): c for c in as_runner.runner_calls
            if isinstance(c.call.func, ast.Name) and c.call.func.id == name}
        plans: list[WrapPlan] = []
        functions: set[int] = set()
        for node in walk_breadth(module.tree):
            if not (isinstance(node, ast.Name) and node.id == name):
                continue
            call = calls.get(id(node))
            if call is None:
                return self.none(f"`{name}` is used at line {node.lineno} other than by "
                                 f"`name = {name}(...)` in a function")
            where = f"`{name}(...)` at line {node.lineno}"
            if call.function is None or call.context != "bare" or call.under_main_guard:
                return self.none(f"{where} is not built as `name = {name}(...)` in a function")
            plan = planner.runner_plan(call)
            if isinstance(plan, FixInfo):
                return self.none(f"{where}: {plan.reason}")
            if plan.bound_name is None:
                return self.none(f"{where} is not bound to a name")
            if plan.function_line in functions:
                return self.none(f"{where}: a second instance in one function")
            functions.add(plan.function_line)
            plans.append(plan)
        if not plans:
            return self.none(f"`{name}` is not instantiated in this module: its users are "
                             "elsewhere")
        return plans

    def cleanup_method_calls(
        self, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
        uses: list[WrapPlan],
    ) -> set[int] | FixInfo:
        """Lines of the calls of the deleted cleanup methods; each must be a statement
        ``<instance>.close()`` inside that instance's block."""
        lines: set[int] = set()
        for name in methods:
            if name.startswith("__") and name.endswith("__"):
                if name != "__del__":
                    return self.none(f"`{self.cls.name}.{name}` only cleans up")
                continue
            for node in walk_breadth(self.module.tree):
                if not (isinstance(node, ast.Attribute) and node.attr == name):
                    continue
                stmt = self.module.statement_of(node)
                call = stmt.value if isinstance(stmt, ast.Expr) else None
                owner = next((u for u in uses if isinstance(call, ast.Call)
                              and call.func is node and isinstance(node.value, ast.Name)
                              and node.value.id == u.bound_name
                              and (u.site_line < stmt.lineno <= u.end_line
                                   or stmt.lineno in u.remove_lines)), None)
                if owner is None:
                    return self.none(f"`{name}()` (which only cleans up) is called at line "
                                     f"{node.lineno} other than on an instance inside its "
                                     "block")
                lines.add(stmt.lineno)
        return lines

    def instance_delete_lines(self, uses: list[WrapPlan]) -> set[int] | FixInfo:
        """Lines of the ``del tester.llm`` statements (:func:`_instance_deletes`), each inside
        its instance's block with nothing reading ``tester.llm`` after it in the function
        (where it raised ``AttributeError``, the proxy would answer)."""
        lines: set[int] = set()
        for stmt, what in self.deletes:
            assert isinstance(stmt, ast.Delete)
            target = stmt.targets[0]
            assert isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            name = target.value.id
            owner = next((u for u in uses if u.bound_name == name and (
                u.site_line < stmt.lineno <= u.end_line or stmt.lineno in u.remove_lines)),
                None)
            if owner is None:
                return self.none(f"`{what}` (line {stmt.lineno}) deletes the engine other "
                                 "than inside its instance's block")
            func = self.module.enclosing(stmt, FUNCTION_DEFS)
            later = read_after(sorted((s for s in walk_breadth(func or self.module.tree)
                                       if isinstance(s, ast.stmt) and s.lineno > stmt.lineno),
                                      key=lambda s: s.lineno), f"{name}.{self.attribute}")
            if later is not None:
                return self.none(f"`{name}.{self.attribute}` is read at line {later}, after "
                                 f"`{what}` (line {stmt.lineno}) deleted it: the proxy the fix "
                                 "leaves there would answer instead of raising "
                                 "`AttributeError`")
            lines.add(stmt.lineno)
        return lines

    def finally_only_closes(self, remove: set[int], uses: list[WrapPlan]) -> set[int]:
        """Lines of the ``try`` statements (no ``except``/``else``) inside an instance's
        block whose ``finally`` only holds statements the rewrite removes."""
        gone = remove | set().union(*(u.remove_lines for u in uses))
        lines: set[int] = set()
        for node in walk_breadth(self.module.tree):
            if isinstance(node, ast.Try) and not node.handlers and not node.orelse and \
                    node.finalbody and all(s.lineno in gone for s in node.finalbody) and \
                    any(u.site_line < node.lineno <= u.end_line for u in uses):
                lines.add(node.lineno)
        return lines

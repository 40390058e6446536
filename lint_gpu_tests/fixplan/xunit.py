"""Fix planning for engines an xunit set-up stores on its class or instance (or a module's
set-up in a global) and its teardown cleans up by hand.

The shape, as older plugin suites and ``unittest`` classes have it::

    class TestGenerate:
        @classmethod
        def setup_class(cls):
            cls.llm = LLM(MODEL, max_model_len=256)

        @classmethod
        def teardown_class(cls):
            del cls.llm
            gc.collect()

        def test_generate(self):
            assert self.llm.generate(["hi"])

The fix keeps the set-up and the teardown and hands the engine to the runner class there: the
set-up opens an ``ExitStack`` on the class (or instance) and enters the runner on it, binding
the attribute to the engine's proxy, and the teardown closes the stack where its hand cleanup
began::

        @classmethod
        def setup_class(cls):
            cls._engine_stack = contextlib.ExitStack()
            cls.llm = weakref.proxy(cls._engine_stack.enter_context(VllmRunner(MODEL, ...)).llm)

        @classmethod
        def teardown_class(cls):
            cls._engine_stack.close()

Decisions (README, "Fix safety": a safe fix keeps behaviour):

* Nothing moves in time: the bundled ``VllmRunner`` builds the engine on construction, where
  ``LLM(...)`` was, and the stack closes where the teardown's first cleanup statement ran,
  so the engine lives exactly as long as before; pytest (and ``unittest``) call the two
  methods as before. The runner's teardown does the hand cleanup's work (shutdown, garbage
  collection, the device's cache) and more (the engine's processes ended).
* A class whose set-up stores the engine and that has no teardown of that pair keeps the
  engine until the class object goes (the end of the session): the fix adds the teardown
  (``teardown_class``, ``tearDownClass``, ``teardown_method``, ``tearDown``, a class method
  where the set-up is one) closing the stack, so the engine is shut down when the class's
  tests are done, as GPU001's other fixes end a leak, unless the class has a base (other
  than ``unittest``'s test cases) whose teardown the new one could replace.
* The attribute now holds a ``weakref.proxy``: the tests' uses through its attributes
  (``self.llm.generate(...)``) behave the same; an identity check on it (``is``, ``id()``,
  ``type()``, a weak reference) is judged unsafe, as for every proxy the fixes bind.
* A module's pair (``setup_module``/``teardown_module``, ``setUpModule``/``tearDownModule``,
  ``setup_function``/``teardown_function``) whose set-up stores the engine in a global it
  declares (``global llm``) is fixed the same way on a global stack: the set-up's ``global``
  statement declares ``_engine_stack`` too, and the teardown calls ``_engine_stack.close()``.
  A module-level ``llm = None`` (the global's first value, before any set-up runs) is no
  other store; a test's local of the same name is not the global. ``setup_module(module)``
  storing it on the module object (``module.llm = LLM(...)``, the same global) keeps the
  stack there too (``module._engine_stack``), closed by ``module._engine_stack.close()`` (or,
  in a teardown without the module object, ``_engine_stack.close()``).
* An engine a factory helper of the tree builds (``cls.llm = build_engine()``, the helper
  rewritten into a context manager by its unit, :mod:`lint_gpu_tests.fixplan.factories`) is
  handed to the stack the same way: the set-up enters the helper's context manager on it
  (``cls.llm = cls._engine_stack.enter_context(build_engine())``; the helper yields the
  engine's proxy), planned as one caller of the unit (:func:`xunit_caller_plan`).
* No fix: the set-up builds more than one engine or builds it other than as
  ``<receiver>.<attribute> = LLM(...)``, a statement of its own directly in the set-up's body;
  the class or a function of the module assigns or deletes
  that attribute (or global) elsewhere; the teardown's cleanup of it is not one run of
  statements directly in its body, or a later statement of the teardown reads the attribute;
  the project has its own runner; with ``target = "vllm"``, the project's tests/conftest.py does not
  define ``VllmRunner``, or the engine's arguments come in a mapping.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from lint_gpu_tests.analysis.analysis import EngineSite, FunctionInfo, ModuleAnalysis
from lint_gpu_tests.analysis.env_mutations import TEARDOWN_OF, UNITTEST_CASES
from lint_gpu_tests.analysis.mappings import hides_model
from lint_gpu_tests.fixplan.classes import (
    RUNNER_CLASS_MODULES,
    tests_package_problem,
    vllm_runner_class_problem,
)
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.fixplan.safety import compilation_config_equivalent
from lint_gpu_tests.fixplan.stored import (
    cleanup_run,
    engines_built_in,
    holds,
    proxy_risks,
    rebinds_global,
)
from lint_gpu_tests.ftypes import Applicability, Blocked, FixInfo, FixKind, FixPlan
from lint_gpu_tests.parsing.source import walk_breadth

XUNIT_TITLE = ("Enter `{runner}` on an `ExitStack` in `{setup}()` and close it in "
               "`{teardown}()`")
#: The attribute the fix stores the stack on (a number is added where the class uses it).
STACK_ATTRIBUTE = "_engine_stack"


@dataclass
class XunitPlan(FixPlan):
    """How to hand an xunit set-up's engine to the runner class.

    Line numbers are 1-based ``ast`` statement starts in the module as checked.

    Attributes:
        setup_line / teardown_line: the ``def`` lines of the set-up and the teardown (0:
            the class has no teardown, and the fix adds one).
        site_line: the statement ``<receiver>.<attribute> = LLM(...)`` in the set-up.
        call_line: the engine call (where GPU001 reports).
        receiver: the set-up's and the teardown's first parameter (``cls``, ``self``,
            ``module``), as each spells it: ``(setup's, teardown's)``; ``""`` where a
            module-level function reaches the stack as a global (a set-up storing the engine
            in a global, a teardown without the module object).
        attribute: the engine's attribute (``llm``), or that global's name.
        stack_attribute: the attribute holding the ``ExitStack`` (``_engine_stack``).
        remove_lines: the teardown's cleanup statements (what GPU004 reports there).
        close_line: the first of them, which ``<receiver>.<stack>.close()`` replaces (0: no
            teardown).
        import_from: the module ``VllmRunner`` is imported from.
        compilation_config: with ``target = "vllm"``, the source of the equivalent
            ``compilation_config`` (:func:`compilation_config_equivalent`), or ``None``.
        global_line: the set-up's ``global`` statement declaring that global, which the
            stack's global joins (0: a class's set-up).
        undeclare_line: the teardown's ``global`` statement declaring that global, which no
            longer names it once the cleanup is gone (0: it stays as it is).
        in_class: the set-up is a class's (else a module's: a teardown the fix adds goes two
            blank lines after it).
        factory: the factory helper whose call the set-up enters on the stack as it is
            (``""``: the set-up builds the engine, and the runner class is entered).
        applicability / reason / title: as :class:`lint_gpu_tests.ftypes.FixInfo`.
    """

    FIX_KIND = FixKind.XUNIT_ENGINE_STACK
    setup_line: int
    teardown_line: int
    site_line: int
    call_line: int
    receiver: tuple[str, str]
    attribute: str
    stack_attribute: str
    close_line: int
    remove_lines: set[int] = field(default_factory=set)
    import_from: str = RUNNER_CLASS_MODULES["bundled"]
    compilation_config: str | None = None
    #: The teardown the fix adds after the set-up where the class has none (``""``: it
    #: has one), and whether it is a class method (as the set-up is).
    add_teardown: str = ""
    class_method: bool = False
    global_line: int = 0
    undeclare_line: int = 0
    in_class: bool = True
    factory: str = ""
    applicability: Applicability = Applicability.SAFE
    reason: str = ""
    title: str = ""

    @property
    def anchor(self) -> tuple[str, int]:
        """``(code, row)`` of the GPU001 violation this plan fixes."""
        return ("GPU001", self.call_line)

    # As a caller of a factory unit (:class:`lint_gpu_tests.fixplan.factories.FactoryCaller`)
    # the plan answers what a caller's with-block does: its function is the set-up, its
    # block the one statement that stores the engine, and it unwraps no ``try``.
    @property
    def function_line(self) -> int:
        """The set-up's ``def`` line."""
        return self.setup_line

    @property
    def end_line(self) -> int:
        """The statement that stores the engine (the set-up holds no block)."""
        return self.site_line

    @property
    def unwrap_try_lines(self) -> frozenset[int]:
        """None: the teardown's cleanup run is replaced, no ``try`` unwrapped."""
        return frozenset()

    def fix_info(self) -> FixInfo:
        """The fix of the set-up's GPU001, carrying this plan."""
        return FixInfo(self.applicability, self.title, self.reason, self.FIX_KIND, self)

    def covered_fix(self, title: str) -> FixInfo:
        """The fix of a teardown's GPU004 this plan removes: applied with the GPU001."""
        return FixInfo(self.applicability, title, self.reason, FixKind.WITH_ANOTHER)


def xunit_plan_of(module: ModuleAnalysis, site: EngineSite) -> XunitPlan | FixInfo | None:
    """The plan for the engine ``site`` builds when an xunit set-up of a class stores it
    (``cls.llm = LLM(...)`` in ``setup_class``) and the paired teardown cleans it up by hand,
    or the missing fix with its reason; ``None`` when ``site`` is not that shape."""
    return module.derived(_xunit_plans).get(id(site.call))


def xunit_plan_for_teardown(module: ModuleAnalysis, teardown: FunctionInfo
                            ) -> XunitPlan | FixInfo | None:
    """The plan (or missing fix) of the engine whose set-up pairs with ``teardown``."""
    for site in module.engines:
        found = xunit_plan_of(module, site)
        setup = site.function
        if found is not None and setup is not None and \
                TEARDOWN_OF.get(setup.name) == teardown.name and \
                setup.owner_class is teardown.owner_class:
            return found
    return None


def _xunit_plans(module: ModuleAnalysis) -> dict[int, XunitPlan | FixInfo]:
    out: dict[int, XunitPlan | FixInfo] = {}
    for site in module.engines:
        setup = site.function
        if setup is None:
            continue
        stored = _stored(module, setup, site.statement, site.call)
        if stored is not None:
            out[id(site.call)] = _plan(module, site.call, setup, *stored)
    return out


#: The module-level set-ups whose engine a global holds (``setup_function`` runs before
#: each test of the module, the others once).
MODULE_SETUPS = frozenset({"setup_module", "setUpModule", "setup_function"})


def _stored(module: ModuleAnalysis, setup: FunctionInfo, stmt: ast.stmt, call: ast.Call
            ) -> tuple[FunctionInfo | None, str, bool] | None:
    """``(the paired teardown or None, the attribute or global name, whether a module's
    set-up stores it on the module object it takes)`` when ``stmt`` of the xunit set-up
    ``setup`` stores the engine ``call`` gives: ``<receiver>.<attribute> = <call>`` in a
    class's set-up, ``<name> = <call>`` of a name the module-level set-up declares
    ``global``, ``module.<name> = <call>`` in ``setup_module(module)`` (the module's global
    too); else ``None`` (not that shape)."""
    if setup.name not in TEARDOWN_OF or setup.parent is not None or not (
            isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.value is call):
        return None
    target = stmt.targets[0]
    on_first = bool(setup.params) and isinstance(target, ast.Attribute) and \
        isinstance(target.value, ast.Name) and target.value.id == setup.params[0]
    on_module = False
    if setup.owner_class is not None:
        if not on_first:
            return None
        name = target.attr  # type: ignore[attr-defined]
    elif setup.name in MODULE_SETUPS and isinstance(target, ast.Name) and \
            _global_statement(setup, target.id) is not None:
        name = target.id
    elif setup.name in MODULE_SETUPS and on_first and setup.name != "setup_function":
        name, on_module = target.attr, True  # type: ignore[attr-defined]
    else:
        return None
    teardown = _teardown_of(module, setup)
    if teardown is not None and setup.owner_class is not None and not teardown.params:
        return None
    return teardown, name, on_module


def stores_on_xunit(module: ModuleAnalysis, call: ast.Call) -> bool:
    """True when ``call``'s statement is an xunit set-up's store of the engine it gives
    (``cls.llm = build_engine()`` in ``setup_class``; :func:`xunit_caller_plan`'s shape)."""
    node = module.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef))
    setup = next((f for f in module.functions if f.node is node), None)
    return setup is not None and \
        _stored(module, setup, module.statement_of(call), call) is not None


def _global_statement(func: FunctionInfo, name: str) -> ast.Global | None:
    """The ``global`` statement directly in ``func``'s body that declares ``name``."""
    return next((s for s in func.node.body if isinstance(s, ast.Global) and name in s.names),
                None)


def xunit_caller_plan(module: ModuleAnalysis, setup: FunctionInfo, call: ast.Call,
                      factory: str) -> XunitPlan | Blocked | None:
    """The plan for a call of the factory helper ``factory`` (``call``, in ``setup``) whose
    engine an xunit set-up stores on its class or instance (``cls.llm = build_engine()``)
    or in a global (``setup_module``), as one caller of the factory's unit: the set-up
    enters the helper's context manager on an ``ExitStack`` the paired teardown closes.
    ``None`` when the call is not that shape (the unit plans it as a with-block);
    :class:`Blocked` with the reason when it is and no fix hands it to a stack.

    ``module`` is the analysis the unit plans its callers on (the factory among its runner
    classes, so that ``call`` is one of :attr:`ModuleAnalysis.runner_calls`)."""
    stored = _stored(module, setup, module.statement_of(call), call)
    if stored is None:
        return None
    found = _plan(module, call, setup, *stored, factory=factory)
    return Blocked(found.reason) if isinstance(found, FixInfo) else found


def _teardown_of(module: ModuleAnalysis, setup: FunctionInfo) -> FunctionInfo | None:
    """The teardown of the set-up's pair in its class (``teardown_class`` of
    ``setup_class``), if the class has one."""
    return next((f for f in module.functions if f.name == TEARDOWN_OF[setup.name]
                 and f.parent is None and f.owner_class is setup.owner_class), None)


def _plan(module: ModuleAnalysis, call: ast.Call, setup: FunctionInfo,
          teardown: FunctionInfo | None, attribute: str, on_module: bool = False,
          factory: str = "") -> XunitPlan | FixInfo:
    """The plan (or missing fix) for the engine ``call`` builds, stored on ``attribute`` by
    ``setup`` (``on_module``: on the module object a module's set-up takes, ``module.llm``);
    with ``factory``, ``call`` calls that factory helper, whose unit plans the engine's
    construction (the runner, its arguments, the target), and this plan only the stack."""
    config = module.config
    runner = config.runner_classes[0] if config.runner_classes else "VllmRunner"
    teardown_name = TEARDOWN_OF[setup.name]
    title = XUNIT_TITLE.format(runner=runner, setup=setup.name, teardown=teardown_name)
    if teardown is None:
        title = title.replace(" and close it in ", " and close it in a new ")

    def none(reason: str) -> FixInfo:
        return FixInfo.none(title, reason)

    owner = setup.owner_class
    # A class's set-up stores on its first parameter; a module's in a global (receiver "").
    receiver = setup.params[0] if owner is not None or on_module else ""
    if teardown is not None and (owner is not None or on_module):
        # A module's teardown without the module object reaches the stack as a global.
        closer = teardown.params[0] if teardown.params else ""
    else:
        closer = receiver
    spelled = f"{receiver}.{attribute}" if receiver else attribute
    stmt = module.statement_of(call)
    assert isinstance(stmt, ast.Assign)  # as :func:`_xunit_plans` found it
    planner = planner_for(module)
    # With a factory, its unit decides the runner and what the target needs.
    if config.runner and not factory:
        return none(f"the project's runner (`runner = \"{config.runner}\"`) is not one an "
                    "xunit set-up's engine is handed to")
    if config.target == "vllm" and not factory:
        missing = vllm_runner_class_problem(module)
        if missing is not None:
            return none(missing)
        if hides_model(call):
            return none("the engine's arguments come in a mapping, which the set-up's runner "
                        "call does not map onto vLLM's `VllmRunner`")
    if not any(s is stmt for s in setup.node.body) or planner.shares_line(stmt) or \
            planner.on_header_line(stmt) or stmt.value is not call:
        built = f"{factory}(...)" if factory else "LLM(...)"
        return none(f"`{setup.name}()` builds the engine other than as a statement "
                    f"`{spelled} = {built}` of its own, directly in its body")
    if engines_built_in(module, setup) != 1:
        return none(f"`{setup.name}()` builds several engines")
    elsewhere = _other_store(module, owner, attribute, stmt.targets[0], teardown, on_module)
    if elsewhere is not None:
        where = f"`{owner.name}`" if owner is not None else "the module"
        return none(f"`{attribute}` is assigned or deleted elsewhere in {where} (line "
                    f"{elsewhere}): the stack would not own what it holds then")
    if teardown is not None:
        remove = cleanup_run(module, teardown.node.body,
                             f"{closer}.{attribute}" if closer else attribute,
                             f"`{teardown.name}()`")
        if isinstance(remove, str):
            return none(remove)
    else:
        inherited = _may_inherit_teardown(module, owner) if owner is not None else None
        if inherited is not None:
            return none(inherited)
        remove = []
    arg_problem = None if factory else planner._argument_problem(call)
    if isinstance(arg_problem, Blocked):
        return none(arg_problem.reason)
    reasons = [arg_problem.reason] if arg_problem is not None else []
    compilation: str | None = None
    if config.target == "vllm" and not factory and \
            (unimportable := tests_package_problem(module)) is not None:
        reasons.append(unimportable)
    if config.target == "vllm" and not factory:
        given = next((k.value for k in call.keywords if k.arg == "compilation_config"),
                     None)
        if given is not None:
            compilation, cc_problem = compilation_config_equivalent(given, module)
            if isinstance(cc_problem, Blocked):
                return none(cc_problem.reason)
            if cc_problem is not None:
                reasons.append(cc_problem.reason)
    risks = proxy_risks(module, owner if owner is not None else module.tree, attribute,
                        set(remove), global_name=owner is None)
    if isinstance(risks, Blocked):
        return none(risks.reason)
    reasons.extend(risks)
    taken = {n.attr for n in walk_breadth(owner) if isinstance(n, ast.Attribute)} \
        if owner is not None else {n.id for n in walk_breadth(module.tree)
                                   if isinstance(n, ast.Name)} | {
                                       f.name for f in module.functions}
    stack, k = STACK_ATTRIBUTE, 2
    while stack in taken:
        stack, k = f"{STACK_ATTRIBUTE}{k}", k + 1
    return XunitPlan(
        setup_line=setup.node.lineno,
        teardown_line=teardown.node.lineno if teardown is not None else 0,
        site_line=stmt.lineno,
        call_line=call.lineno,
        receiver=(receiver, closer),
        attribute=attribute,
        stack_attribute=stack,
        close_line=min(remove, default=0),
        remove_lines=set(remove),
        add_teardown="" if teardown is not None else teardown_name,
        in_class=owner is not None,
        class_method=any(isinstance(d, ast.Name) and d.id == "classmethod"
                         for d in setup.node.decorator_list),
        global_line=global_line.lineno if (global_line := _global_statement(
            setup, attribute)) is not None and owner is None else 0,
        undeclare_line=_undeclared(teardown, attribute, set(remove))
        if owner is None and teardown is not None else 0,
        import_from=RUNNER_CLASS_MODULES.get(config.target, RUNNER_CLASS_MODULES["bundled"]),
        compilation_config=compilation,
        factory=factory,
        applicability=Applicability.UNSAFE if reasons else Applicability.SAFE,
        reason="; ".join(reasons),
        title=title,
    )


def _may_inherit_teardown(module: ModuleAnalysis, owner: ast.ClassDef) -> str | None:
    """Why a teardown added to ``owner`` might replace one it inherits (a base other than
    ``object`` and ``unittest``'s test cases, whose teardowns do nothing; a metaclass), or
    ``None``."""
    for base in owner.bases:
        if not (isinstance(base, ast.Name) and base.id == "object") and \
                module.qualified(base) not in UNITTEST_CASES:
            return (f"`{owner.name}` has no teardown of its own and inherits from "
                    f"`{ast.unparse(base)}`: a teardown the fix adds could replace one it "
                    "inherits")
    if owner.keywords:
        return f"`{owner.name}` has no teardown of its own and a metaclass"
    return None


def _in_lines(node: ast.AST, module: ModuleAnalysis, func: FunctionInfo) -> bool:
    """True when ``node`` lies in ``func``."""
    return module.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef)) is func.node


def _other_store(module: ModuleAnalysis, owner: ast.ClassDef | None, attribute: str,
                 target: ast.expr, teardown: FunctionInfo | None, on_module: bool = False
                 ) -> int | None:
    """The line of an assignment or ``del`` of the engine's attribute in ``owner`` (of the
    global ``attribute``, ``owner`` ``None``; ``on_module``: of that global or of a module
    object's ``attribute`` in a function of the module) other than ``target`` and the
    teardown's; a module-level ``<name> = <constant>`` (the global's first value, before any
    set-up runs) does not count. ``None`` when there is none."""
    if owner is not None:
        for node in walk_breadth(owner):
            if isinstance(node, ast.Attribute) and node.attr == attribute and \
                    not isinstance(node.ctx, ast.Load) and node is not target and \
                    module.enclosing(node, (ast.ClassDef,)) is owner and \
                    (teardown is None or not _in_lines(node, module, teardown)):
                return node.lineno
        return None
    for node in walk_breadth(module.tree):
        if node is target or isinstance(node, (ast.Name, ast.Attribute)) and \
                teardown is not None and _in_lines(node, module, teardown):
            continue
        if isinstance(node, ast.Name) and node.id == attribute and \
                not isinstance(node.ctx, ast.Load) and rebinds_global(module, node):
            return node.lineno
        if on_module and isinstance(node, ast.Attribute) and node.attr == attribute and \
                not isinstance(node.ctx, ast.Load) and \
                module.enclosing(node, (ast.ClassDef,)) is None:
            return node.lineno
    return None


def _undeclared(teardown: FunctionInfo, name: str, removed: set[int]) -> int:
    """The line of the teardown's ``global <name>`` when nothing the fix leaves in the
    teardown refers to the global (its cleanup removed), else 0."""
    declared = _global_statement(teardown, name)
    if declared is None or any(holds(n, name) for s in teardown.node.body
                               if s is not declared and s.lineno not in removed
                               for n in walk_breadth(s)):
        return 0
    return declared.lineno

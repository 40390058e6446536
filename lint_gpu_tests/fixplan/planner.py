"""The planner: which statements a rewrite covers and how safe it is.

The checker decides here, without LibCST, whether each violation has a safe, unsafe or
no fix (README, "Fix safety"), and records *what* the rewrite must do as a
:class:`~lint_gpu_tests.fixplan.plan.WrapPlan`: the block and the range of statements the
``with`` covers (construction to last use), the cleanup statements to delete, the
parameters to add or drop. The codemods in ``lint_gpu_tests/codemods/`` apply plans
mechanically, locating statements by their line numbers, so the decision lives in one
place and ``check`` can print ``[*]`` before anything is rewritten. The steps it takes are
the other modules of :mod:`lint_gpu_tests.fixplan`: statement layout, value flow, cleanup
recognition and safety checks.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, replace

from lint_gpu_tests.analysis.analysis import (
    EngineSite,
    FunctionInfo,
    FunctionKind,
    ModuleAnalysis,
    RunnerCall,
    guarding_try,
    statement_block,
)
from lint_gpu_tests.analysis.env_mutations import TEARDOWN_OF
from lint_gpu_tests.analysis.helper_calls import ONE_MODULE, HelperCallers, runner_through_callers
from lint_gpu_tests.analysis.mappings import hides_model, plan_mapping
from lint_gpu_tests.config import REEXPORTS
from lint_gpu_tests.fixplan.blocks import (
    loads_of,
    node_contains,
    reads_or_deletes,
    stores_at_top,
)
from lint_gpu_tests.fixplan.cleanup import CleanupRecognizer, cleanup_beyond_the_runner
from lint_gpu_tests.fixplan.flow import Helpers, ValueFlow, module_helpers, value_flow
from lint_gpu_tests.fixplan.groups import (
    FACTORY_REASON,
    GROUP_TITLE,
    FactoryParts,
    GroupShape,
    after_loop_cleanup,
    engine_group,
    factory_fixture,
    group_cleanup_loop,
    identity_problem,
    inside_loop,
    other_branch_statements,
)
from lint_gpu_tests.fixplan.plan import VLLM_TARGET_DEFAULTS, WRAP_TITLE, PlanKind, WrapPlan
from lint_gpu_tests.fixplan.runner_target import project_runner_problem
from lint_gpu_tests.fixplan.safety import (
    FACTORY_ADVICE,
    SafetyChecks,
    cached_reason,
    compilation_config_equivalent,
    hands_out_where,
    plain_aliases,
    weak_calls,
)
from lint_gpu_tests.fixplan.stored import stored_shape, stored_target
from lint_gpu_tests.ftypes import Applicability, Blocked, FixInfo
from lint_gpu_tests.parsing.noqa import Noqa, parse_noqa
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.parsing.syntax import last_name, names_in

#: Fixture scopes whose teardown a ``with`` over the runner class in the fixture's body
#: follows exactly: the block is entered where the engine was built and exited at the
#: fixture's teardown, which pytest runs when the scope ends (a ``dynamic`` scope, a
#: callable, is not read).
SCOPES_THE_CLASS_KEEPS = frozenset({"class", "module", "package", "session"})


@dataclass(frozen=True)
class RunnerArguments:
    """What an engine call's arguments become in the runner's call
    (:meth:`Planner.runner_arguments`).

    Attributes:
        risks: why the mapping may change the engine's configuration (the fix is unsafe).
        compilation: with ``target = "vllm"``, what replaces the call's own
            ``compilation_config=`` value (``None``: keep it).
        mapping_defaults: with ``target = "vllm"`` and the model in a ``**mapping``, the
            defaults handed to the ``_runner_kwargs`` helper; ``None``: no mapping.
        use_class: the runner class builds the engine (a helper with target bundled).
        helper_calls: with ``target = "vllm"``, how a helper gets the runner fixture from
            its callers.
    """

    risks: tuple[str, ...]
    compilation: str | None
    mapping_defaults: tuple[str, ...] | None
    use_class: bool
    helper_calls: HelperCallers | None


#: The clocks whose reads time what runs between them (``time.time()``, ...): a with-block
#: does not end between a clock read and the engine's cleanup by hand
#: (:meth:`Planner._extent`), which would time the runner's teardown too.
CLOCK_CALLS = frozenset({
    "time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns",
    "time.monotonic", "time.monotonic_ns", "time.process_time", "time.process_time_ns",
    "timeit.default_timer", "datetime.datetime.now", "datetime.datetime.utcnow",
})

class Planner(CleanupRecognizer, SafetyChecks):
    """Builds and caches fix plans for one analysed module."""

    def __init__(self, module: ModuleAnalysis) -> None:
        self.module = module
        self._engine_plans: dict[int, WrapPlan | FixInfo] = {}
        self._helpers: Helpers | None = None
        self._runner_plans: dict[int, WrapPlan | FixInfo] = {}
        self._noqa: Noqa | None = None

    @property
    def helpers(self) -> Helpers:
        """The module's own functions (:func:`module_helpers`), indexed on first use: most
        modules never follow a value into a helper."""
        if self._helpers is None:
            self._helpers = module_helpers(self.module.tree)
        return self._helpers

    def user_kept(self, line: int) -> bool:
        """Whether the user suppressed GPU004 on the statement starting at ``line``
        (``# noqa: GPU004``, a bare ``# noqa``, a file-level directive): the rewrite keeps
        such a statement as an ordinary one, as ruff leaves alone what the user
        suppressed."""
        if "noqa" not in self.module.text.lower():
            return False
        if self._noqa is None:
            self._noqa = parse_noqa(self.module.text, self.module.tree)
        return self._noqa.suppresses(line, "GPU004")

    # ---------------------------------------------------------------- engines
    def engine_plan(self, site: EngineSite) -> WrapPlan | FixInfo:
        """Plan the GPU001 rewrite of one engine construction (cached).

        Returns a :class:`WrapPlan` when a fix exists (safe or unsafe), else the
        :class:`FixInfo` of a missing fix with its reason.
        """
        key = id(site.call)
        if key not in self._engine_plans:
            self._engine_plans[key] = self._plan_site(site.call, site.statement, site.function,
                                                      site.bound_name, PlanKind.ENGINE)
        return self._engine_plans[key]

    def runner_plan(self, call: RunnerCall, place: int | None = None) -> WrapPlan | FixInfo:
        """Plan the GPU005 rewrite of a runner built outside a ``with`` (cached). With
        ``place``, the "runner" is a factory helper that returns the engine in a tuple,
        unpacked into names (``llm, params = setup(...)``): the block follows the name at
        that index, and the with-statement binds the whole tuple (``as (llm, params)``)."""
        key = id(call.call)
        if key not in self._runner_plans:
            stmt = self.module.statement_of(call.call)
            bound = None
            if isinstance(stmt, ast.Assign) and stmt.value is call.call and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    bound = target.id
                elif place is not None and isinstance(target, ast.Tuple) and \
                        place < len(target.elts):
                    held = target.elts[place]
                    bound = held.id if isinstance(held, ast.Name) else None
            self._runner_plans[key] = self._plan_site(call.call, stmt, call.function, bound,
                                                      PlanKind.RUNNER)
        return self._runner_plans[key]

    def _title(self, kind: PlanKind, func: FunctionInfo | None, use_class: bool = False) -> str:
        runner = self.module.config.runner_named
        if kind is PlanKind.RUNNER:
            return "Wrap in a with-statement"
        if self.module.config.runner_is_fixture and not use_class:
            pass  # the runner class is never imported: its fixture is passed in
        elif use_class or (func is not None
                           and func.kind in (FunctionKind.HELPER, FunctionKind.METHOD)):
            runner = self.module.config.runner_classes[0] if self.module.config.runner_classes \
                else runner
        return WRAP_TITLE.format(runner=runner)

    def _plan_site(
        self,
        call: ast.Call,
        stmt: ast.stmt,
        func: FunctionInfo | None,
        bound: str | None,
        kind: PlanKind,
    ) -> WrapPlan | FixInfo:
        module = self.module
        config = module.config
        title = self._title(kind, func)
        if func is None:
            return FixInfo.none(title,
                                "built at module or class level: it lives as long as the module")
        if func.kind is FunctionKind.METHOD and func.name == "__init__":
            return FixInfo.none(title, "built in a helper class: the engine outlives `__init__`")
        unbuildable = self._class_the_runner_cannot_build(call) if kind is PlanKind.ENGINE else None
        if unbuildable is not None:
            return FixInfo.none(f"Shut `{unbuildable.rsplit('.', 1)[-1]}` down when the test ends",
                                f"the runner builds `vllm.LLM`, not `{unbuildable}`")
        # Engines kept in a container (shape 1), made by a factory fixture
        # (shape 6): fixplan.groups says where their ExitStack block starts.
        group = engine_group(module, call, stmt, func) if kind is PlanKind.ENGINE else None
        if group is None and kind is PlanKind.ENGINE:
            factory = factory_fixture(module, call, stmt, func, self.is_cleanup_statement)
            if factory is not None:
                return self._factory_plan(call, factory, title)
        if group is not None:
            stmt, bound, title = group.statement, group.container, GROUP_TITLE
        block = statement_block(module, stmt)
        if block is None:
            return FixInfo.none(title, "built inside an expression the fix cannot restructure")
        stored = stored_target(func, stmt, call) if kind is PlanKind.ENGINE and \
            group is None else None
        if stored is not None:
            return self.stored_plan(call, stmt, func, stored)
        problem = self._statement_problem(call, stmt, func, bound, kind, group)
        if problem is not None:
            return FixInfo.none(title, problem)
        is_fixture = func.kind is FunctionKind.FIXTURE

        names: set[str] = {bound} if bound else set()
        # Engines a factory helper of the module hands the function count as its own.
        all_engines = names | module.engine_names(func) | module.function_bindings(func).received
        unwrapped = self._enclosing_try(stmt, block, names, all_engines)
        if unwrapped is None:
            return FixInfo.none(title, "built inside an expression the fix cannot restructure")
        block, unwrap_parent, remove_finally = unwrapped
        guard = self._guarding_try(stmt, bound, group)
        if guard is not None:
            # The ``try`` stands for the construction in its own block: the block follows it.
            stmt, block = guard
        index = next(i for i, s in enumerate(block) if s is stmt)
        # Aliases bound later in the block (``engine = llm``) count as the same engine.
        for later in block[index + 1:]:
            if isinstance(later, ast.Assign) and isinstance(later.value, ast.Name) \
                    and later.value.id in names:
                names.update(t.id for t in later.targets if isinstance(t, ast.Name))

        # Segment: the statements from the construction up to the next top-level
        # rebinding of its name. Every value that can reach the engine (aliases, containers,
        # generators, partials, bound methods, closures, wrappers) is followed through it.
        stop = len(block)
        for j in range(index + 1, len(block)):
            if bound and any(s.id == bound for s in stores_at_top(block[j])) and \
                    self.release_idiom(block[j], {bound}) is None:
                stop = j
                break
        in_loop = isinstance(module.parent(stmt), (ast.For, ast.AsyncFor, ast.While))
        flow = value_flow(func.node, block[index:stop], names, None if bound else call,
                          loop_body=in_loop, helpers=self.helpers)
        if isinstance(flow.problem, Blocked):
            return FixInfo.none(title, flow.problem.reason)
        use_names = flow.tainted
        end, remove, unwrap = self._extent(func, stmt, block, index, stop, names, all_engines,
                                           flow, remove_finally, unwrap_parent, group)
        remove = self._removals(stmt, block, index, end, names, all_engines, use_names, remove)
        segment = block[index: end + 1]
        func_node = func.node
        outside = self._outside_use(func, stmt, block, index, stop, segment, remove, bound,
                                    names, flow)
        if outside is not None:
            return FixInfo.none(title, outside)
        applicability = Applicability.SAFE
        reasons: list[str] = []

        def unsafe(reason: str) -> None:
            nonlocal applicability
            applicability = Applicability.UNSAFE
            if reason not in reasons:
                reasons.append(reason)

        use_class = self._use_class(func, engine=kind is PlanKind.ENGINE) or \
            kind is PlanKind.RUNNER and last_name(call.func) in config.runner_classes
        # A wide-scoped fixture entering the runner class itself (ours, or the class the code
        # already builds) keeps the engine exactly as long as the fixture's scope.
        scoped_class = use_class and group is None and \
            (config.target == "bundled" or kind is PlanKind.RUNNER)
        risks = self._risks(func, block, index, end, segment, remove, names, flow, group,
                            scoped_class)
        if isinstance(risks, Blocked):
            return FixInfo.none(title, risks.reason)
        for risk in risks:
            unsafe(risk)
        compilation: str | None = None
        mapping_defaults: tuple[str, ...] | None = None
        helper_calls: HelperCallers | None = None
        if kind is PlanKind.ENGINE:
            arguments = self.runner_arguments(call, func, use_class)
            if isinstance(arguments, Blocked):
                return FixInfo.none(title, arguments.reason)
            for risk in arguments.risks:
                unsafe(risk)
            compilation, mapping_defaults = arguments.compilation, arguments.mapping_defaults
            use_class, helper_calls = arguments.use_class, arguments.helper_calls
            own = self.own_fixture_risk(use_class)
            if own is not None:
                unsafe(own)
        yield_proxy = self._yields_proxy(func, stmt, segment, remove, names, bound, group)
        if is_fixture and not yield_proxy and any(
                isinstance(n, ast.Return) for s in segment[1:] for n in walk_breadth(s)):
            return FixInfo.none(title, "the fixture returns inside the engine's range")
        drop = self._dropped_params(func, remove)
        add_param = None
        if not use_class and config.runner_fixture not in func.params:
            add_param = config.runner_fixture
        if group is not None:
            group = replace(group, runner=self._group_runner(use_class))
            add_param = None if use_class or group.runner in func.params else group.runner
        missing = self.missing_runner_fixture() if kind == "engine" else None
        if missing is not None:
            return FixInfo.none(title, missing)
        if config.runner and kind is PlanKind.ENGINE:
            checked = project_runner_problem(module, call, func)
            if isinstance(checked, Blocked):
                return FixInfo.none(title, checked.reason)
            for reason in checked:
                unsafe(reason)
        return WrapPlan(
            kind=kind,
            site_line=stmt.lineno,
            function_line=func_node.lineno,
            end_line=block[end].end_lineno or block[end].lineno,
            bound_name=bound,
            remove_lines=remove,
            unwrap_try_lines=unwrap,
            add_param=add_param,
            drop_params=drop,
            use_class=use_class,
            yield_proxy=yield_proxy,
            aliases=set(names),
            compilation_config=compilation,
            mapping_defaults=mapping_defaults,
            helper_calls=helper_calls,
            weak_calls=weak_calls(module, segment, names) if names and not yield_proxy
            else set(),
            applicability=applicability,
            reason="; ".join(reasons),
            title=title if group is not None else self._title(kind, func, use_class),
            call_line=call.lineno,
            group=group,
            guarded=guard is not None,
        )

    def _use_class(self, func: FunctionInfo, *, engine: bool = True) -> bool:
        """Whether ``func``'s engine (``engine``) or runner is built by the runner class
        rather than the runner fixture: in helpers and methods, base classes, wide-scoped
        fixtures, and for an engine where the project names its runner's module."""
        config = self.module.config
        return func.kind in (FunctionKind.HELPER, FunctionKind.METHOD) or \
            func.in_base_class or (func.kind is FunctionKind.FIXTURE and func.fixture_scope
                                   not in (None, "function") and not config.runner_is_fixture) \
            or engine and config.runner_module is not None

    def stored_plan(self, call: ast.Call, stmt: ast.stmt, func: FunctionInfo, spelled: str,
                    kind: PlanKind = PlanKind.ENGINE) -> WrapPlan | FixInfo:
        """The with-block of an engine a generator fixture stores on an attribute
        (``request.cls.llm = LLM(...)``; :mod:`lint_gpu_tests.fixplan.stored`) at
        ``spelled``: from the store, which binds the attribute to the engine's proxy, to the
        statement before the cleanup run after the ``yield``, which goes. With
        :attr:`PlanKind.RUNNER`, ``call`` is a factory helper's (the module analysed with the
        helper among the runner classes, as a unit plans its callers): it is the with-item
        as it is, and the attribute gets what its context manager yields (the proxy)."""
        module, config = self.module, self.module.config
        use_class = self._use_class(func)
        title = self._title(kind, func, use_class)
        if self.shares_line(stmt) or self.on_header_line(stmt):
            return FixInfo.none(title, "the statement shares its line with another statement")
        shape = stored_shape(module, func, stmt, spelled)
        if isinstance(shape, Blocked):
            return FixInfo.none(title, shape.reason)
        reasons = list(shape.risks)
        end = func.node.body[shape.end]
        # The factory's context manager enters the runner class, as a wide fixture's does.
        scoped = _scope_risk(func, kind is PlanKind.RUNNER or use_class
                             and config.target == "bundled")
        if scoped is not None:
            reasons.append(scoped)
        if kind is PlanKind.RUNNER:
            return WrapPlan(kind=kind, site_line=stmt.lineno, function_line=func.node.lineno,
                            end_line=end.end_lineno or end.lineno, bound_name=None,
                            remove_lines=set(shape.remove),
                            unwrap_try_lines=set(shape.unwrap),
                            drop_params=self._dropped_params(func, set(shape.remove)),
                            stored_on=spelled,
                            applicability=Applicability.UNSAFE if reasons
                            else Applicability.SAFE,
                            reason="; ".join(reasons), title=title, call_line=call.lineno)
        arguments = self.runner_arguments(call, func, use_class)
        if isinstance(arguments, Blocked):
            return FixInfo.none(title, arguments.reason)
        reasons.extend(r for r in arguments.risks if r not in reasons)
        use_class = arguments.use_class
        own = self.own_fixture_risk(use_class)
        if own is not None and own not in reasons:
            reasons.append(own)
        missing = self.missing_runner_fixture()
        if missing is not None:
            return FixInfo.none(title, missing)
        if config.runner:
            checked = project_runner_problem(module, call, func)
            if isinstance(checked, Blocked):
                return FixInfo.none(title, checked.reason)
            reasons.extend(r for r in checked if r not in reasons)
        return WrapPlan(
            kind=PlanKind.ENGINE,
            site_line=stmt.lineno,
            function_line=func.node.lineno,
            end_line=end.end_lineno or end.lineno,
            bound_name=None,
            remove_lines=set(shape.remove),
            unwrap_try_lines=set(shape.unwrap),
            add_param=None if use_class or config.runner_fixture in func.params
            else config.runner_fixture,
            drop_params=self._dropped_params(func, set(shape.remove)),
            use_class=use_class,
            stored_on=spelled,
            compilation_config=arguments.compilation,
            mapping_defaults=arguments.mapping_defaults,
            helper_calls=arguments.helper_calls,
            applicability=Applicability.UNSAFE if reasons else Applicability.SAFE,
            reason="; ".join(reasons),
            title=self._title(PlanKind.ENGINE, func, use_class),
            call_line=call.lineno,
        )

    def missing_runner_fixture(self) -> str | None:
        """Why a fix cannot request the runner fixture with ``target = "vllm"``: neither
        the module nor a conftest.py pytest loads for it defines it (pytest would find the
        bundled, function-scoped one, whose defaults are `LLM`'s); else ``None``, also for a
        module checked as text alone (nothing to look up)."""
        module = self.module
        fixture = module.config.runner_fixture
        if module.config.target != "vllm" or module.own_runner_fixture is not None or \
                not os.path.isfile(module.path):
            return None
        return (f"`target = \"vllm\"` requests vLLM's `{fixture}` fixture, and no "
                "conftest.py pytest loads for this module defines it")

    def own_fixture_risk(self, use_class: bool) -> str | None:
        """Why an engine's fix may change behaviour when it hands the engine's arguments to
        the project's own runner fixture (not the bundled class, ``use_class``: a bare
        runner's block, or one entering the class, keeps its own defaults), else ``None``."""
        config, module = self.module.config, self.module
        if use_class or config.target != "bundled" or config.runner or \
                module.own_runner_fixture is None:
            return None
        return (f"the project defines its own `{config.runner_fixture}` fixture (in "
                f"{module.own_runner_fixture}), which replaces the bundled one whose defaults "
                "are `LLM`'s, and its defaults may differ (set `target = \"vllm\"` if it is "
                "vLLM's `VllmRunner`)")

    def runner_arguments(self, call: ast.Call, func: FunctionInfo, use_class: bool, *,
                         through_callers: bool = True) -> RunnerArguments | Blocked:
        """How the engine call ``call`` in ``func`` becomes the runner's call: its arguments
        mapped onto the runner's (:meth:`_argument_problem`, the ``**mapping`` of the model
        with ``target = "vllm"``, :func:`plan_mapping`), ``compilation_config`` spelled as
        vLLM's ``VllmRunner`` needs it, and with ``target = "vllm"`` a helper (``use_class``)
        given the runner fixture by its callers (:func:`runner_through_callers`); so with a
        project runner requested as a fixture (:attr:`Config.runner_is_fixture`).
        ``through_callers=False`` keeps the runner class for a helper under every target (a
        factory unit across modules imports vLLM's ``VllmRunner`` instead).

        Returns:
            The :class:`RunnerArguments` (their ``risks`` make the fix unsafe), or the
            :class:`Blocked` reason no runner call keeps the engine's configuration.
        """
        module = self.module
        config = module.config
        risks: list[str] = []
        compilation: str | None = None
        mapping_defaults: tuple[str, ...] | None = None
        helper_calls: HelperCallers | None = None
        if config.target == "vllm" and hides_model(call):
            mapping_defaults, arg_problem = plan_mapping(
                module, func, call, VLLM_TARGET_DEFAULTS, compilation_config_equivalent)
        else:
            arg_problem = self._argument_problem(call)
        if isinstance(arg_problem, Blocked):
            return arg_problem
        if arg_problem is not None:
            risks.append(arg_problem.reason)
        if config.target == "vllm":
            given = next((k.value for k in call.keywords if k.arg == "compilation_config"),
                         None)
            if given is not None:
                compilation, cc_problem = compilation_config_equivalent(given, module)
                if isinstance(cc_problem, Blocked):
                    return cc_problem
                if cc_problem is not None:
                    risks.append(cc_problem.reason)
        # The project's runner fixture hands out one runner it builds, not a factory: a
        # call of it would call that runner.
        instance = module.own_runner_instance and not config.runner
        if instance and config.target == "vllm":
            return Blocked(
                f"the project's own `{config.runner_fixture}` fixture (in "
                f"{module.own_runner_fixture}) hands out one runner it builds, not vLLM's "
                "factory, so `target = \"vllm\"` cannot call it (name the project's runner "
                "class with `runner = \"module:Class\"`)")
        if use_class and through_callers and config.runner_is_fixture and not instance:
            passed = runner_through_callers(module, func, config.runner_fixture)
            if isinstance(passed, str):
                return Blocked(passed)
            use_class, helper_calls = False, passed
            if passed.public and not passed.passed and not module.private_to_tree:
                risks.append(f"`{passed.name}()` is public: a module that imports it must now "
                             f"pass `{config.runner_fixture}` too ({ONE_MODULE} and does not "
                             "change callers in other modules)")
        # Where the project's runner fixture cannot take this call, the bundled class,
        # which takes ``LLM``'s arguments, is entered instead.
        model = module.own_runner_model
        cannot: str | None = None
        if model is not None and not config.runner and not call.args:
            # The engine call passes its model by keyword (or in a ``**mapping``).
            cannot = (f"hands out a runner whose `__init__` takes the model as `{model}`, and "
                      "this call gives it by keyword (the runner's call would raise "
                      "`TypeError`)")
        elif instance:
            cannot = "hands out one runner it builds, not a factory a test can call"
        if cannot is not None and not use_class and config.target == "bundled":
            use_class = True
            risks.append(
                f"the project's own `{config.runner_fixture}` fixture (in "
                f"{module.own_runner_fixture}) {cannot}: the fix enters the bundled "
                "`VllmRunner` (`lint_gpu_tests.runtime`), whose teardown is not the project's "
                "runner's")
        return RunnerArguments(tuple(risks), compilation, mapping_defaults, use_class,
                               helper_calls)

    def _class_the_runner_cannot_build(self, call: ast.Call) -> str | None:
        """The qualified engine class ``call`` builds when the runner cannot build it in its
        place (``AsyncLLM``: any vLLM class but ``vllm.LLM``, and any class at all for
        ``vllm_runner``, which builds ``vllm.LLM``), else ``None``."""
        module = self.module
        func = call.func.value if module.is_engine_factory_call(call) and isinstance(
            call.func, ast.Attribute) else call.func
        qualified = module.qualified(func)
        if qualified is None:
            return None
        qualified = REEXPORTS.get(qualified, qualified)
        if qualified == "vllm.LLM":
            return None
        if qualified.startswith("vllm.") or module.config.runner_fixture == "vllm_runner":
            return qualified
        return None

    def _statement_problem(self, call: ast.Call, stmt: ast.stmt, func: FunctionInfo,
                           bound: str | None, kind: PlanKind,
                           group: GroupShape | None) -> str | None:
        """Why the statement that builds the engine (``stmt``, in ``func``) has a shape the
        fix cannot rewrite (it shares its line, the call is nested in it or not alone, a
        fixture hands out something derived from it, ...), or ``None``."""
        module = self.module
        if self.shares_line(stmt) or self.on_header_line(stmt):
            return "the statement shares its line with another statement"
        # The call must be a direct part of a simple statement, not inside a lambda or
        # comprehension, and alone of its kind in the statement.
        if group is None and not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr,
                                                   ast.Return)):
            if isinstance(stmt, (ast.If, ast.While, ast.For, ast.AsyncFor, ast.With,
                                 ast.AsyncWith, ast.Try, ast.Match, ast.FunctionDef,
                                 ast.AsyncFunctionDef, ast.ClassDef)):
                return "built inside a compound statement header"
            kind_of = {ast.Assert: "an `assert`", ast.AugAssign: "an augmented assignment",
                       ast.Raise: "a `raise`", ast.Delete: "a `del`"}
            return (f"built inside {kind_of.get(type(stmt), 'a statement')}, which no fix "
                    "turns into a with-block (bind the engine to a name first)")
        if group is None and self._inside_deferred(call, stmt):
            return "built inside a lambda or comprehension"
        if not module.is_engine_call(call) and kind is PlanKind.ENGINE:
            return "built by a factory method the runner cannot call"
        sites = [n for n in walk_breadth(stmt) if isinstance(n, ast.Call)
                 and (module.builds_engine(n) or module.is_runner_call(n))]
        if len(sites) != 1:
            return "several engines are built in one statement"
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is call and not bound:
            teardown = TEARDOWN_OF.get(func.name)
            held = next((t for t in getattr(stmt, "targets", ())
                         if isinstance(t, ast.Attribute)), None)
            if teardown is not None and func.parent is None and held is not None:
                return (f"the engine is stored on `{ast.unparse(held)}` by the xunit "
                        f"`{func.name}()` and lives until `{teardown}()`: the fix hands an "
                        "engine to the runner where a class's set-up stores it on its first "
                        "parameter (`cls.llm`, `self.llm`) or a module's set-up in a global "
                        "it declares, and the paired teardown (if any) cleans it up by hand")
            return ("the engine is stored in an attribute or container and outlives "
                    "the block")
        is_fixture = func.kind is FunctionKind.FIXTURE
        is_return_value = isinstance(stmt, ast.Return) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Yield, ast.YieldFrom))
        )
        handed = stmt.value if isinstance(stmt, ast.Return) else (
            stmt.value.value if isinstance(stmt, ast.Expr) and isinstance(
                stmt.value, (ast.Yield, ast.YieldFrom)) else None)
        if is_return_value and is_fixture and handed is not call:
            return ("the fixture hands out something derived from the engine, which "
                    "would outlive the runner's block")
        if is_fixture and isinstance(stmt, ast.Return) and sum(
                isinstance(n, ast.Return) for n in module.nodes_of(func)) > 1:
            return ("the fixture returns on other paths too: turning this return into a "
                    "yield would leave those paths without a value")
        if is_return_value and not is_fixture:
            if handed is not None and not hands_out_where(handed, lambda e: e is call):
                return (f"a value read from the engine is returned to the caller (line "
                        f"{stmt.lineno}) and may hold the engine after this function ends")
            if func.name in module.tuple_factories and func.parent is None and \
                    func.owner_class is None:
                return (f"`{func.name}()` returns the engine in a tuple with other values, so "
                        "it must outlive this function: its fix makes the helper a context "
                        "manager together with its callers")
            cached = cached_reason(func.node)
            if cached is not None:
                return cached
            factory = func.kind is FunctionKind.HELPER and any(
                s is func.node for s in module.tree.body)
            return ("the engine is returned to the caller, so it must outlive this "
                    "function" + (FACTORY_ADVICE if factory else ""))
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.YieldFrom):
            return "built in a `yield from`"
        return None

    def _guarding_try(self, stmt: ast.stmt, bound: str | None, group: GroupShape | None
                      ) -> tuple[ast.Try, list[ast.stmt]] | None:
        """The ``try`` whose whole body is ``stmt`` (``name = LLM(...)``, or a runner's
        call) and guards its build (:func:`~lint_gpu_tests.analysis.analysis.guarding_try`),
        and the block that holds it; ``None`` for any other construction. The build it
        guards stays in it (``except Exception: pytest.skip(...)`` when the engine cannot be
        built), and the block starts after it (:attr:`WrapPlan.guarded`)."""
        module = self.module
        if bound is None or group is not None or not isinstance(stmt, ast.Assign) or \
                self.shares_line(stmt):
            return None
        parent = guarding_try(module, stmt, bound)
        if parent is None:
            return None
        outer = statement_block(module, parent)
        return None if outer is None else (parent, outer)

    def _enclosing_try(self, stmt: ast.stmt, block: list[ast.stmt], names: set[str],
                       all_engines: set[str]
                       ) -> tuple[list[ast.stmt], int | None, set[int]] | None:
        """``stmt``'s block, where a ``try/finally`` around ``stmt`` only cleans up replaced
        by the ``try``'s body: ``(block, line of that try or None, lines of its finally to
        remove)``; ``None`` when that ``try`` sits where the fix cannot restructure."""
        module = self.module
        parent = module.parent(stmt)
        if isinstance(parent, ast.Try) and any(s is stmt for s in parent.body) and \
                self.finally_only_cleans(parent, all_engines) and self._unwrappable(parent) \
                and not any(names_in(s) & (all_engines - names) for s in parent.finalbody):
            outer = statement_block(module, parent)
            if outer is None:
                return None
            k = next(i for i, s in enumerate(outer) if s is parent)
            return ([*outer[:k], *parent.body, *outer[k + 1:]], parent.lineno,
                    {s.lineno for s in parent.finalbody})
        return block, None, set()

    def _extent(self, func: FunctionInfo, stmt: ast.stmt, block: list[ast.stmt], index: int,
                stop: int, names: set[str], all_engines: set[str], flow: ValueFlow,
                remove_finally: set[int], unwrap_parent: int | None,
                group: GroupShape | None = None) -> tuple[int, set[int], set[int]]:
        """Where the with-block over ``block[index]`` ends, and the cleanup it takes over:
        ``(index in block of its last statement, start lines of cleanup statements to
        remove, start lines of ``try`` statements to unwrap)``. ``stop`` is the index of the
        next top-level rebinding of the engine's name."""
        module = self.module
        use_names = flow.tainted
        # Segment: from the construction to the last statement using the engine, stopping
        # before the next top-level rebinding of its name. Generic cleanup (gc.collect(),
        # empty_cache(), ...) belongs to this engine up to the next construction.
        next_site = len(block)
        for j in range(index + 1, stop):
            if module.is_engine_call_stmt(block[j]):
                next_site = j
                break
        remove: set[int] = set(remove_finally)
        unwrap: set[int] = {unwrap_parent} if unwrap_parent is not None else set()
        end = index
        for j in range(index + 1, stop):
            later = block[j]
            loop = group_cleanup_loop(module, later, group.container, self.is_cleanup_statement
                                      ) if group is not None else []
            if loop and not any(self.shares_line(s) or self.user_kept(s.lineno) for s in loop):
                remove.update(s.lineno for s in loop)  # ``for llm in llms: llm.shutdown()``
                continue
            if not self.shares_line(later) and not self.user_kept(later.lineno) and \
                    self.is_cleanup_statement(later, all_engines if names else set()):
                mine = bool(names_in(later) & names)
                generic = not (names_in(later) & all_engines)
                if mine and self._del_uses_earlier_binding(
                        func.node, stmt, block[:index], block[index + 1:stop], names):
                    # ``x = ...; ...; x = LLM(); del x``: the cleanup is the only use of
                    # the name, and what uses its earlier binding as pyflakes sees it: it
                    # stays, inside the block, on the engine's proxy.
                    end = j
                    continue
                if mine or (generic and j < next_site):
                    remove.add(later.lineno)
                continue
            if isinstance(later, ast.Try) and names and self.finally_only_cleans(
                    later, all_engines) and self._unwrappable(later) and not any(
                    names_in(s) & (all_engines - names) for s in later.finalbody):
                # (A finally that tears down another engine is that engine's, not ours.)
                if any(loads_of(s, n) for s in later.body for n in names) or any(
                        names_in(s) & names for s in later.finalbody):
                    unwrap.add(later.lineno)
                    remove.update(s.lineno for s in later.finalbody)
                    end = j
                    continue
            if flow.touches(later, j - index) or (
                    isinstance(later, (ast.FunctionDef, ast.AsyncFunctionDef,
                                       ast.ClassDef)) and later.name in use_names):
                end = j
                for node in walk_breadth(later):
                    if isinstance(node, ast.Try):
                        for s in node.finalbody:
                            if self.is_cleanup_statement(s, names) and not \
                                    self.on_header_line(s) and not self.shares_line(s):
                                remove.add(s.lineno)
        # A clock read after the range and before the engine's own cleanup is done (its
        # last statement: ``del llm`` may free nothing until ``gc.collect()``; or with none)
        # timed what ran before it with the engine alive: the range grows over it, so the
        # runner's teardown stays out of the time measured (``took = time.time() - start``).
        limit = min(stop, next_site)
        marks = [j for j in range(index + 1, limit) if block[j].lineno in remove | unwrap]
        if unwrap_parent is not None:
            # The ``try`` around the construction, unwrapped into ``block``: its ``finally``
            # ran right after the last statement of its body.
            marks += [j + 1 for j, s in enumerate(block)
                      if isinstance(held := module.parent(s), ast.Try)
                      and held.lineno == unwrap_parent and any(b is s for b in held.body)][-1:]
        cleanup = max(marks, default=limit)
        for j in range(cleanup - 1, end, -1):
            if self._reads_clock(block[j]):
                end = j
                break
        # An engine built inside the range must be torn down first: the range grows to
        # cover its uses too (nested with-blocks).
        grown = True
        while grown:
            grown = False
            for j in range(index + 1, end + 1):
                inner = block[j]
                inner_names = {t.id for t in stores_at_top(inner)} if isinstance(
                    inner, ast.Assign) and module.builds_engine(inner.value) else set()
                if not inner_names:
                    continue
                inner_names = value_flow(func.node, block[j:], inner_names, None,
                                         helpers=self.helpers).tainted
                for k in range(len(block) - 1, end, -1):
                    if reads_or_deletes(block[k], inner_names):
                        end, grown = k, True
                        break
        return end, remove, unwrap

    def _reads_clock(self, stmt: ast.stmt) -> bool:
        """Whether ``stmt`` calls a clock (:data:`CLOCK_CALLS`) anywhere in it."""
        return any(isinstance(node, ast.Call) and self.module.qualified(node.func)
                   in CLOCK_CALLS for node in walk_breadth(stmt))

    def _removals(self, stmt: ast.stmt, block: list[ast.stmt], index: int, end: int,
                  names: set[str], all_engines: set[str], use_names: set[str],
                  remove: set[int]) -> set[int]:
        """``remove`` settled once the block ends at ``block[end]``: generic cleanup before a
        later use stays, cleanup nested in the range after the last use and after the
        enclosing loop goes."""
        module = self.module
        remove = set(remove)
        # A cleanup call before a later use of the engine (``gc.collect()`` between two
        # rounds, a shutdown before a use that must then fail) is not its teardown (GPU004
        # does not report it): it stays, on the engine's proxy. Another engine's cleanup
        # is that engine's; a finalizer registered there runs at the test's end (GPU003).
        last_use = max((j for j in range(index + 1, end + 1) if block[j].lineno not in remove
                        and any(loads_of(block[j], n) for n in names)), default=index)
        for between in block[index + 1:last_use]:
            if isinstance(between, ast.Expr) and between.lineno in remove and not names_in(
                    between) & (all_engines - names) and not (isinstance(
                    between.value, ast.Call) and self.finalizer_engine(between.value, names)):
                remove.discard(between.lineno)
        segment = block[index: end + 1]
        remove |= self._nested_cleanup(segment, names, all_engines, use_names, remove)
        remove |= {s.lineno for s in self._after_with_cleanup(stmt, names, all_engines)}
        remove |= {s.lineno for s in self._finally_cleanup(stmt, names, all_engines)}
        remove |= after_loop_cleanup(module, stmt, lambda s: self.is_cleanup_statement(
            s, set()) and not self.shares_line(s) and not self.on_header_line(s))
        return {line for line in remove if not self.user_kept(line)}

    def _after_with_cleanup(self, stmt: ast.stmt, names: set[str],
                            all_engines: set[str]) -> list[ast.stmt]:
        """The cleanup right after the ``with`` whose body builds the engine at ``stmt``
        (``with ExitStack() as stack:`` entering a ``pytest.raises`` when the configuration
        is unsupported, ``with pytest.raises(...)``), when that ``with`` builds no other
        engine: ``del llm``, the proxy-then-delete idiom guarded by ``except
        UnboundLocalError`` (the name is unbound when the construction raised), generic
        cleanup; up to the first other statement. The runner's block, inside the same
        ``with``, tears the engine down, so these go with the rewrite."""
        module = self.module
        holder = module.parent(stmt)
        if not names or not isinstance(holder, (ast.With, ast.AsyncWith)) or not any(
                s is stmt for s in holder.body) or any(
                module.is_runner_call(item.context_expr) for item in holder.items):
            return []
        if sum(1 for n in walk_breadth(holder) if isinstance(n, ast.Call)
               and (module.builds_engine(n) or module.is_runner_call(n))) != 1:
            return []
        outer = statement_block(module, holder)
        if outer is None:
            return []
        out: list[ast.stmt] = []
        for later in outer[next(i for i, s in enumerate(outer) if s is holder) + 1:]:
            if self.shares_line(later) or self.on_header_line(later) or \
                    self.user_kept(later.lineno) or \
                    not self.is_cleanup_statement(later, all_engines):
                break
            if not names_in(later) & names and names_in(later) & all_engines:
                break  # another engine's cleanup
            out.append(later)
        return out

    def _finally_cleanup(self, stmt: ast.stmt, names: set[str],
                         all_engines: set[str]) -> list[ast.stmt]:
        """The cleanup that opens the ``finally`` of a ``try`` whose body holds the engine's
        statement (directly, or in a ``with`` that is no runner) and builds no other engine,
        when statements of that ``finally`` stay after it (a ``finally`` that only cleans
        up is :meth:`_enclosing_try`'s): ``del llm``, generic cleanup, up to the first other
        statement; with a ``del`` or shutdown of the engine among them, also the ``llm =
        None`` (or ``llm: LLM | None = None``) that binds its name before the ``try`` for
        that ``finally`` (no statement between them names it). The runner's block, inside
        the ``try``, tears the engine down first, so these go with the rewrite."""
        module = self.module
        if not names:
            return []
        node: ast.stmt = stmt
        holder = module.parent(stmt)
        if isinstance(holder, (ast.With, ast.AsyncWith)) and any(
                s is stmt for s in holder.body) and not any(
                module.is_runner_call(item.context_expr) for item in holder.items):
            node = holder
        trying = module.parent(node)
        if not isinstance(trying, ast.Try) or not any(s is node for s in trying.body) or sum(
                1 for n in walk_breadth(trying) if isinstance(n, ast.Call)
                and (module.builds_engine(n) or module.is_runner_call(n))) != 1:
            return []
        out: list[ast.stmt] = []
        for later in trying.finalbody:
            if self.shares_line(later) or self.on_header_line(later) or \
                    self.user_kept(later.lineno) or \
                    not self.is_cleanup_statement(later, all_engines) or \
                    names_in(later) & (all_engines - names):
                break
            out.append(later)
        if not out or len(out) == len(trying.finalbody):
            return []
        outer = statement_block(module, trying)
        if outer is None or not any(names_in(s) & names for s in out):
            return out
        before = outer[:next(i for i, s in enumerate(outer) if s is trying)]
        for earlier in reversed(before):
            targets = earlier.targets if isinstance(earlier, ast.Assign) else \
                [earlier.target] if isinstance(earlier, ast.AnnAssign) else []
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and \
                    targets[0].id in names and \
                    isinstance(earlier.value, ast.Constant) and earlier.value.value is None:  # type: ignore[attr-defined]
                if not (self.shares_line(earlier) or self.user_kept(earlier.lineno)):
                    out.append(earlier)
                break
            if names_in(earlier) & names:
                break
        return out

    def _outside_use(self, func: FunctionInfo, stmt: ast.stmt, block: list[ast.stmt],
                     index: int, stop: int, segment: list[ast.stmt], remove: set[int],
                     bound: str | None, names: set[str], flow: ValueFlow) -> str | None:
        """Why the engine cannot be confined to ``segment`` (a use or rebinding of a name
        that holds it elsewhere in the function, a statement of the range that shares its
        line, a ``global``/``nonlocal`` name), or ``None``."""
        module = self.module
        use_names = flow.tainted
        # Every use of the engine must lie in the segment.
        func_node = func.node
        inside = {id(n) for s in segment for n in walk_breadth(s)}
        inside |= {id(n) for s in block[stop:] for n in walk_breadth(s)}
        if not inside_loop(module, stmt):
            # Earlier statements of the block see an earlier binding of the name (in a loop,
            # also this engine's, from the iteration before: then they are uses).
            inside |= {id(n) for s in block[:index] for n in walk_breadth(s)}
        inside |= {id(n) for s in block if s.lineno in remove for n in walk_breadth(s)}
        # The ``finally`` of a ``try`` the rewrite unwraps goes with it: a guarded shutdown
        # there (``if llm is not None: ...``, the name bound to ``None`` before the ``try``)
        # is no use after the block.
        parent = module.parent(stmt)
        if isinstance(parent, ast.Try) and parent.finalbody and all(
                s.lineno in remove for s in parent.finalbody):
            inside |= {id(n) for s in parent.finalbody for n in walk_breadth(s)}
        all_engines = names | module.engine_names(func)
        inside |= {id(n) for s in [*self._after_with_cleanup(stmt, names, all_engines),
                                   *self._finally_cleanup(stmt, names, all_engines)]
                   for n in walk_breadth(s)}
        if bound:  # shape 5: other branches of an ``if`` that build their own engine
            inside |= {id(n) for s in other_branch_statements(module, stmt, bound)
                       for n in walk_breadth(s)}
        top_rebindings = {id(n) for s in block for n in stores_at_top(s)}
        rebound_after = self._rebound_after(func, stmt, use_names)
        top_rebindings |= {id(n) for n, _ in rebound_after.values()}
        region_index = {id(n): k for k, s in enumerate(block[index:stop])
                        for n in walk_breadth(s)}
        for node in walk_breadth(func_node):
            if not (isinstance(node, ast.Name) and node.id in use_names) or id(node) in inside:
                continue
            if node.id in rebound_after and id(node) in rebound_after[node.id][1]:
                continue
            if isinstance(node.ctx, (ast.Load, ast.Del)):
                if not flow.live(node.id, region_index.get(id(node))):
                    continue
                return f"`{node.id}` is used outside the block that builds it"
            if isinstance(node.ctx, ast.Store) and id(node) not in top_rebindings:
                return f"`{node.id}` is rebound elsewhere in the function"
        for s in segment:
            if s.lineno != stmt.lineno and self.shares_line(s):
                return "a statement in its range shares its line with another"
            for node in walk_breadth(s):
                if isinstance(node, (ast.Global, ast.Nonlocal)) and set(node.names) & names:
                    return "the engine's name is global or nonlocal"
        return None

    def _rebound_after(self, func: FunctionInfo, stmt: ast.stmt, names: set[str]
                       ) -> dict[str, tuple[ast.Name, set[int]]]:
        """For each name of ``names`` that a plain assignment rebinds in a block enclosing
        the block of ``stmt``, after the statement of that block that holds ``stmt`` (``with
        pytest.raises(ValueError): llm = LLM(...)`` then ``llm = LLM(...)`` at the function's
        level): the name stored there, and the ids of the nodes that see only that binding
        (the statements after it in its block). The first such rebinding counts; none past
        a loop around ``stmt`` (its next iteration sees this binding before any rebinding
        after the loop)."""
        module = self.module
        found: dict[str, tuple[ast.Name, set[int]]] = {}
        current: ast.AST = stmt
        while True:
            holder = module.parent(current)
            if not isinstance(holder, ast.stmt) or holder is func.node or \
                    isinstance(holder, (ast.For, ast.AsyncFor, ast.While)):
                break
            outer = statement_block(module, holder)
            if outer is None:
                break
            position = next(i for i, s in enumerate(outer) if s is holder)
            for j in range(position + 1, len(outer)):
                later = outer[j]
                if not isinstance(later, ast.Assign) and not (
                        isinstance(later, ast.AnnAssign) and later.value is not None):
                    continue
                for target in stores_at_top(later):
                    if target.id in names and target.id not in found:
                        found[target.id] = (target, {id(n) for s in outer[j + 1:]
                                                     for n in walk_breadth(s)})
            current = holder
        return found

    def _risks(self, func: FunctionInfo, block: list[ast.stmt], index: int, end: int,
               segment: list[ast.stmt], remove: set[int], names: set[str],
               flow: ValueFlow, group: GroupShape | None,
               scoped_class: bool = False) -> list[str] | Blocked:
        """Why the wrapped block may behave otherwise than the code did (escapes, lost
        values, cleanup beyond the runner's, engines alive together, a wide-scoped fixture),
        in order; or the reason that rules the fix out. ``scoped_class``: the rewrite enters
        the runner class itself, so a class-, module-, package- or session-scoped fixture is
        no risk (:data:`SCOPES_THE_CLASS_KEEPS`)."""
        module = self.module
        use_names = flow.tainted
        is_fixture = func.kind is FunctionKind.FIXTURE
        risks: list[str] = []
        own = plain_aliases(segment, names)
        for s in segment:
            if s.lineno in remove:
                continue
            escape = self.escape(s, names, use_names, is_fixture, own)
            if isinstance(escape, Blocked):
                return escape
            if escape is not None:
                risks.append(escape.reason)
        if flow.problem is not None:
            risks.append(flow.problem.reason)
        if is_fixture and group is None and any(
                isinstance(n, (ast.Yield, ast.Return)) and n.value is not None and (
                    isinstance(n.value, ast.Name) and n.value.id in names
                    or module.builds_engine(n.value))
                for s in segment for n in walk_breadth(s)):
            consumer = self.consumer_problem(func)
            if consumer is not None:
                risks.append(consumer)
        extra = cleanup_beyond_the_runner(module, func.node, remove)
        if extra is not None:
            risks.append(extra)
        if group is not None:
            identity = identity_problem(segment, use_names)
            if identity is not None:
                risks.append(identity)
        unfollowed = flow.unfollowed_call([s for s in segment if s.lineno not in remove])
        if unfollowed is not None:
            risks.append(unfollowed.reason)
        if names:
            last_own = max((j for j in range(index, end + 1) if reads_or_deletes(block[j], names)),
                           default=index)
            if any(module.is_engine_call_stmt(block[j]) for j in range(last_own + 1, end + 1)):
                # Only a value derived from the engine keeps it past the next engine's
                # construction: the two engines are now alive together.
                risks.append("a value that may hold the engine is used after the next engine is "
                             "built, so the block covers both and they are alive together")
        scoped = _scope_risk(func, scoped_class)
        if scoped is not None:
            risks.append(scoped)
        return risks

    def _yields_proxy(self, func: FunctionInfo, stmt: ast.stmt, segment: list[ast.stmt],
                      remove: set[int], names: set[str], bound: str | None,
                      group: GroupShape | None) -> bool:
        """Whether the engine's single use in a fixture is handing it out (``yield llm``),
        so that the fix yields ``weakref.proxy(runner.llm)``."""
        module = self.module
        is_fixture = func.kind is FunctionKind.FIXTURE
        if is_fixture and bound and group is None:
            uses = [s for s in segment[1:] if s.lineno not in remove
                    and any(loads_of(s, n) for n in names)]
            # A name bound before the construction keeps its own binding used (pyflakes).
            earlier = any(isinstance(n, ast.Name) and n.id == bound and isinstance(
                n.ctx, ast.Store) and n.lineno < stmt.lineno for n in walk_breadth(func.node))
            if len(uses) == 1 and _is_plain_handout(uses[0], bound, module) and not earlier:
                return True
        return False

    @staticmethod
    def _dropped_params(func: FunctionInfo, remove: set[int]) -> set[str]:
        """``{"request"}`` when every use of ``request`` is in the removed cleanup."""
        func_node = func.node
        drop: set[str] = set()
        if "request" in func.params:
            removed_nodes = [s for s in walk_breadth(func_node) if isinstance(s, ast.stmt)
                             and s.lineno in remove]
            other = [n for n in loads_of(func_node, "request")
                     if not any(node_contains(r, n) for r in removed_nodes)]
            if not other and removed_nodes and any(
                loads_of(r, "request") for r in removed_nodes
            ):
                drop.add("request")
        return drop

    def _group_runner(self, use_class: bool) -> str:
        """What enters each engine of a group on the ``ExitStack``: the runner class
        (helpers, wide-scoped fixtures), else with target bundled the
        ``vllm_runner_factory`` fixture (its memory wait runs once, after the last runner
        exits), else the runner fixture."""
        config = self.module.config
        if use_class:
            return config.runner_classes[0] if config.runner_classes else "VllmRunner"
        return config.runner_fixture if config.runner_is_fixture else "vllm_runner_factory"

    def _factory_plan(self, call: ast.Call, parts: FactoryParts | str,
                      title: str) -> WrapPlan | FixInfo:
        """A factory fixture: the fixture's body from the factory's ``def`` to its
        ``return`` goes into a ``contextlib.ExitStack()`` (always unsafe, with
        :data:`FACTORY_REASON`)."""
        if isinstance(parts, str):
            return FixInfo.none(title, parts)
        module, config = self.module, self.module.config
        fixture, shape = parts.fixture, parts.shape
        if shape.statement.decorator_list or self.shares_line(shape.statement):  # type: ignore[attr-defined]
            return FixInfo.none(title, "the factory is decorated or shares its line")
        reasons = [FACTORY_REASON]
        problem = self._argument_problem(call)
        if isinstance(problem, Blocked):
            return FixInfo.none(title, problem.reason)
        if problem is not None:
            reasons.append(problem.reason)
        compilation: str | None = None
        given = next((k.value for k in call.keywords if k.arg == "compilation_config"), None)
        if config.target == "vllm" and given is not None:
            compilation, cc_problem = compilation_config_equivalent(given, module)
            if isinstance(cc_problem, Blocked):
                return FixInfo.none(title, cc_problem.reason)
            if cc_problem is not None:
                reasons.append(cc_problem.reason)
        wide = fixture.fixture_scope not in (None, "function")
        if wide:
            reasons.append(f"a {fixture.fixture_scope}-scoped fixture: the engines live as "
                           "long as its scope")
        use_class = wide and not config.runner_is_fixture or config.runner_module is not None
        runner = self._group_runner(use_class)
        missing = self.missing_runner_fixture()
        if missing is not None:
            return FixInfo.none(title, missing)
        if config.runner:
            checked = project_runner_problem(module, call, fixture)
            if isinstance(checked, Blocked):
                return FixInfo.none(title, checked.reason)
            reasons += checked
        removed = [s for s in walk_breadth(fixture.node) if isinstance(s, ast.stmt)
                   and s.lineno in parts.remove_lines]
        drop = {"request"} if "request" in fixture.params and removed and not [
            n for n in loads_of(fixture.node, "request")
            if not any(node_contains(r, n) for r in removed)] else set()
        return WrapPlan(
            kind=PlanKind.ENGINE,
            site_line=shape.statement.lineno,
            function_line=fixture.node.lineno,
            end_line=parts.end_line,
            bound_name=None,
            remove_lines=set(parts.remove_lines),
            add_param=None if use_class or runner in fixture.params else runner,
            drop_params=drop,
            use_class=use_class,
            applicability=Applicability.UNSAFE,
            reason="; ".join(reasons),
            title=GROUP_TITLE,
            call_line=call.lineno,
            compilation_config=compilation,
            group=replace(shape, runner=runner),
        )


def _is_plain_handout(stmt: ast.stmt, name: str, module: ModuleAnalysis) -> bool:
    """``yield name``/``return name`` as a whole statement, or the same of
    ``weakref.proxy(name)`` (the engine already wrapped: it is not wrapped twice)."""
    if isinstance(stmt, ast.Return):
        value = stmt.value
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Yield):
        value = stmt.value.value
    else:
        return False
    if isinstance(value, ast.Call) and module.qualified(value.func) == "weakref.proxy" \
            and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    return isinstance(value, ast.Name) and value.id == name



def _scope_risk(func: FunctionInfo, scoped_class: bool) -> str | None:
    """Why a fixture's engine may live otherwise after the fix: a scope wider than a test's
    that the runner's block does not follow exactly (the runner class entered by the
    fixture itself, ``scoped_class``, follows the scopes of
    :data:`SCOPES_THE_CLASS_KEEPS`); ``None`` for any other function."""
    if func.kind is FunctionKind.FIXTURE and func.fixture_scope not in (None, "function") \
            and not (scoped_class and func.fixture_scope in SCOPES_THE_CLASS_KEEPS):
        return (f"a {func.fixture_scope}-scoped fixture: the engine's lifetime follows the "
                "fixture's scope and the runner must allow it")
    return None


def planner_for(module: ModuleAnalysis) -> Planner:
    """The module's :class:`Planner` (one per analysis)."""
    return module.derived(Planner)

"""Data types that cross module boundaries: violations, fixes, edits, applicability."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar


class Applicability(enum.Enum):
    """How safe a violation's fix is, as in ruff.

    ``SAFE`` fixes keep behaviour and are applied by ``--fix``; ``UNSAFE`` fixes may
    change behaviour (README, "Fix safety") and need ``--unsafe-fixes``; ``NONE`` means no fix
    exists.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    NONE = "none"


class Trigger(enum.Enum):
    """What a file must name for a rule to look at it: the prefilter
    (:mod:`lint_gpu_tests.parsing.prefilter`) parses a file only when it names what one of the
    enabled rules starts from. A rule declares its triggers (``Rule.triggers``); a plain
    string there is an identifier of its own, looked for as a whole word.

    ``ENGINE``: an engine class, a runner class, the runner or factory fixture, or an engine
    fixture of the file's conftests (all as configured). ``ENVIRONMENT``: a change of
    ``os.environ`` (or ``os.putenv``/``os.unsetenv``) in a file that names a configured
    variable.
    """

    ENGINE = "engine"
    ENVIRONMENT = "environment"


class FixKind(enum.Enum):
    """Which transformation makes a fix: each codemod declares the kinds it applies
    (``GpuCodemod.KINDS``; ``lint_gpu_tests.codemods.driver`` runs the codemods in this
    order, one a pass), and a plan names the kind of the fix it makes
    (:attr:`FixPlan.fix_kind`). The wrap codemod applies two: runners first, then engines.

    ``WITH_ANOTHER`` is a fix made by another violation's rewrite (a finalizer removed with
    its engine's GPU001 rewrite, a fixture's ``yield llm`` that the rewrite turns into a
    proxy): no codemod takes it, and it is fixed when that rewrite runs.
    """

    WRAP_RUNNER_IN_WITH = "wrap-runner-in-with"
    WRAP_ENGINE_IN_RUNNER = "wrap-engine-in-runner"
    ISOLATE_TEST_PROCESS = "isolate-test-process"
    ENGINE_OWNER_CONTEXT_MANAGER = "engine-owner-context-manager"
    FACTORY_CONTEXT_MANAGER = "factory-context-manager"
    XUNIT_ENGINE_STACK = "xunit-engine-stack"
    PROXY_ENGINE_REFERENCE = "proxy-engine-reference"
    REMOVE_MANUAL_CLEANUP = "remove-manual-cleanup"
    USE_MONKEYPATCH_ENV = "use-monkeypatch-env"
    UNDO_MONKEYPATCH = "undo-monkeypatch"
    WITH_ANOTHER = "with-another-fix"


class FixPlan:
    """What one fix rewrites, as data: the base class of the plans the rules make
    (``WrapPlan``, ``IsolatePlan``, ``ClassPlan``, ``FactoryPlan``, ``ProxyPlan``,
    ``CleanupPlan``, ``EnvFixPlan``, ``UndoPlan`` of :mod:`lint_gpu_tests.fixplan`).

    A plan's class says which codemod applies it: each codemod of
    ``lint_gpu_tests/codemods/`` names the one plan class it applies (``GpuCodemod.PLAN``)
    and the driver runs it on the plans of exactly that class (not of a subclass:
    ``IsolatePlan`` extends ``WrapPlan`` and has a codemod of its own). ``FIX_KIND`` is
    the kind of the fixes the plan makes, which a report's pass provenance names; a plan
    class whose plans make several kinds overrides :attr:`fix_kind`.
    """

    FIX_KIND: ClassVar[FixKind]

    @property
    def fix_kind(self) -> FixKind:
        """The kind of the fix this plan makes (:class:`FixKind`)."""
        return self.FIX_KIND


@dataclass(frozen=True)
class Blocked:
    """Why a fix does not exist: the violation is reported without a fix
    (:attr:`Applicability.NONE`) and ``reason`` is shown as the missing fix's reason."""

    reason: str


@dataclass(frozen=True)
class Risky:
    """Why a fix may change behaviour: the fix is made, as :attr:`Applicability.UNSAFE`,
    and ``reason`` is shown as why."""

    reason: str


#: What the fix planners find wrong with a fix: it cannot be made, or it is unsafe.
FixProblem = Blocked | Risky


@dataclass(frozen=True)
class FixInfo:
    """A violation's fix: how safe it is, what it is called, and the plan that makes it.

    The rule that reports the violation plans its fix once, on the module's analysis;
    the plan travels with the violation to the codemod that applies it
    (:class:`FixKind` says which), so nothing is planned twice or matched back by line.

    Attributes:
        applicability: safe, unsafe or none.
        title: short fix title shown to users, e.g. "Wrap in `with vllm_runner(...)`".
        reason: why the fix is unsafe or missing ("" for a safe fix).
        kind: the transformation that applies the fix; ``None`` for a fix that does not
            exist (``applicability`` none).
        plan: the plan the codemod of its class applies (a :class:`FixPlan`), made on
            the analysis of the text the
            violation was found in; ``None`` where no codemod is involved, and in a
            violation read back from the cache or made by another process (a fix then checks
            the file again). Neither ``kind`` nor ``plan`` takes part in comparisons.
    """

    applicability: Applicability
    title: str
    reason: str = ""
    kind: FixKind | None = field(default=None, compare=False)
    plan: FixPlan | None = field(default=None, compare=False, repr=False)

    @property
    def available(self) -> bool:
        """True when some fix (safe or unsafe) exists."""
        return self.applicability is not Applicability.NONE

    @classmethod
    def none(cls, title: str, reason: str) -> FixInfo:
        """The fix a violation does not have: its would-be ``title`` and the ``reason``
        (shown by ``--show-fixes`` and in JSON)."""
        return cls(Applicability.NONE, title, reason)


@dataclass(frozen=True, order=True)
class Location:
    """A position in a file: 1-based ``row``, 1-based ``column`` (as ruff and flake8 print)."""

    row: int
    column: int


@dataclass(frozen=True)
class LeakEvidence:
    """What a run's leak report (``--gpu-leak-report-file``, read by ``check
    --leak-report``) says about the test or fixture a violation is in: an engine really
    stayed alive after that test, so the violation is *confirmed*
    (:mod:`lint_gpu_tests.running.leaks` matches them).

    Attributes:
        tests: node ids of the tests after which an engine stayed alive, in report order.
        via: how the violation's function took part: ``"test"`` (the leaking test itself,
            or its class's xunit setup/teardown) or ``"fixture NAME"`` (a fixture that
            started or still held the engine).
        held_by: what held the engines, in the report's words, without repeats.
        bytes: what those leaks left, summed (engine processes' RSS, or device memory).
    """

    tests: tuple[str, ...]
    via: str
    held_by: tuple[str, ...] = ()
    bytes: int = 0


@dataclass(frozen=True)
class Violation:
    """One reported problem.

    Attributes:
        code: rule code such as ``"GPU001"`` (``"GPU900"`` for a parse error).
        name: rule name such as ``"engine-outside-runner"``.
        message: human-readable message.
        path: the file path as given by the user (not resolved).
        location: start, 1-based row and column.
        end_location: end, 1-based row and column (exclusive column).
        fix: fix information, or ``None`` when the rule offers no fix at all.
        leak: set by ``check --leak-report`` (:func:`lint_gpu_tests.running.leaks.confirm`) when a
            run's leak report shows that the test or fixture the violation is in really
            leaked; ``None`` otherwise. Never found by a check, so never cached (it is
            applied to the run's results, cached or not), and it takes no part in
            comparisons or the hash: a confirmed violation equals its unconfirmed self.
    """

    code: str
    name: str
    message: str
    path: str
    location: Location
    end_location: Location
    fix: FixInfo | None = None
    leak: LeakEvidence | None = field(default=None, compare=False)

    @property
    def confirmed(self) -> bool:
        """True when a run's leak report confirms this violation (see ``leak``)."""
        return self.leak is not None

    @property
    def fixable(self) -> bool:
        """True when a fix of any applicability exists."""
        return self.fix is not None and self.fix.available

    def sort_key(self) -> tuple[str, int, int, str]:
        """Key that orders violations by path, position and code."""
        return (self.path, self.location.row, self.location.column, self.code)


@dataclass(frozen=True)
class Edit:
    """One text replacement of a fix, as ruff's JSON ``edits`` spell it.

    Attributes:
        content: the text that replaces the range (``""`` deletes it).
        location: start, 1-based row and 1-based character column, in the original file.
        end_location: end (exclusive), same units; ``(rows + 1, 1)`` is the end of a file
            whose last line ends with a newline.
        path: ``None`` for an edit of the violation's own file; for an edit of another file
            (a fix unit across modules, :mod:`lint_gpu_tests.fixing.tree_units`), that
            file's path as the run names it, positions in that file.
    """

    content: str
    location: Location
    end_location: Location
    path: str | None = None


@dataclass
class FileResult:
    """Outcome of checking (and maybe fixing) one file.

    Attributes:
        path: the file path as given.
        violations: violations left after any fixing, sorted.
        fixed: violations that fixes removed (for ``--show-fixes`` and statistics).
        new_source: the fixed text when a fix changed the file, else ``None``.
        error: an internal-error or I/O message for this file, else ``None``.
        error_stage: where ``error`` happened: ``"read"``, ``"check"`` or ``"fix"`` (a fix
            pass thrown away, or a fix that did not converge; the file is left as it was).
        error_has_traceback: True when ``error`` comes from an exception, whose traceback
            ``--verbose`` prints (not for an unreadable file or a fix that did not converge).
        edits: (a run with ``edits``, without ``fix`` or ``diff``: JSON and SARIF output)
            the edits of each fixable violation's fix, made by the fix loop's pass in the
            process that checked the file; a violation missing here has none.
        also_fixed: violations of rules the selection leaves out (``--select``, ``ignore``,
            ``per-file-ignores``) that the fixes of the selected ones removed with them (a
            with-block rewrite deletes the cleanup GPU004 reports, selected or not), as they
            were before the fixes; not counted in :attr:`fixed`.
    """

    path: str
    violations: list[Violation] = field(default_factory=list)
    fixed: list[Violation] = field(default_factory=list)
    new_source: bytes | None = None
    error: str | None = None
    error_stage: str = "check"
    error_has_traceback: bool = False
    edits: dict[Violation, tuple[Edit, ...]] = field(default_factory=dict)
    also_fixed: list[Violation] = field(default_factory=list)


def wanted_fixes(violations: Iterable[Violation], unsafe: bool) -> list[Violation]:
    """Return the violations whose fix may be applied (safe, or unsafe when allowed)."""
    allowed = {Applicability.SAFE} | ({Applicability.UNSAFE} if unsafe else set())
    return [v for v in violations if v.fix is not None and v.fix.applicability in allowed]


#: Prefix of the entries naming an engine helper of another module of the tree that a module
#: may import (:mod:`lint_gpu_tests.checking.helper_index`): ``engine-helper:<import
# spelling>.<name>|  <kind f or c>|<name in its module>|<line>|<share or
# attributes>|<scope>|<module>|<re-exported  by>``; parsed by
# :meth:`lint_gpu_tests.analysis.analysis.ImportedHelper.parse`.
ENGINE_HELPER = "engine-helper:"

#: The entry (:mod:`lint_gpu_tests.checking.conftest_index`) marking a test module one of
#: whose engine helpers another module of its tree imports (or that it imports whole): its
#: public helpers are fixed with their callers in the other modules, as one unit
#: (:mod:`lint_gpu_tests.fixing.tree_units`), never alone.
IMPORTED_TEST_MODULE = "imported-test-module:"

#: The entry marking a test module (or a ``conftest.py``) that no file of its tree imports,
#: or names for a dynamic import
#: (:meth:`~lint_gpu_tests.checking.helper_index.TreeHelpers.private_test_module`): its
#: public helpers have no callers but its own functions, like private ones.
PRIVATE_TEST_MODULE = "private-test-module:"


#: What the reason of a fix withheld for an engine from another module's factory helper
#: says (:func:`lint_gpu_tests.rules._common.imported_helper_reason`):
#: :mod:`lint_gpu_tests.fixing.tree_units` plans the unit of the helper and its callers
#: across the tree for the violations whose reason says it.
IMPORTED_FACTORY = "a helper of another module that builds and returns it"
#: What the reason of a fix withheld for an engine from the factory a conftest's fixture
#: hands out says, in the conftest (GPU001) and in the tests and fixtures that call it:
#: :mod:`lint_gpu_tests.fixing.tree_units` plans the unit of the fixture and its callers
#: across the tree for them.
CONFTEST_FACTORY = "with every call of it in the tree as one unit"

#: Cleanup helpers from vLLM and its plugins, matched by their last name segment
#: (vllm/distributed/parallel_state.py, tests/utils.py of vLLM): manual cleanup for GPU004,
#: and words the tree's helper index looks for in a cleanup helper's module.
CLEANUP_FUNCTIONS = frozenset(
    {
        "cleanup_dist_env_and_memory",
        "destroy_model_parallel",
        "destroy_distributed_environment",
        "wait_for_gpu_memory_to_clear",
    }
)


def withholds_for_imported_factory(violations: Iterable[Violation]) -> bool:
    """True when one of ``violations`` has its fix withheld for an engine from another
    module's factory helper (its reason says :data:`IMPORTED_FACTORY`) or from a conftest's
    factory fixture (:data:`CONFTEST_FACTORY`): the file seeds
    :func:`lint_gpu_tests.fixing.tree_units.plan_tree_units`."""
    return any(v.fix is not None and v.fix.applicability is Applicability.NONE
               and (IMPORTED_FACTORY in v.fix.reason or CONFTEST_FACTORY in v.fix.reason)
               for v in violations)

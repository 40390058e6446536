"""The fix plan as data: :class:`WrapPlan` and the constants the codemods apply with it.

A :class:`WrapPlan` says what one rewrite must do (the block the ``with`` covers, the
cleanup to delete, the parameters to add or drop, how safe it is);
:mod:`lint_gpu_tests.fixplan.planner` builds it and the codemods in
``lint_gpu_tests/codemods/`` apply it. The runner's argument conventions the rewrite
follows with ``target = "vllm"`` (:data:`RENAMED_KWARGS`, :data:`VLLM_TARGET_DEFAULTS`)
live here too, beside the fix title.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from lint_gpu_tests.analysis.helper_calls import HelperCallers
from lint_gpu_tests.fixplan.groups import GroupShape
from lint_gpu_tests.ftypes import Applicability, FixInfo, FixKind, FixPlan

WRAP_TITLE = "Wrap in `with {runner}(...)`"
#: Keyword arguments of ``vllm.LLM`` renamed by the runner (vLLM tests/conftest.py).
RENAMED_KWARGS = {"tokenizer": "tokenizer_name"}
#: Keyword arguments the bundled ``VllmRunner`` takes (or renames: ``tokenizer_name`` to
#: ``tokenizer``) that ``vllm.LLM`` does not: an ``LLM`` call given one raises ``TypeError``,
#: the runner would build the engine.
BUNDLED_RUNNER_ONLY_PARAMETERS = frozenset(
    {"model_name", "tokenizer_name", "engine_factory", "_group"})
#: Defaults of vLLM's ``tests/conftest.py`` ``VllmRunner`` that differ from ``vllm.LLM``
#: (read from vLLM's ``tests/conftest.py`` in 2026; README, "Fix safety"): added when the call
#: does not set them.
VLLM_TARGET_DEFAULTS = (
    ("trust_remote_code", "False"),
    ("max_model_len", "None"),
    ("block_size", "None"),
    ("enable_chunked_prefill", "None"),
    ("compilation_config", "CompilationConfig()"),
)


class PlanKind(str, enum.Enum):
    """What a :class:`WrapPlan` wraps: an engine (GPU001), a runner built outside a ``with``
    (GPU005), or a whole test run in a process of its own (GPU001 under ``fix-strategy =
    "isolate"``, :mod:`lint_gpu_tests.fixplan.isolate`)."""

    ENGINE = "engine"
    RUNNER = "runner"
    ISOLATE = "isolate"


@dataclass
class WrapPlan(FixPlan):
    """How to wrap one engine (or bare runner) in a ``with`` block.

    Line numbers are 1-based starts of statements as ``ast`` reports them.

    Attributes:
        kind: :attr:`PlanKind.ENGINE` (GPU001), :attr:`PlanKind.RUNNER` (GPU005) or
            :attr:`PlanKind.ISOLATE`.
        site_line: line of the statement that builds the engine/runner.
        function_line: line of the owning ``def`` (for parameters).
        end_line: start line of the last statement inside the new ``with``.
        bound_name: ``llm`` for ``llm = LLM(...)``; ``None`` when unbound.
        remove_lines: start lines of cleanup statements to delete.
        unwrap_try_lines: start lines of ``try`` statements replaced by their body.
        add_param: name of the fixture parameter to add (``vllm_runner``), or ``None``.
        drop_params: parameters to drop (``request`` once its finalizer is gone).
        use_class: build with the runner class (helpers, wide-scope fixtures) instead of
            the fixture.
        yield_proxy: the single use is ``yield``/``return`` of the engine in a fixture:
            emit ``yield weakref.proxy(runner.llm)``; of a runner (GPU005): ``yield r``, the
            runner itself, as the fixture's users expect.
        stored_on: the attribute the construction's statement stores the engine on
            (``request.cls.llm`` for ``request.cls.llm = LLM(...)`` in a fixture,
            :mod:`lint_gpu_tests.fixplan.stored`), which then gets the engine's proxy
            (``request.cls.llm = weakref.proxy(runner.llm)``); ``""``: none.
        applicability / reason: fix safety and why.
        call_line: line of the engine (runner) call that GPU001 (GPU005) reports; the
            fixes of GPU002-GPU004 that ride on this rewrite depend on that report.
        aliases: the names bound to the engine itself (they become weak proxies).
        weak_calls: ``(line, callee)`` of ``weakref.proxy(llm)``/``weakref.ref(llm)``/
            ``weakref.finalize(llm, ...)`` calls on an alias inside the block: the alias is
            a proxy after the rewrite and a proxy cannot be weakly referenced, so their
            first argument becomes ``runner.llm``.
        compilation_config: with target ``vllm``, the expression that replaces the call's
            own ``compilation_config=`` value (``None``: keep it).
        mapping_defaults: with target ``vllm`` and the model in a ``**mapping``: the
            ``k=v`` defaults handed with the mapping to the module's ``_runner_kwargs`` helper
            (:mod:`lint_gpu_tests.analysis.mappings`), which replaces the mapping in the call;
            ``None``: no mapping to map.
        helper_calls: with target ``vllm``, a helper that gets the runner fixture as its
            first parameter from every caller (:mod:`lint_gpu_tests.analysis.helper_calls`).
        group: engines kept in a container or made by a factory fixture
            (:mod:`lint_gpu_tests.fixplan.groups`): the block is a
            ``contextlib.ExitStack()`` entering one runner per engine.
        guarded: the construction is the whole body of a ``try`` whose handlers all leave
            (``except Exception as e: pytest.skip(...)``), at ``site_line``: the runner is
            built there, bound to a name, and the with-statement after the ``try`` enters
            it (``with runner:``); the runner builds its engine when called and its
            ``__enter__`` returns it (``lint_gpu_tests/runtime/runner.py``, vLLM's
            ``tests/conftest.py``), so the ``try`` guards the same build.
    """

    kind: PlanKind
    site_line: int
    function_line: int
    end_line: int
    bound_name: str | None
    remove_lines: set[int] = field(default_factory=set)
    unwrap_try_lines: set[int] = field(default_factory=set)
    add_param: str | None = None
    drop_params: set[str] = field(default_factory=set)
    use_class: bool = False
    yield_proxy: bool = False
    stored_on: str = ""
    applicability: Applicability = Applicability.SAFE
    reason: str = ""
    title: str = ""
    call_line: int = 0
    aliases: set[str] = field(default_factory=set)
    weak_calls: set[tuple[int, str]] = field(default_factory=set)
    compilation_config: str | None = None
    mapping_defaults: tuple[str, ...] | None = None
    helper_calls: HelperCallers | None = None
    group: GroupShape | None = None
    guarded: bool = False

    @property
    def anchor(self) -> tuple[str, int]:
        """``(code, row)`` of the violation whose fix this plan is (GPU001 or GPU005)."""
        return ("GPU001" if self.kind is PlanKind.ENGINE else "GPU005", self.call_line)

    @property
    def fix_kind(self) -> FixKind:
        """The kind of fix this plan makes (one pass of the wrap codemod each)."""
        if self.kind is PlanKind.ENGINE:
            return FixKind.WRAP_ENGINE_IN_RUNNER
        return FixKind.WRAP_RUNNER_IN_WITH

    def fix_info(self, title: str | None = None) -> FixInfo:
        """The fix of the violation this plan is made for (GPU001 or GPU005, at
        :attr:`anchor`), carrying this plan (``title`` overrides the plan's own)."""
        return FixInfo(self.applicability, title or self.title, self.reason, self.fix_kind,
                       self)

    def covered_fix(self, title: str) -> FixInfo:
        """The fix of a violation this plan's rewrite fixes along with its own (a GPU003
        finalizer, a GPU002 ``yield llm``): as safe as this plan, applied by no codemod of
        its own (:attr:`FixKind.WITH_ANOTHER`)."""
        return FixInfo(self.applicability, title, self.reason, FixKind.WITH_ANOTHER)


@dataclass(frozen=True)
class CleanupPlan(FixPlan):
    """GPU004: delete the cleanup statement that starts on ``line`` (1-based, ``ast``'s).

    Every GPU004 fix carries one, also where the cleanup goes with an engine's rewrite
    (that rewrite deletes it first; the codemod of
    :attr:`FixKind.REMOVE_MANUAL_CLEANUP` runs only when no rewrite before it in the
    driver's order changed the file)."""

    FIX_KIND = FixKind.REMOVE_MANUAL_CLEANUP
    line: int

"""Common base of the codemod commands: the plans to apply, the analysis they refer to,
imports.

Each command applies the plans of one :class:`~lint_gpu_tests.ftypes.FixPlan` class. Driven by
``gpu-test-lint --fix`` (:mod:`lint_gpu_tests.codemods.driver`), it receives the run's
configuration, the violations whose fixes may be applied (selection, ``# noqa`` and
``--unsafe-fixes`` already applied), each carrying the plan its rule made, and the analysis
those plans were made on: it plans nothing itself. Run on its own
(``python -m libcst.tool codemod wrap_in_runner.WrapInRunner tests/``), it
checks the module once with the default (or nearest) configuration and applies the safe
fixes of its plan class.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Protocol, TypeVar, cast

import libcst as cst

from lint_gpu_tests.analysis.analysis import LEGACY_VLLM_CLEANUP, ImportedHelper, ModuleAnalysis
from lint_gpu_tests.analysis.mappings import RUNNER_KWARGS_NAME
from lint_gpu_tests.codemods._cst import wrapping_at
from lint_gpu_tests.codemods._imports import (
    STDLIB,
    add_from_import,
    add_stdlib_import,
    add_third_party_import,
    first_party_packages,
    has_from_import,
    imports_name,
    keep_import_comments,
    merge_from_imports,
    restore_section_breaks,
    strip_top_blank,
)
from lint_gpu_tests.codemods._mapping import add_helper
from lint_gpu_tests.codemods._positions import StatementPositions
from lint_gpu_tests.codemods._printer import Printer
from lint_gpu_tests.codemods._unused_imports import (
    Removal,
    has_nested_imports,
    names_outside_imports,
    remove_unused_imports,
)
from lint_gpu_tests.config import UNRESOLVED_FLOOR, Config, oldest_python
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.ftypes import CLEANUP_FUNCTIONS, FixKind, FixPlan, Violation
from lint_gpu_tests.parsing.source import walk_breadth

#: Import lines each need adds, as (module, object) for ``AddImportsVisitor``.
IMPORTS = {
    "weakref": ("weakref", None),
    "contextlib": ("contextlib", None),
    "VllmRunner": ("lint_gpu_tests.runtime", "VllmRunner"),
    "CompilationConfig": ("vllm.config", "CompilationConfig"),
    "MonkeyPatch": ("pytest", "MonkeyPatch"),
    "pytest": ("pytest", None),
}


#: The plan class a command applies.
PlanT = TypeVar("PlanT", bound=FixPlan)


#: The standard library's top-level modules (their imports go where the rewrite leaves them
#: unused).
STDLIB_MODULES = frozenset(sys.stdlib_module_names)


class Context(Protocol):
    """What a command reads of its context: LibCST's ``CodemodContext`` under
    ``python -m libcst.tool``, a :class:`FixContext` under ``gpu-test-lint --fix``."""

    @property
    def filename(self) -> str | None:
        """The path of the module being rewritten."""


@dataclass
class FixContext:
    """The context ``gpu-test-lint --fix`` gives a command: the module's path. (LibCST's
    ``CodemodContext`` would import its codemod framework, ``libcst.matchers`` included:
    most of LibCST's import time, in every worker process that fixes a file;
    ``docs/performance.md``.)"""

    filename: str | None = None
    scratch: dict[str, object] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class GpuCodemod(ABC, Generic[PlanT]):
    """Base class: subclasses set ``PLAN`` (the plan class they apply, ``PlanT``),
    ``KINDS`` (the kinds of fix those plans make, in the order the command's passes apply
    them: the driver orders the commands by the first), ``CODES`` (the rules whose
    violations those fixes are) and implement :meth:`rewrite`.

    A LibCST codemod command as far as ``python -m libcst.tool`` is concerned (``list``,
    ``codemod``): where LibCST's codemod framework is loaded, this class is registered as a
    virtual subclass of its ``CodemodCommand`` (an abstract base class), and it has what the
    tool uses (``DESCRIPTION``, ``add_args``, ``get_inherited_dependencies``, ``context``,
    ``transform_module``). ``gpu-test-lint --fix`` does not load that framework."""

    DESCRIPTION: ClassVar[str] = "No description."
    PLAN: ClassVar[type[FixPlan]]
    KINDS: ClassVar[tuple[FixKind, ...]]
    CODES: ClassVar[frozenset[str]] = frozenset()

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        """No command-line arguments of its own (``libcst.tool codemod``)."""
        del arg_parser

    @classmethod
    def get_inherited_dependencies(cls) -> frozenset[object]:
        """No metadata providers (each command resolves positions on its own tree)."""
        return frozenset()

    def __init__(
        self,
        context: Context,
        config: Config | None = None,
        violations: Iterable[Violation] | None = None,
        analysis: ModuleAnalysis | None = None,
    ) -> None:
        """Args:
            context: LibCST's codemod context, or a :class:`FixContext` (``filename``
                names the module).
            config: the run's settings; the defaults when ``None``.
            violations: the violations whose fixes may be applied, as
                :func:`lint_gpu_tests.checking.checker.check_module` found them on the text this
                command transforms; ``None``: check the text here (a run on its own).
            analysis: the analysis ``violations`` were found on (their plans refer to it).
        """
        self.context = context
        self.config = config or Config()
        self._violations = list(violations) if violations is not None else None
        self._analysis = analysis
        self._codes: dict[int, tuple[cst.Module, str]] = {}
        self._nested: bool | None = None  # has_nested_imports of the analysis, once asked
        #: Prints trees, each top-level statement once (the driver hands its own in).
        self.printer = Printer()
        #: The kind of the fixes the last rewrite applied (set by :meth:`rewrite` where
        #: ``KINDS`` has several).
        self.applied: FixKind = self.KINDS[0]

    def code_of(self, tree: cst.Module) -> str:
        """``tree.code``, generated once per tree this command sees (code generation is a
        walk of the whole tree, as costly as parsing it)."""
        known = self._codes.get(id(tree))
        if known is not None and known[0] is tree:
            return known[1]
        code = self.printer.code(tree)
        self._codes[id(tree)] = (tree, code)
        return code

    def plans(self, tree: cst.Module) -> tuple[list[PlanT], ModuleAnalysis | None]:
        """The plans of this command's class (``PLAN`` itself, not a subclass) among the
        fixes to apply to ``tree``, in the violations' order, and the analysis they refer
        to."""
        violations, analysis = self._violations, self._analysis
        if violations is None or analysis is None:
            from lint_gpu_tests.checking.checker import check_module, wanted_fixes

            path = self.context.filename or "tests/test_codemod.py"
            checked = check_module(self.code_of(tree).encode("utf-8"), path, self.config)
            violations, analysis = wanted_fixes(checked.violations, False), checked.module
        return [cast(PlanT, v.fix.plan) for v in violations
                if v.fix is not None and type(v.fix.plan) is self.PLAN], analysis

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        plans, module = self.plans(tree)
        if not plans or module is None:
            return tree
        return self.rewrite(tree, module, plans)

    @abstractmethod
    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[PlanT]) -> cst.Module:
        """Return ``tree`` rewritten by ``plans`` (made on ``module``, the analysis of
        ``tree``'s text; each of this command's ``PLAN`` class).

        Abstract, so ``python -m libcst.tool list`` does not offer this base class as a
        codemod."""

    def apply_plans(self, tree: cst.Module, module: ModuleAnalysis,
                    candidates: Iterable[WrapPlan]) -> cst.Module:
        """Apply with-block plans (at most one per function) and schedule imports."""
        from lint_gpu_tests.codemods._wrap import WrapTransformer

        # One plan per function per pass: plans of one function would overlap.
        plans: list[WrapPlan] = []
        seen: set[int] = set()
        for plan in candidates:
            if plan.function_line not in seen:
                seen.add(plan.function_line)
                plans.append(plan)
        if not plans:
            return tree
        positions = StatementPositions(tree, module.tree, self.printer)
        transformer = WrapTransformer(plans, self.config, positions, engine_locals(module),
                                      module.text)
        new_tree = tree.visit(transformer)
        if not transformer.changed:
            return tree
        if RUNNER_KWARGS_NAME in transformer.needs:
            transformer.needs.discard(RUNNER_KWARGS_NAME)
            new_tree = add_helper(new_tree)
        self.add_imports(transformer.needs)
        self.remove_unused(module, new_tree)
        return new_tree

    # ------------------------------------------------------------------ imports
    def add_imports(self, needs: Iterable[str]) -> None:
        """Schedule the imports named in ``needs`` (keys of :data:`IMPORTS`); plain ones are
        placed by :func:`lint_gpu_tests.codemods._imports.add_stdlib_import` (or
        :func:`~lint_gpu_tests.codemods._imports.add_third_party_import`) after the
        rewrite."""
        for need in sorted(needs):
            module, obj = IMPORTS[need]
            if need == "VllmRunner" and self.config.runner_module is not None:
                module, obj = self.config.runner_module  # the project's own runner
            if obj is None:
                self._stdlib_imports.add(module)
            else:
                self._from_imports.add((module, obj))

    def add_project_import(self, module: str, obj: str) -> None:
        """Schedule ``from module import obj`` where ``module`` is the project's own tests
        package (``tests.utils``, ``tests.conftest``: ``target = "vllm"``), placed in the
        first-party section after the rewrite: ruff and isort count a ``tests/`` folder of the
        project root as first-party."""
        self._project_imports.add((module, obj))

    def forget_imports(self) -> None:
        """Drop the imports scheduled (to add, or to remove as unused) by a rewrite whose
        result is not kept."""
        self._stdlib_imports: set[str] = set()
        self._from_imports: set[tuple[str, str]] = set()
        self._project_imports: set[tuple[str, str]] = set()
        self._removals: list[Removal] = []

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """Rewrite, remove the imports the rewrite left unused, then place new imports in
        the module's own style and keep import sections apart.

        LibCST's ``Codemod.transform_module`` is not used: it copies the tree and resolves
        metadata no command here asks for (each resolves positions on its own tree), and its
        import visitors analyse the scopes of the whole module; that machinery was most of a
        fix pass (``docs/performance.md``, "Where a fix's time goes")."""
        self.forget_imports()
        floor = self.python_floor()
        with wrapping_at(self.config.line_length, floor is None or floor >= (3, 9)):
            new = self.transform_module_impl(tree)
            if new is tree or self.code_of(new) == self.code_of(tree):
                return new
            new = remove_unused_imports(new, self._removals, self.context.filename,
                                        self.code_of(new), nested=self.nested_imports(),
                                        printer=self.printer)
        new = keep_import_comments(tree, new)
        first_party = first_party_packages(self.context.filename or ".", self.config.root)
        if self.config.runner_module is not None:  # a module of the project
            first_party |= {self.config.runner_module[0].split(".")[0]}
        for name in sorted(self._stdlib_imports):
            new = add_stdlib_import(new, name) if name in STDLIB else \
                add_third_party_import(new, name, first_party)
        merge: list[tuple[str, str]] = []
        for mod, obj in sorted(self._from_imports):
            if has_from_import(new, mod):
                merge.append((mod, obj))
            else:
                new = add_from_import(new, mod, obj, first_party)
        if merge:
            new = merge_from_imports(new, merge, self.context.filename)
        new = strip_top_blank(tree, restore_section_breaks(tree, new))
        for mod, obj in sorted(self._project_imports):
            # Once: an earlier pass (or the module itself) may import it already.
            if not imports_name(new, obj):
                new = add_from_import(new, mod, obj, first_party | {"tests"})
        return new

    def python_floor(self) -> tuple[int, int] | None:
        """The oldest Python the module's project declares: the config's, as the run
        resolved it for the module's directory; looked up here (:func:`oldest_python`) when
        nothing resolved it (a library caller's own config, a run on its own)."""
        floor = self.config.python_floor
        if floor == UNRESOLVED_FLOOR:
            floor = oldest_python(os.path.dirname(os.path.abspath(self.context.filename or ".")))
        return floor

    def nested_imports(self) -> bool:
        """True unless the analysis of the module this command rewrites shows every import
        at the top level (:func:`has_nested_imports`; ``True`` without an analysis)."""
        if self._analysis is None:
            return True
        if self._nested is None:
            self._nested = has_nested_imports(self._analysis.tree)
        return self._nested

    def still_read(self, module: ModuleAnalysis, new_tree: cst.Module,
                   names: set[str]) -> frozenset[str]:
        """The names of ``module``'s imports that ``new_tree`` still reads as those imports
        (:func:`names_read`), as far as ``names`` (the imports a rewrite may have left
        unused) are concerned: a name no statement but a line of imports holds as a word is
        read nowhere, so the module is parsed again only when one of ``names`` is such a
        word (:func:`~lint_gpu_tests.codemods._unused_imports.names_outside_imports`)."""
        if not names or not names_outside_imports(new_tree, names, self.printer):
            return frozenset()
        return names_read(self.code_of(new_tree), module.imports)

    def remove_import(self, module: str, obj: str | None = None,
                      asname: str | None = None) -> None:
        """Schedule ``import module [as asname]`` (``obj`` ``None``) or ``from module import
        obj [as asname]`` for removal where the rewritten module no longer uses it
        (:func:`~lint_gpu_tests.codemods._unused_imports.remove_unused_imports`)."""
        self._removals.append((module, obj, asname))

    def remove_unused(self, module: ModuleAnalysis, new_tree: cst.Module) -> None:
        """Schedule removal of imports the rewrite (``new_tree``) may have left unused: the
        engine class, ``gc``, ``torch``, ``atexit``, ``weakref`` (the proxy-then-delete
        idiom's), the cleanup helpers, and any module of the standard library (``traceback``
        of a removed teardown: importing one has no effect a test relies on, unlike a
        plugin's import, which may register a device). Only names the
        module used before are considered, so an import that was already unused is left
        alone; a name ``new_tree`` still reads is not scheduled (:func:`names_read`), so
        LibCST's import remover, which analyses the scopes of the whole module, runs only
        where it may have something to remove."""
        candidates = {"gc", "torch", "atexit", "vllm", "weakref", *CLEANUP_FUNCTIONS,
                      *(c.rsplit(".", 1)[-1] for c in self.config.cleanup_functions)}
        if self.config.target == "vllm":
            candidates.add(LEGACY_VLLM_CLEANUP)
        helpers = module.imported_helpers
        considered = {local for local, qualified in module.imports.items()
                      if local in candidates or module.is_engine_class(qualified)
                      or qualified.partition(".")[0] in STDLIB_MODULES
                      or _cleanup_helper(helpers.get(qualified))}
        if not considered:
            return
        used_before = {n.id for n in walk_breadth(module.tree) if isinstance(n, ast.Name)}
        considered &= used_before
        still_read = self.still_read(module, new_tree, considered)
        for local, qualified in module.imports.items():
            if local not in considered:
                continue
            if local in still_read:
                continue
            if qualified == local:
                self.remove_import(local)
            elif "." in qualified:
                mod, obj = qualified.rsplit(".", 1)
                asname = local if local != obj else None
                if module.imports.get(local) == qualified and _is_from_import(module, local):
                    self.remove_import(mod, obj, asname)
                else:
                    self.remove_import(qualified, asname=local)


def _cleanup_helper(helper: ImportedHelper | None) -> bool:
    """True for a cleanup or shutdown helper of another module (summary kind ``"x"``): a
    rewrite removes its calls, and may leave its import unused."""
    return helper is not None and helper.kind == "x"


def names_read(text: str, imports: Mapping[str, str]) -> frozenset[str]:
    """The names of ``imports`` (local name -> qualified name, the module's imports) that
    the code ``text`` reads as those imports: a load that no scope around it rebinds
    (:class:`~lint_gpu_tests.analysis.scopes.ScopeIndex`, as LibCST's scope analysis decides it). An
    import read so is still used, and LibCST's ``RemoveImportsVisitor`` would keep it. Empty
    when the code does not parse as ``ast`` reads it (then every candidate is left to that
    visitor)."""
    from lint_gpu_tests.analysis.scopes import ScopeIndex

    try:
        parsed = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    scopes = ScopeIndex(parsed, imports, text)
    return frozenset(node.id for node in walk_breadth(parsed)
                     if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                     and node.id in imports and not scopes.lookup(node)[0])


def _is_from_import(module: ModuleAnalysis, local: str) -> bool:
    for node in ast.walk(module.tree):  # a generator: imports come first, it stops there
        if isinstance(node, ast.ImportFrom):
            if any((a.asname or a.name) == local for a in node.names):
                return True
    return False


def engine_locals(module: ModuleAnalysis) -> set[str]:
    """Local names (and attribute names) that refer to configured engine classes."""
    names = {local for local, q in module.imports.items() if module.is_engine_class(q)}
    return names | {q.rsplit(".", 1)[-1] for q in module.config.engine_classes}


def _register_with_libcst() -> None:
    """Make :class:`GpuCodemod` a virtual subclass of LibCST's ``CodemodCommand`` when its
    codemod framework is loaded (``python -m libcst.tool`` loads it before importing the
    modules it lists), so the tool lists and runs the commands here."""
    framework = sys.modules.get("libcst.codemod")
    if framework is not None:
        framework.CodemodCommand.register(GpuCodemod)


_register_with_libcst()

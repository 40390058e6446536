"""Common base of the codemod commands: the plans to apply, the analysis they refer to,
imports.

Each command applies one :class:`~lint_gpu_tests.ftypes.FixKind` of fix. Driven by
``gpu-test-lint --fix`` (:mod:`lint_gpu_tests.codemods.driver`), it receives the run's
configuration, the violations whose fixes may be applied (selection, ``# noqa`` and
``--unsafe-fixes`` already applied), each carrying the plan its rule made, and the analysis
those plans were made on: it plans nothing itself. Run on its own
(``python -m libcst.tool codemod wrap_engine_in_runner.WrapEngineInRunner tests/``), it
checks the module once with the default (or nearest) configuration and applies the safe
fixes of its kind.
"""

from __future__ import annotations

import ast
import os
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from lint_gpu_tests.analysis import CLEANUP_FUNCTIONS, LEGACY_VLLM_CLEANUP, ModuleAnalysis
from lint_gpu_tests.codemods._cst import wrapping_at
from lint_gpu_tests.codemods._imports import (
    add_from_import,
    add_stdlib_import,
    first_party_packages,
    has_from_import,
    keep_import_comments,
    restore_section_breaks,
    strip_top_blank,
)
from lint_gpu_tests.codemods._mapping import add_helper
from lint_gpu_tests.config import Config, oldest_python
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.ftypes import FixKind, Violation
from lint_gpu_tests.mappings import RUNNER_KWARGS_NAME

#: Import lines each need adds, as (module, object) for ``AddImportsVisitor``.
IMPORTS = {
    "weakref": ("weakref", None),
    "contextlib": ("contextlib", None),
    "VllmRunner": ("lint_gpu_tests.runtime", "VllmRunner"),
    "CompilationConfig": ("vllm.config", "CompilationConfig"),
}


class GpuCodemod(VisitorBasedCodemodCommand):
    """Base class: subclasses set ``KIND`` (the fixes they apply), ``CODES`` (the rules
    whose violations those fixes are) and implement :meth:`rewrite`."""

    KIND: ClassVar[FixKind]
    CODES: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self,
        context: CodemodContext,
        config: Config | None = None,
        violations: Iterable[Violation] | None = None,
        analysis: ModuleAnalysis | None = None,
    ) -> None:
        """Args:
            context: LibCST's codemod context (``filename`` names the module).
            config: the run's settings; the defaults when ``None``.
            violations: the violations whose fixes may be applied, as
                :func:`lint_gpu_tests.engine.check_module` found them on the text this
                command transforms; ``None``: check the text here (a run on its own).
            analysis: the analysis ``violations`` were found on (their plans refer to it).
        """
        super().__init__(context)
        self.config = config or Config()
        self._violations = list(violations) if violations is not None else None
        self._analysis = analysis

    def plans(self, text: str) -> tuple[list[Any], ModuleAnalysis | None]:
        """The plans of this command's kind among the fixes to apply to ``text``, in the
        violations' order, and the analysis they refer to."""
        violations, analysis = self._violations, self._analysis
        if violations is None or analysis is None:
            from lint_gpu_tests.engine import check_module, wanted_fixes

            path = self.context.filename or "tests/test_codemod.py"
            checked = check_module(text.encode("utf-8"), path, self.config)
            violations, analysis = wanted_fixes(checked.violations, False), checked.module
        return [v.fix.plan for v in violations if v.fix is not None
                and v.fix.kind is self.KIND and v.fix.plan is not None], analysis

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        plans, module = self.plans(tree.code)
        if not plans or module is None:
            return tree
        return self.rewrite(tree, module, plans)

    @abstractmethod
    def rewrite(self, tree: cst.Module, module: ModuleAnalysis,
                plans: Sequence[Any]) -> cst.Module:
        """Return ``tree`` rewritten by ``plans`` (made on ``module``, the analysis of
        ``tree``'s text; each of this command's :attr:`KIND`).

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
        wrapper = MetadataWrapper(tree, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        transformer = WrapTransformer(plans, self.config, positions,  # type: ignore[arg-type]
                                      engine_locals(module))
        new_tree = wrapper.module.visit(transformer)
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
        """Schedule the imports named in ``needs`` (keys of :data:`IMPORTS`); stdlib ones
        are placed by :func:`lint_gpu_tests.codemods._imports.add_stdlib_import` after the
        rewrite."""
        for need in sorted(needs):
            module, obj = IMPORTS[need]
            if obj is None:
                self._stdlib_imports.add(module)
            else:
                self._from_imports.add((module, obj))

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """Rewrite, run LibCST's import visitors, then place stdlib imports and keep
        import sections apart."""
        self._stdlib_imports: set[str] = set()
        self._from_imports: set[tuple[str, str]] = set()
        floor = oldest_python(os.path.dirname(os.path.abspath(self.context.filename or ".")))
        with wrapping_at(self.config.line_length, floor is None or floor >= (3, 9)):
            new = super().transform_module(tree)
        if new is tree or new.code == tree.code:
            return new
        new = keep_import_comments(tree, new)
        first_party = first_party_packages(self.context.filename or ".", self.config.root)
        for name in sorted(self._stdlib_imports):
            new = add_stdlib_import(new, name)
        merge = False
        for mod, obj in sorted(self._from_imports):
            if has_from_import(new, mod):
                AddImportsVisitor.add_needed_import(self.context, mod, obj)
                merge = True
            else:
                new = add_from_import(new, mod, obj, first_party)
        if merge:
            new = AddImportsVisitor(self.context).transform_module(new)
        return strip_top_blank(tree, restore_section_breaks(tree, new))

    def remove_unused(self, module: ModuleAnalysis, new_tree: cst.Module) -> None:
        """Schedule removal of imports the rewrite (``new_tree``) may have left unused: the
        engine class, ``gc``, ``torch``, ``atexit`` and the cleanup helpers. Only names the
        module used before are considered, so an import that was already unused is left
        alone; a name ``new_tree`` still reads is not scheduled (:func:`names_read`), so
        LibCST's import remover, which analyses the scopes of the whole module, runs only
        where it may have something to remove."""
        used_before = {n.id for n in ast.walk(module.tree) if isinstance(n, ast.Name)}
        still_read = names_read(new_tree, module.imports)
        candidates = {"gc", "torch", "atexit", "vllm", *CLEANUP_FUNCTIONS,
                      *(c.rsplit(".", 1)[-1] for c in self.config.cleanup_functions)}
        if self.config.target == "vllm":
            candidates.add(LEGACY_VLLM_CLEANUP)
        for local, qualified in module.imports.items():
            if local not in used_before:
                continue
            if not (local in candidates or module.is_engine_class(qualified)):
                continue
            if local in still_read:
                continue
            if qualified == local:
                RemoveImportsVisitor.remove_unused_import(self.context, local)
            elif "." in qualified:
                mod, obj = qualified.rsplit(".", 1)
                asname = local if local != obj else None
                if module.imports.get(local) == qualified and _is_from_import(module, local):
                    RemoveImportsVisitor.remove_unused_import(self.context, mod, obj, asname)
                else:
                    RemoveImportsVisitor.remove_unused_import(self.context, qualified,
                                                              asname=local)


def names_read(tree: cst.Module, imports: Mapping[str, str]) -> frozenset[str]:
    """The names of ``imports`` (local name -> qualified name, the module's imports) that
    ``tree``'s code reads as those imports: a load that no scope around it rebinds
    (:class:`~lint_gpu_tests.scopes.ScopeIndex`, as LibCST's scope analysis decides it). An
    import read so is still used, and LibCST's ``RemoveImportsVisitor`` would keep it. Empty
    when the code does not parse as ``ast`` reads it (then every candidate is left to that
    visitor)."""
    from lint_gpu_tests.scopes import ScopeIndex

    text = tree.code
    try:
        parsed = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    scopes = ScopeIndex(parsed, imports, text)
    return frozenset(node.id for node in ast.walk(parsed)
                     if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                     and node.id in imports and not scopes.lookup(node)[0])


def _is_from_import(module: ModuleAnalysis, local: str) -> bool:
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            if any((a.asname or a.name) == local for a in node.names):
                return True
    return False


def engine_locals(module: ModuleAnalysis) -> set[str]:
    """Local names (and attribute names) that refer to configured engine classes."""
    names = {local for local, q in module.imports.items() if module.is_engine_class(q)}
    return names | {q.rsplit(".", 1)[-1] for q in module.config.engine_classes}

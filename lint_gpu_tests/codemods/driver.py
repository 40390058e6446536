"""Applies one codemod per pass to a file's bytes (``lint_gpu_tests.fixing.fixloop.fix_source``
loops).

Order (:class:`~lint_gpu_tests.ftypes.FixKind`'s, found from the modules here): runners into
with-statements (GPU005), then engines into runners (GPU001 with its GPU003/GPU004; one
codemod, a pass each), tests into
new processes (GPU001 under ``fix-strategy = "isolate"``), helper classes owning an engine
into context managers (GPU001), weak proxies (GPU002/GPU006), leftover cleanup (GPU004),
environment variables through monkeypatch, then a fixture's ``MonkeyPatch()`` undone at its
end (GPU008). Each command applies the plans of its
:class:`~lint_gpu_tests.ftypes.FixPlan` class (``GpuCodemod.PLAN``) that the rules made: a
command runs when a violation to fix carries a plan of that class. Only one command runs
per pass so fixes never overlap; ``fix_source`` re-checks and calls again.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import NamedTuple

import libcst as cst

from lint_gpu_tests import codemods
from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.checking.checker import InternalError
from lint_gpu_tests.codemods._base import FixContext, GpuCodemod
from lint_gpu_tests.codemods._printer import Printer
from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import FixKind, FixPlan, Violation

#: A codemod of any plan class.
Codemod = GpuCodemod[FixPlan]


def _codemods() -> tuple[type[Codemod], ...]:
    """Every codemod of ``lint_gpu_tests/codemods/`` (defined in its public modules, one a
    :class:`FixPlan` class), in the order of the first :class:`FixKind` each applies."""
    found: dict[type[FixPlan], type[Codemod]] = {}
    for info in pkgutil.iter_modules(codemods.__path__):
        if info.name.startswith("_") or info.name == "driver":
            continue
        module = importlib.import_module(f"{codemods.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, GpuCodemod) and \
                    value.__module__ == module.__name__ and "PLAN" in vars(value):
                if value.PLAN in found:
                    raise ImportError(f"two codemods apply {value.PLAN.__name__}: "
                                      f"{found[value.PLAN].__name__}, {value.__name__}")
                found[value.PLAN] = value
    kinds = list(FixKind)
    return tuple(sorted(found.values(), key=lambda command: kinds.index(command.KINDS[0])))


#: The codemods in the order a pass tries them (:class:`FixKind`'s order): runners into
#: with-statements before engines into runners, whose rewrite removes the cleanup the last
#: ones would.
ORDER: tuple[type[Codemod], ...] = _codemods()


class AppliedFix(NamedTuple):
    """What one pass did: the kind of fixes it applied and the file's new bytes."""

    kind: FixKind
    source: bytes


class RoundTripError(Exception):
    """LibCST cannot reproduce the file byte for byte, so it is not rewritten."""


def apply_fixes(source: bytes, path: str, config: Config, violations: list[Violation],
                analysis: ModuleAnalysis) -> AppliedFix | None:
    """Run the first codemod, in :data:`ORDER`, that changes the file, on the plans of its
    class that ``violations`` carry, and return the new bytes.

    Args:
        source: the file's bytes (encoding, BOM and line endings are kept by LibCST).
        path: used for the codemod context.
        config: the run's settings.
        violations: the violations whose fixes may be applied, as
            :func:`lint_gpu_tests.checking.checker.check_module` found them in ``source``.
        analysis: the analysis they were found on (their plans refer to it).

    Returns:
        The kind of fixes applied and the new bytes, or ``None`` when no codemod changed
        anything.

    Raises:
        RoundTripError: when ``parse_module(source).bytes != source``.
        libcst.ParserSyntaxError: when LibCST cannot parse the file.
        InternalError: when a codemod raises; the message names it and its codes.
    """
    module = cst.parse_module(source)
    printer = Printer()  # the statements a rewrite leaves are not printed again
    round_tripped = False

    def round_trip() -> None:
        # After the first rewrite, which printed the statements it reached: only the rest
        # are printed here, once. A file LibCST does not give back is reported as such,
        # first.
        nonlocal round_tripped
        if not round_tripped:
            if printer.code(module).encode(module.encoding) != source:
                raise RoundTripError("LibCST cannot round-trip this file byte for byte")
            round_tripped = True

    planned = {type(v.fix.plan) for v in violations if v.fix is not None}
    for command in ORDER:
        if command.PLAN not in planned:
            continue
        context = FixContext(filename=path)
        try:
            codemod = command(context, config, violations, analysis)
            codemod.printer = printer
            new = codemod.transform_module(module)
            new_bytes = codemod.code_of(new).encode(new.encoding)
        except RecursionError as exc:
            round_trip()
            raise InternalError(f"{'/'.join(sorted(command.CODES))} ({command.__name__}): "
                                "source nests too deeply to rewrite") from exc
        except Exception as exc:
            round_trip()
            raise InternalError(f"{'/'.join(sorted(command.CODES))} ({command.__name__}): "
                                f"{type(exc).__name__}: {exc}") from exc
        round_trip()
        if new_bytes != source:
            return AppliedFix(codemod.applied, new_bytes)
    round_trip()
    return None

"""The edits of fix units across modules (:mod:`lint_gpu_tests.fixing.tree_units`), for a
run that shows each fix as edits (JSON and SARIF output) without writing anything.

``check --fix`` first fixes every file on its own (the fix loop), then rewrites each unit's
files from the bytes that left, in rounds. A run that shows edits does the same without
writing: :class:`UnitEdits` keeps each file of a unit as its versions (the bytes read, the
per-file loop's passes, then one rewrite per unit), so the edits of all of them, from the
bytes read to the last version, are one line-level diff (:func:`~lint_gpu_tests.fixing.edits.
pass_edits`) that applied gives exactly what ``--fix`` writes. Each edit goes to the stage
whose rows it meets: to the unit that changed them (a unit's edits first), else to one of
the violations the file's own fixes removed (:func:`~lint_gpu_tests.fixing.edits.assign_edits`).

A unit's fix is one fix over several files: each violation it removes carries all of it,
its own file's edits as they are and the other files' with :attr:`Edit.path` set (as ruff
puts one fix on every diagnostic it resolves together, to be applied once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from lint_gpu_tests.fixing.edits import assign_edits, edit_rows, meet, pass_edits
from lint_gpu_tests.fixing.fixloop import match_key
from lint_gpu_tests.ftypes import Edit, FixKind, Violation

__all__ = ["Staged", "UnitEdits", "carry_fixes"]


@dataclass
class Staged:
    """One file's versions in a run that shows edits.

    Attributes:
        path: the file as the run names it.
        original: its bytes as read.
        passes: the per-file fix loop's kept passes, ``(kind, before, after)``, from
            ``original`` on (empty when the file's own fixes change nothing).
        owners: the violations (of ``original``) that those passes fixed.
        units: each unit's rewrite of the file, ``(unit number, before, after)``, in order.
    """

    path: str
    original: bytes
    passes: list[tuple[FixKind, bytes, bytes]] = field(default_factory=list)
    owners: list[Violation] = field(default_factory=list)
    units: list[tuple[int, bytes, bytes]] = field(default_factory=list)

    @property
    def current(self) -> bytes:
        """The bytes the last stage left (what ``--fix`` has written by now)."""
        if self.units:
            return self.units[-1][2]
        return self.passes[-1][2] if self.passes else self.original

    def split(self) -> tuple[dict[Violation, tuple[Edit, ...]], dict[int, list[Edit]]]:
        """The edits from :attr:`original` to :attr:`current`: those of the file's own
        fixes by violation, and those of each unit by its number.

        Raises:
            SyntaxError: when a version cannot be decoded.
        """
        stages: list[tuple[FixKind | int, bytes, bytes]] = [*self.passes, *self.units]
        if not stages:
            return {}, {}
        edits, made_by = pass_edits(stages)
        own: list[Edit] = []
        units: dict[int, list[Edit]] = {}
        for edit in edits:
            unit = next((label for label, rows in made_by
                         if isinstance(label, int) and meet(rows, edit_rows(edit))), None)
            if unit is None and not self.owners:  # pragma: no cover - each row has a stage
                unit = self.units[0][0]
            if unit is None:
                own.append(edit)
            else:
                units.setdefault(unit, []).append(edit)
        kinds = [(label, rows) for label, rows in made_by if isinstance(label, FixKind)]
        return (assign_edits(self.owners, own, kinds) if self.owners else {}), units


@dataclass
class UnitEdits:
    """The files and units of a run that shows edits: each unit's rewrite recorded
    (:meth:`add`), each violation it removes (:meth:`cover`), then every file's edits
    (:meth:`edits`).

    Attributes:
        files: every file read for a unit, by absolute path.
        units: each recorded unit's files (absolute paths, the helper's module first).
        covered: each recorded unit's violations it removes, ``(absolute path, violation)``.
    """

    files: dict[str, Staged] = field(default_factory=dict)
    units: list[list[str]] = field(default_factory=list)
    covered: list[list[tuple[str, Violation]]] = field(default_factory=list)

    def add(self, news: dict[str, bytes]) -> int:
        """Record a unit's rewrite: ``news`` the new bytes of each of its files, by absolute
        path (each already in :attr:`files`). Returns the unit's number."""
        number = len(self.units)
        for absolute, new in news.items():
            staged = self.files[absolute]
            staged.units.append((number, staged.current, new))
        self.units.append(list(news))
        self.covered.append([])
        return number

    def cover(self, number: int, absolute: str, violation: Violation) -> None:
        """Say that unit ``number`` removes ``violation`` of the file at ``absolute``."""
        self.covered[number].append((absolute, violation))

    def edits(self) -> dict[str, dict[Violation, tuple[Edit, ...]]]:
        """The edits of every file a unit rewrote, by absolute path: its own fixes' and those
        of each unit's fix on every violation the unit removes (the other files' edits with
        their :attr:`Edit.path`). A file whose versions cannot be decoded has none.
        """
        own: dict[str, dict[Violation, tuple[Edit, ...]]] = {}
        by_unit: dict[int, dict[str, list[Edit]]] = {}
        for absolute, staged in self.files.items():
            if not staged.units:
                continue
            try:
                own[absolute], units = staged.split()
            except SyntaxError:
                own[absolute], units = {}, {}
            for number, edits in units.items():
                by_unit.setdefault(number, {})[absolute] = edits
        for number, covered in enumerate(self.covered):
            files = by_unit.get(number, {})
            for absolute, violation in covered:
                others = [replace(e, path=self.files[other].path)
                          for other in self.units[number] if other != absolute
                          for e in files.get(other, ())]
                own.setdefault(absolute, {})[violation] = (*files.get(absolute, ()), *others)
        return own


def carry_fixes(violations: Sequence[Violation], before: Sequence[Violation],
                after: Sequence[Violation]) -> list[tuple[Violation, Violation | None]]:
    """``violations`` (of a file as read) each with the violation of ``after`` whose fix it
    takes, where a relabelling changed one: ``before`` and ``after`` are the violations of a
    later version of the file (the per-file fixes applied), before and after the relabelling,
    pair by pair; a changed one is matched to the first violation of ``violations`` not yet
    matched with the same code and message (line numbers aside,
    :func:`~lint_gpu_tests.fixing.fixloop.match_key`). ``None``: no fix carried."""
    out: list[tuple[Violation, Violation | None]] = [(v, None) for v in violations]
    used: set[int] = set()
    for old, new in zip(before, after, strict=True):
        if new is old:
            continue
        key = match_key(old)
        candidates = [i for i, (v, _) in enumerate(out) if i not in used and match_key(v) == key]
        # One whose fix (or missing fix) reads as ``old``'s first: a violation of the same
        # message that a per-file fix removed had a fix of its own, and is not ``old``.
        same = [i for i in candidates if _same_fix(out[i][0], old)]
        for index in same[:1] or candidates[:1]:
            used.add(index)
            out[index] = (out[index][0], new)
    return out


def _same_fix(one: Violation, other: Violation) -> bool:
    """True when the two violations' fixes have the same applicability and reason."""
    if one.fix is None or other.fix is None:
        return one.fix is other.fix
    return (one.fix.applicability, one.fix.reason) == (other.fix.applicability,
                                                       other.fix.reason)

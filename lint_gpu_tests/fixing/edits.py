"""A fix as text: the edits that turn a file's old bytes into its new ones, and diffs.

``--fix`` writes whole files; JSON and SARIF output show each fixable violation's fix as
ruff does, as a list of :class:`Edit` (replace this range by that text). :func:`fix_edits`
turns an old and a new version of a file into line-level edits, :func:`pass_rows` finds the
rows each pass of the fix loop changed, :func:`pass_edits` gives both from the loop's passes
(each version decoded once), :func:`assign_edits` gives each edit to one of the violations
the rewrite fixed, and :func:`unified_diff` is what ``--diff`` prints. Nothing here fixes
anything: the versions come from :func:`lint_gpu_tests.fixing.fixloop.fix_source`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from lint_gpu_tests.ftypes import Edit, FixKind, Location, Violation

__all__ = ["Edit", "assign_edits", "edit_rows", "fix_edits", "meet", "pass_edits", "pass_rows",
           "unified_diff"]

Rows = tuple[int, int]
"""A half-open range of 0-based rows of a file; ``(r, r)`` is the point before row ``r``."""

Opcodes = Sequence[tuple[str, int, int, int, int]]
"""``difflib.SequenceMatcher.get_opcodes()`` of two lists of rows."""

Label = TypeVar("Label")
"""What a pass is known by (the kind of the fixes it applied, or a fix unit's number)."""


def fix_edits(old: bytes, new: bytes) -> list[Edit]:
    """The minimal line-level edits that turn ``old`` into ``new`` (both a file's bytes, as
    ``--fix`` read and wrote them), positions in ``old``'s decoded text: 1-based rows, 1-based
    character columns, the end exclusive. Applied from the last to the first, they give
    exactly ``new``'s text.

    Raises:
        SyntaxError: when either cannot be decoded.
    """
    a, b = _rows_of(old), _rows_of(new)
    return _line_edits(a, b, _opcodes(a, b))


def pass_edits(passes: Sequence[tuple[Label, bytes, bytes]]
               ) -> tuple[list[Edit], list[tuple[Label, Rows]]]:
    """:func:`fix_edits` from the first pass's input to the last one's output, and
    :func:`pass_rows` of ``passes`` (each ``(label, bytes before, bytes after)``, a pass's
    output the next one's input, as the fix loop keeps them; not empty), with each version
    decoded once and, where one pass made the whole fix, one diff serving both.

    Raises:
        SyntaxError: when a version cannot be decoded.
    """
    versions = [_rows_of(passes[0][1]), *(_rows_of(after) for _, _, after in passes)]
    steps = [_opcodes(versions[i], versions[i + 1]) for i in range(len(passes))]
    whole = steps[0] if len(steps) == 1 else _opcodes(versions[0], versions[-1])
    return (_line_edits(versions[0], versions[-1], whole),
            _mapped_rows([kind for kind, _, _ in passes], steps))


def _opcodes(a: Sequence[str], b: Sequence[str]) -> Opcodes:
    from difflib import SequenceMatcher

    return SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def _line_edits(a: Sequence[str], b: Sequence[str], opcodes: Opcodes) -> list[Edit]:
    """The edits of ``opcodes`` (rows ``a`` to rows ``b``), positioned in ``a``."""

    def position(index: int) -> Location:
        if index < len(a):
            return Location(index + 1, 1)
        if not a:
            return Location(1, 1)
        if a[-1].endswith(("\n", "\r")):
            return Location(len(a) + 1, 1)
        return Location(len(a), len(a[-1]) + 1)

    return [Edit("".join(b[j1:j2]), position(i1), position(i2))
            for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]


def _rows_of(data: bytes) -> list[str]:
    from lint_gpu_tests.parsing.source import decode_source, physical_lines

    return physical_lines(decode_source(data))


def _back(opcodes: Opcodes, rows: Rows) -> Rows:
    """The rows of a pass's input that ``rows`` of its output come from (``opcodes``:
    ``difflib``'s, input to output): an unchanged row maps to its row, a changed one to the
    whole block it replaced."""
    start, end = rows
    found: list[int] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if end == start:
            hit = j1 <= start <= j2
        else:
            hit = j1 < end and start < j2
        if not hit:
            continue
        if tag == "equal":
            found += [i1 + max(start, j1) - j1, i1 + min(max(end, start), j2) - j1]
        else:
            found += [i1, i2]
    return (min(found), max(found)) if found else rows


def edit_rows(edit: Edit) -> Rows:
    """The 0-based rows of the original file that ``edit`` replaces (as :func:`pass_rows`
    gives a pass's rows)."""
    return edit.location.row - 1, edit.end_location.row - 1


def meet(a: Rows, b: Rows) -> bool:
    """True when two row ranges overlap, or, where one is a point, touch."""
    if a[0] < a[1] and b[0] < b[1]:
        return a[0] < b[1] and b[0] < a[1]
    return a[0] <= b[1] and b[0] <= a[1]


def pass_rows(passes: Sequence[tuple[FixKind, bytes, bytes]]) -> list[tuple[FixKind, Rows]]:
    """The rows of the original file (the first pass's input) each pass changed, as
    ``(kind of fixes it applied, rows)`` for each changed block, mapped back through the
    passes before it.

    Raises:
        SyntaxError: when a version cannot be decoded.
    """
    return _mapped_rows([kind for kind, _, _ in passes],
                        [_opcodes(_rows_of(before), _rows_of(after))
                         for _, before, after in passes])


def _mapped_rows(kinds: Sequence[Label], steps: Sequence[Opcodes]
                 ) -> list[tuple[Label, Rows]]:
    """:func:`pass_rows` from each pass's label and its opcodes (input to output)."""
    out: list[tuple[Label, Rows]] = []
    for index, (kind, opcodes) in enumerate(zip(kinds, steps, strict=True)):
        for tag, i1, i2, _, _ in opcodes:
            if tag == "equal":
                continue
            rows: Rows = (i1, i2)
            for previous in reversed(steps[:index]):
                rows = _back(previous, rows)
            out.append((kind, rows))
    return out


def assign_edits(fixed: Sequence[Violation], edits: Sequence[Edit],
                 made_by: Sequence[tuple[FixKind, Rows]] = ()
                 ) -> dict[Violation, tuple[Edit, ...]]:
    """Give each edit to one of the violations ``fixed`` (not empty when ``edits`` is not):
    among those whose fix is of a kind that changed the edit's rows (``made_by``, from
    :func:`pass_rows`; every violation when none is), the first whose rows overlap it, else
    the nearest (an added import goes to the first fix below it). So a rewrite that moves a
    line (a with-block indenting the ``os.environ`` line another rule reports) is credited to
    the fix that made it. Together the violations' edits are the whole rewrite, each edit
    carried once.

    Returns:
        Every violation of ``fixed`` -> its edits, in the order of ``edits`` (maybe none).
    """
    out: dict[Violation, list[Edit]] = {v: [] for v in fixed}
    for edit in edits:
        last = edit.end_location.row - (1 if edit.end_location.column == 1
                                        and edit.end_location.row > edit.location.row else 0)
        kinds = {kind for kind, rows in made_by if meet(rows, edit_rows(edit))}
        candidates = [v for v in fixed if v.fix is not None and v.fix.kind in kinds] or fixed

        def distance(v: Violation, first: int = edit.location.row, last: int = last) -> int:
            if v.end_location.row < first:
                return first - v.end_location.row
            return max(0, v.location.row - last)

        owner = min(candidates, key=lambda v: (distance(v), v.location.row, v.location.column))
        out[owner].append(edit)
    return {v: tuple(e) for v, e in out.items()}


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """Return a unified diff (``--- path`` / ``+++ path``) between two versions of a file,
    both its bytes (decoded as the checker decodes them; undecodable bytes as UTF-8 with
    replacement characters). A last line without a newline is marked as ``diff`` does."""
    from lint_gpu_tests.parsing.source import decode_source

    def lines(data: bytes) -> list[str]:
        try:
            text = decode_source(data)
        except SyntaxError:
            text = data.decode("utf-8", "replace")
        return text.splitlines(keepends=True)

    import difflib

    out: list[str] = []
    for line in difflib.unified_diff(lines(old), lines(new), fromfile=path, tofile=path):
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)

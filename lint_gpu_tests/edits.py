"""A fix as text: the edits that turn a file's old bytes into its new ones, and diffs.

``--fix`` writes whole files; JSON and SARIF output show each fixable violation's fix as
ruff does, as a list of :class:`Edit` (replace this range by that text). :func:`fix_edits`
turns an old and a new version of a file into line-level edits, :func:`assign_edits` gives
each edit to one of the violations the rewrite fixed, and :func:`unified_diff` is what
``--diff`` prints. Nothing here fixes anything: the versions come from
:func:`lint_gpu_tests.fixloop.fix_source`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lint_gpu_tests.ftypes import Location, Violation

__all__ = ["Edit", "assign_edits", "fix_edits", "unified_diff"]


@dataclass(frozen=True)
class Edit:
    """One text replacement of a fix, as ruff's JSON ``edits`` spell it.

    Attributes:
        content: the text that replaces the range (``""`` deletes it).
        location: start, 1-based row and 1-based character column, in the original file.
        end_location: end (exclusive), same units; ``(rows + 1, 1)`` is the end of a file
            whose last line ends with a newline.
    """

    content: str
    location: Location
    end_location: Location


def fix_edits(old: bytes, new: bytes) -> list[Edit]:
    """The minimal line-level edits that turn ``old`` into ``new`` (both a file's bytes, as
    ``--fix`` read and wrote them), positions in ``old``'s decoded text: 1-based rows, 1-based
    character columns, the end exclusive. Applied from the last to the first, they give
    exactly ``new``'s text.

    Raises:
        SyntaxError: when either cannot be decoded.
    """
    from difflib import SequenceMatcher

    from lint_gpu_tests.source import decode_source, physical_lines

    a = physical_lines(decode_source(old))
    b = physical_lines(decode_source(new))

    def position(index: int) -> Location:
        if index < len(a):
            return Location(index + 1, 1)
        if not a:
            return Location(1, 1)
        if a[-1].endswith(("\n", "\r")):
            return Location(len(a) + 1, 1)
        return Location(len(a), len(a[-1]) + 1)

    return [Edit("".join(b[j1:j2]), position(i1), position(i2))
            for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if tag != "equal"]


def assign_edits(fixed: Sequence[Violation], edits: Sequence[Edit]
                 ) -> dict[Violation, tuple[Edit, ...]]:
    """Give each edit to one of the violations ``fixed`` (not empty when ``edits`` is not):
    the first whose rows overlap it, else the nearest (an added import goes to the first fix
    below it). Together the violations' edits are the whole rewrite, each edit carried once.

    Returns:
        Every violation of ``fixed`` -> its edits, in the order of ``edits`` (maybe none).
    """
    out: dict[Violation, list[Edit]] = {v: [] for v in fixed}
    for edit in edits:
        last = edit.end_location.row - (1 if edit.end_location.column == 1
                                        and edit.end_location.row > edit.location.row else 0)

        def distance(v: Violation, first: int = edit.location.row, last: int = last) -> int:
            if v.end_location.row < first:
                return first - v.end_location.row
            return max(0, v.location.row - last)

        owner = min(fixed, key=lambda v: (distance(v), v.location.row, v.location.column))
        out[owner].append(edit)
    return {v: tuple(e) for v, e in out.items()}


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """Return a unified diff (``--- path`` / ``+++ path``) between two versions of a file,
    both its bytes (decoded as the checker decodes them; undecodable bytes as UTF-8 with
    replacement characters). A last line without a newline is marked as ``diff`` does."""
    from lint_gpu_tests.source import decode_source

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

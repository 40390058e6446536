"""``# noqa`` directives: what the CLI, the flake8 plugin and fix planning obey.

Sits with source parsing, below the analysis: fix planning keeps a statement the user
suppressed GPU004 on (:mod:`lint_gpu_tests.fixplan`), and the engine filters reports with
the same :class:`Noqa`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from lint_gpu_tests.parsing.source import first_line, physical_lines

NOQA_RE = re.compile(r"#[ \t]*noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
"""An inline ``# noqa`` as flake8 spells it (``flake8.defaults.NOQA_INLINE_REGEXP``); ``#noqa``
without the space is accepted too, as ruff does."""
FILE_NOQA_RE = re.compile(
    r"\s*(?:(?P<flake8># flake8[:=]\s*noqa)"
    r"|#\s*gpu-test-lint:\s*noqa(?::\s?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?)", re.IGNORECASE)
"""A file-level directive at the start of a line: flake8's ``# flake8: noqa``
(``flake8.defaults.NOQA_FILE``: the whole file, whatever follows) or ``# gpu-test-lint: noqa``
(every code, or with ``: GPU004`` only the codes named, as ruff's ``# ruff: noqa: F401``)."""


@dataclass(frozen=True)
class Noqa:
    """The ``# noqa`` directives of one module: what the CLI and the flake8 plugin both obey.

    Semantics are flake8's (``FileProcessor._noqa_line_mapping`` and
    ``Violation.is_inline_ignored``), so that whatever flake8 suppresses the CLI suppresses
    too: a bare ``# noqa`` suppresses every code on its line, ``# noqa: GPU001,GPU004`` the
    codes named, each taken as a prefix (``# noqa: GPU00`` covers GPU001..GPU009); the
    directive is looked for in the whole run of lines that tokenises as one (a multi-line
    string, a backslash continuation), so ``# noqa`` after the closing quotes of a multi-line
    string covers the string's first line too; like flake8, the raw text is searched (a
    ``"# noqa"`` inside a string counts). Beyond flake8, as ruff does: codes match regardless of
    case and ``#noqa`` needs no space. File level: ``# flake8: noqa`` (flake8 then skips the
    file) and ``# gpu-test-lint: noqa[: CODES]`` on a line of their own.

    Attributes:
        lines: 1-based line -> codes named (``None``: every code).
        file_codes: codes a file-level ``# gpu-test-lint: noqa: CODES`` suppresses.
        whole_file: a file-level ``# flake8: noqa`` or bare ``# gpu-test-lint: noqa``.
    """

    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)
    file_codes: frozenset[str] = frozenset()
    whole_file: bool = False

    def suppresses(self, line: int, code: str) -> bool:
        """Whether a violation of ``code`` reported on ``line`` is suppressed."""
        code = code.upper()
        if self.whole_file or code.startswith(tuple(self.file_codes)):
            return True
        if line not in self.lines:
            return False
        codes = self.lines[line]
        return codes is None or code.startswith(tuple(codes))


def noqa_codes(codes: str | None) -> frozenset[str] | None:
    if codes is None:
        return None
    return frozenset(c for c in re.split(r"[,\s]+", codes.upper()) if c)


def logical_ranges(text: str) -> list[tuple[int, int]]:
    """The runs of physical lines flake8 searches for ``# noqa`` as one: lines between two
    ``NL``/``NEWLINE`` tokens (a multi-line string or a backslash continuation joins lines;
    a bracket does not, its line breaks are ``NL`` tokens). Empty when tokenising fails."""
    return _token_ranges(text, 0)


def _ranges_holding(text: str, physical: list[str], tree: ast.Module, wanted: set[int]
                    ) -> list[tuple[int, int]] | None:
    """The runs of :func:`logical_ranges` that hold a line of ``wanted``, tokenising only
    the top-level statements of ``tree`` (parsed from ``text``) around those lines: a
    top-level statement starts at column 0 outside any bracket or string, so the tokenizer
    can start there; a line outside every statement (blank, a comment) is a run of its own.
    ``None`` when a slice does not tokenise (the caller tokenises the whole text)."""
    spans: list[list[int]] = []
    for stmt in tree.body:
        first = first_line(stmt)
        last = stmt.end_lineno or stmt.lineno
        if spans and first <= spans[-1][1]:  # ``a = 1; b = 2``: statements share a line
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
    ranges: list[tuple[int, int]] = []
    covered: set[int] = set()
    for first, last in spans:
        if not any(first <= line <= last for line in wanted):
            continue
        found = _token_ranges("".join(physical[first - 1:last]), first - 1)
        if not found:
            return None
        ranges += found
        covered.update(range(first, last + 1))
    ranges += [(line, line) for line in sorted(wanted - covered)]
    return ranges


def _token_ranges(text: str, offset: int) -> list[tuple[int, int]]:
    """:func:`logical_ranges` of ``text``, whose first line is line ``offset + 1``."""
    import io
    import tokenize

    ranges: list[tuple[int, int]] = []
    start, end = 0, 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            start = start or tok.start[0]
            end = max(end, tok.end[0])
            if tok.type in (tokenize.NL, tokenize.NEWLINE):
                ranges.append((start + offset, end + offset))
                start, end = 0, 0
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return ranges


def parse_noqa(text: str, tree: ast.Module | None = None) -> Noqa:
    """Read every ``# noqa`` directive of ``text`` (see :class:`Noqa`); with ``tree`` (parsed
    from ``text``), only the top-level statements holding one are tokenised."""
    physical = physical_lines(text)
    lines: dict[int, frozenset[str] | None] = {}
    file_codes: set[str] = set()
    whole_file = False
    wanted: set[int] = set()
    for number, line in enumerate(physical, 1):
        if "noqa" not in line.lower():
            continue
        wanted.add(number)
        whole = FILE_NOQA_RE.match(line)
        if whole is not None:
            codes = noqa_codes(whole.group("codes"))
            if whole.group("flake8") or codes is None:
                whole_file = True
            else:
                file_codes.update(codes)
    ranges = _ranges_holding(text, physical, tree, wanted) if tree is not None else None
    for start, end in logical_ranges(text) if ranges is None else ranges:
        joined = "".join(physical[start - 1:end])
        if "noqa" not in joined.lower():
            continue
        match = NOQA_RE.search(joined)
        if match is not None:
            lines.update(dict.fromkeys(range(start, end + 1), noqa_codes(match.group("codes"))))
    return Noqa(lines, frozenset(file_codes), whole_file)

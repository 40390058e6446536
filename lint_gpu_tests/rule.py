"""The rule base class: one subclass per module under :mod:`lint_gpu_tests.rules`.

A rule carries everything about itself in one place, as Fixit and ruff do: its code,
kebab-case name, message, documentation sections, fix title and its own bad (``INVALID``)
and good (``VALID``) examples. The test suite runs every example; ``gpu-test-lint rule``
and ``docs/rules.md`` render the same text, so docs cannot drift.

In an ``INVALID`` example each line that must be reported ends with a marker comment
``# error: GPU00N`` (several codes separated by commas); no other line may be reported.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from lint_gpu_tests.ftypes import FixKind, Trigger

if TYPE_CHECKING:
    from lint_gpu_tests.analysis.analysis import ModuleAnalysis
    from lint_gpu_tests.ftypes import FixInfo

MARKER_RE = re.compile(r"\s*# error: (?P<codes>GPU\d{3}(?:,\s*GPU\d{3})*)\s*$")


@dataclass(frozen=True)
class Example:
    """A source snippet used as a rule example.

    Attributes:
        source: a complete Python module (dedented).
        title: one line saying what the example shows.
        path: the file name the example is checked as (rules only look at test modules).
        config: ``[tool.gpu-test-lint]``-style overrides as a TOML-like dict, or ``None``.
        modules: the other modules of the example's tree, ``(path, source)``, laid out
            beside it when it is checked (:meth:`lay_out`): an engine helper of another
            module.
    """

    source: str
    title: str = ""
    path: str = "tests/test_example.py"
    config: tuple[tuple[str, object], ...] = ()
    modules: tuple[tuple[str, str], ...] = ()

    def lay_out(self, directory: str) -> str:
        """Write the example at :attr:`path` and its :attr:`modules` under ``directory``,
        with an empty ``pyproject.toml`` marking the project's root; return the example's
        path there.

        Raises:
            OSError: when a file cannot be written.
        """
        files = ((self.path, self.source), *self.modules, ("pyproject.toml", ""))
        for relative, text in files:
            target = os.path.join(directory, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(text)
        return os.path.join(directory, self.path)

    def expected(self) -> list[tuple[int, str]]:
        """Return ``(line, code)`` pairs marked with ``# error:`` comments, sorted."""
        found: list[tuple[int, str]] = []
        for number, line in enumerate(self.source.splitlines(), start=1):
            match = MARKER_RE.search(line)
            if match:
                for code in match.group("codes").split(","):
                    found.append((number, code.strip()))
        return sorted(found)

    def clean_source(self) -> str:
        """The source without the ``# error:`` markers (for documentation)."""
        return "\n".join(MARKER_RE.sub("", line) for line in self.source.splitlines()) + "\n"


@dataclass(frozen=True)
class Hit:
    """A raw finding from a rule, before noqa, selection and path are applied.

    Attributes:
        node_line, node_col: 1-based line and 0-based UTF-8 byte column of the start (as ``ast``).
        end_line, end_col: the same for the end.
        message: the message, already formatted.
        fix: fix information, or ``None`` when the rule has no fix for this hit.
        depends_on: ``(code, row)`` of another violation whose fix also fixes this one
            (GPU003/GPU004 removed by the GPU001 rewrite); when that one is not reported
            (``# noqa``, not selected), this hit's fix cannot be applied.
    """

    node_line: int
    node_col: int
    end_line: int
    end_col: int
    message: str
    fix: FixInfo | None = None
    depends_on: tuple[str, int] | None = None


class Rule:
    """Base class of every rule. Subclasses set the class attributes and ``check``.

    A rule declares everything the rest of the tool needs of it, so adding one means adding
    its module ``lint_gpu_tests/rules/gpuNNN_kebab_name.py`` (the file name gives the code
    and name that configuration accepts before any rule is imported; ``tests/test_layers.py``
    holds the two to the class) and nothing else: the registry
    (:data:`lint_gpu_tests.rules.ALL_RULES`), the prefilter, the fix driver, the
    documentation and the example tests all read it from here. A rule from outside the
    package is added with :func:`lint_gpu_tests.rules.register`.

    Class attributes:
        code: ``"GPU001"`` ...; name: kebab-case name; summary: one plain line for tables
        and SARIF; message: the violation message template (``str.format`` fields).
        what_it_does, why_bad, fix_safety: documentation sections (Markdown).
        fix_title: short title of the fix, or ``""`` for a rule without a fix.
        triggers: what a file must name for the rule to look at it (:class:`Trigger`
            members, or identifiers of the rule's own); the prefilter is made from them.
        fix_kinds: the transformations that apply the rule's fixes
            (:class:`~lint_gpu_tests.ftypes.FixKind`; each has its codemod in
            ``lint_gpu_tests/codemods/``); empty for a rule without a fix.
        INVALID / VALID: examples that must / must not be reported.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    message: ClassVar[str]
    what_it_does: ClassVar[str]
    why_bad: ClassVar[str]
    fix_title: ClassVar[str] = ""
    fix_safety: ClassVar[str] = ""
    options: ClassVar[tuple[str, ...]] = ()
    references: ClassVar[tuple[str, ...]] = ()
    triggers: ClassVar[tuple[Trigger | str, ...]] = (Trigger.ENGINE,)
    fix_kinds: ClassVar[tuple[FixKind, ...]] = ()
    INVALID: ClassVar[tuple[Example, ...]] = ()
    VALID: ClassVar[tuple[Example, ...]] = ()

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        """Yield every hit of this rule in the analysed module."""
        raise NotImplementedError

"""A scratch rule from outside the package, as a project adds its own
(``docs/architecture.md``, "Where a new rule goes"): it reports every line GPU001 reports,
without a fix, so it fires on GPU001's examples and on every test source GPU001 does.

``tests/conftest.py`` registers it when pytest starts, before any test module is imported,
so the whole test session runs with it present, off by default as every rule from outside
the package is: every test passing so shows no test depends on the registry holding the
package's rules alone. ``tests/test_scratch_rule.py`` selects it and holds it to GPU001's
lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.rule import MARKER_RE, Example, Hit, Rule
from lint_gpu_tests.rules.gpu001_engine_outside_runner import EngineOutsideRunner


def _marked_as_scratch(source: str) -> str:
    """``source`` with GPU001 in its ``# error:`` markers replaced by GPU050."""
    lines = []
    for line in source.splitlines(keepends=True):
        match = MARKER_RE.search(line)
        if match is not None:
            line = line[:match.start()] + match.group(0).replace("GPU001", "GPU050") + \
                line[match.end():]
        lines.append(line)
    return "".join(lines)


class ScratchEngineLine(Rule):
    """Reports the lines GPU001 reports, with a message of its own and no fix."""

    code = "GPU050"
    name = "scratch-engine-line"
    summary = "A line GPU001 reports (a scratch rule from outside the package)"
    message = "An engine built here (scratch rule)"
    what_it_does = "Reports every line GPU001 reports."
    why_bad = "It is a scratch rule: the test suite runs with it registered."
    triggers = EngineOutsideRunner.triggers
    INVALID = tuple(
        Example(_marked_as_scratch(example.source), example.title, example.path,
                example.config, example.modules)
        for example in EngineOutsideRunner.INVALID)
    VALID = EngineOutsideRunner.VALID

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        for hit in EngineOutsideRunner().check(module):
            yield replace(hit, message=self.message, fix=None, depends_on=None)


"""What the per-rule tests share.

A rule's own examples are run as Fixit runs its VALID/INVALID cases, with that rule alone
selected: an INVALID one reports exactly the lines it marks with the rule's code (markers of
other codes document what the other rules report there), a VALID one reports nothing.
``test_gpuNNN.py`` runs its rule's examples with ``example_tests``; ``test_every_rule.py``
runs those of a rule that has no file of its own (a new rule is covered by the registry
alone). ``reports`` and ``fix_reports`` give what a check of a snippet reports.
"""

from __future__ import annotations

import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, config_from_table
from lint_gpu_tests.ftypes import Violation
from lint_gpu_tests.rule import Example, Rule
from lint_gpu_tests.rules import ALL_RULES, outside_rules

HERE = Path(__file__).parent
#: ``tests/fixtures/soundness``: fix cases a code review proved wrong (``test_fix_soundness.py``)
SOUNDNESS = HERE.parent / "fixtures" / "soundness"
PATH = "tests/test_x.py"


def rule_class(code: str) -> type[Rule]:
    """The registered rule of ``code``."""
    (rule,) = [rule for rule in ALL_RULES if rule.code == code]
    return rule


def rule_file(rule: type[Rule]) -> Path:
    """Where the rule's own tests live, ``tests/rules/test_gpuNNN.py``."""
    return HERE / f"test_{rule.code.lower()}.py"


def examples(rule: type[Rule], kind: str) -> list[pytest.param]:
    """The rule's ``INVALID`` or ``VALID`` examples, one parameter each."""
    return [pytest.param(example, id=f"{kind}-{number}")
            for number, example in enumerate(getattr(rule, kind))]


def example_tests(rule: type[Rule]) -> tuple[Callable[[Example], None],
                                             Callable[[Example], None]]:
    """The two tests of a rule's own examples, one case an example, for ``test_gpuNNN.py`` to
    bind to the names pytest collects: ``test_invalid_example_reports_marked_lines`` and
    ``test_valid_example_reports_nothing``."""

    @pytest.mark.parametrize("example", examples(rule, "INVALID"))
    def test_invalid_example_reports_marked_lines(example: Example) -> None:
        assert_invalid_example_reports_marked_lines(rule, example)

    @pytest.mark.parametrize("example", examples(rule, "VALID"))
    def test_valid_example_reports_nothing(example: Example) -> None:
        assert_valid_example_reports_nothing(rule, example)

    return test_invalid_example_reports_marked_lines, test_valid_example_reports_nothing


def alone(rule: type[Rule], example: Example) -> Config:
    """The example's configuration with ``rule`` the only rule selected."""
    config = config_from_table(dict(example.config), "example") if example.config else Config()
    return config.with_overrides(select=(rule.code,), extend_select=(), ignore=())


def example_violations(example: Example, config: Config) -> list[Violation]:
    """What a check of ``example`` under ``config`` reports: of its source alone, or, for
    an example with other modules (:attr:`Example.modules`), of it laid out with them in a
    new directory."""
    if not example.modules:
        return check_source(example.source.encode(), example.path, config)
    with tempfile.TemporaryDirectory() as directory:
        return check_source(example.source.encode(), example.lay_out(directory), config)


def assert_invalid_example_reports_marked_lines(rule: type[Rule], example: Example) -> None:
    """``rule`` alone reports exactly the lines the example marks with its code."""
    expected = [(line, code) for line, code in example.expected() if code == rule.code]
    assert expected, "example must show its own rule"
    found = example_violations(example, alone(rule, example))
    assert sorted((v.location.row, v.code) for v in found) == expected


def assert_valid_example_reports_nothing(rule: type[Rule], example: Example) -> None:
    """``rule`` alone reports nothing on the example."""
    found = example_violations(example, alone(rule, example))
    assert [(v.location.row, v.code) for v in found] == [], rule.code


def own_rules(config: Config | None = None) -> Config:
    """``config`` (default ``Config()``) with the rules registered from outside the package
    ignored: the rules' tests hold the package's rules to what they report together, whatever
    else a project registers."""
    config = config or Config()
    return config.with_overrides(ignore=(*config.ignore, *(r.code for r in outside_rules())))


def reports(source: str, config: Config | None = None,
            path: str = PATH) -> list[tuple[int, int, str]]:
    """``(line, column, code)`` of every report of the package's rules on the dedented
    ``source``."""
    src = textwrap.dedent(source).encode()
    return [(v.location.row, v.location.column, v.code)
            for v in check_source(src, path, own_rules(config))]


def fix_reports(source: str, path: str = PATH) -> list[tuple[int, str, str, str]]:
    """``(line, code, applicability, reason)`` of every report of the package's rules."""
    src = textwrap.dedent(source).encode()
    return [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none",
             (v.fix.reason or "") if v.fix else "")
            for v in check_source(src, path, own_rules())]

"""What holds for every rule in the registry: its examples and documentation are there, and
its examples are run, by ``tests/rules/test_gpuNNN.py`` when the rule has a file of its own
and here when it has not (so a new rule is covered without a new test file)."""

from __future__ import annotations

import pytest
from rule_testing import (
    alone,
    assert_invalid_example_reports_marked_lines,
    assert_valid_example_reports_nothing,
    example_violations,
    rule_file,
)

from lint_gpu_tests.codes import RULE_CODES
from lint_gpu_tests.rule import Example, Rule
from lint_gpu_tests.rules import ALL_RULES, package_rules


def _package_examples() -> list[pytest.param]:
    own = package_rules()
    return [pytest.param(rule, example, own, id=f"{rule.code}-{kind}-{number}")
            for rule in own for kind in ("INVALID", "VALID")
            for number, example in enumerate(getattr(rule, kind))]


@pytest.mark.parametrize(("rule", "example", "own"), _package_examples())
def test_every_marker_of_an_example_is_what_the_package_rules_report(
        rule: type[Rule], example: Example, own: list[type[Rule]]) -> None:
    """An example's markers of other codes document what the package's other rules report
    there: with the package's rules selected (and no rule from outside), exactly those."""
    config = alone(rule, example).with_overrides(select=tuple(r.code for r in own))
    found = example_violations(example, config)
    assert sorted((v.location.row, v.code) for v in found) == example.expected()


def test_examples_of_a_rule_without_a_file_of_its_own() -> None:
    """None of the package's rules today; a new one, until it gets ``test_gpuNNN.py``."""
    for rule in ALL_RULES:
        if rule_file(rule).exists():
            continue
        for example in rule.INVALID:
            assert_invalid_example_reports_marked_lines(rule, example)
        for example in rule.VALID:
            assert_valid_example_reports_nothing(rule, example)


def test_every_rule_has_examples_and_docs() -> None:
    codes = [rule.code for rule in ALL_RULES]
    assert codes == sorted(codes) == list(RULE_CODES)
    assert len(codes) >= 8
    for rule in ALL_RULES:
        assert rule.INVALID and rule.VALID, rule.code
        assert rule.name and rule.summary and rule.what_it_does and rule.why_bad


def test_every_rule_file_names_a_registered_rule_and_runs_its_examples() -> None:
    codes = {rule.code.lower() for rule in ALL_RULES}
    files = sorted(rule_file(ALL_RULES[0]).parent.glob("test_gpu*.py"))
    assert files
    assert [path.stem for path in files if path.stem.removeprefix("test_") not in codes] == []
    for path in files:
        text = path.read_text(encoding="utf-8")
        code = path.stem.removeprefix("test_").upper()
        assert f'RULE = rule_class("{code}")' in text, path.name
        assert "test_valid_example_reports_nothing) = example_tests(RULE)" in text, path.name

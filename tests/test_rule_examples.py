"""Every rule's own examples: INVALID ones report exactly the marked lines and codes,
VALID ones report nothing (as Fixit runs its VALID/INVALID cases)."""

from __future__ import annotations

import pytest

from lint_gpu_tests.codes import RULE_CODES
from lint_gpu_tests.config import Config, config_from_table
from lint_gpu_tests.engine import check_source
from lint_gpu_tests.rule import Example
from lint_gpu_tests.rules import ALL_RULES


def _cases(kind: str) -> list[pytest.param]:
    params = []
    for rule in ALL_RULES:
        for number, example in enumerate(getattr(rule, kind)):
            params.append(pytest.param(rule, example, id=f"{rule.code}-{kind}-{number}"))
    return params


def _config(example: Example) -> Config:
    return config_from_table(dict(example.config), "example") if example.config else Config()


@pytest.mark.parametrize(("rule", "example"), _cases("INVALID"))
def test_invalid_example_reports_marked_lines(rule: type, example: Example) -> None:
    expected = example.expected()
    assert any(code == rule.code for _, code in expected), "example must show its own rule"
    found = check_source(example.source.encode(), example.path, _config(example))
    assert sorted((v.location.row, v.code) for v in found) == expected


@pytest.mark.parametrize(("rule", "example"), _cases("VALID"))
def test_valid_example_reports_nothing(rule: type, example: Example) -> None:
    found = check_source(example.source.encode(), example.path, _config(example))
    assert [(v.location.row, v.code) for v in found] == []


def test_every_rule_has_examples_and_docs() -> None:
    codes = [rule.code for rule in ALL_RULES]
    assert codes == sorted(codes) == list(RULE_CODES)
    assert len(codes) >= 8
    for rule in ALL_RULES:
        assert rule.INVALID and rule.VALID, rule.code
        assert rule.name and rule.summary and rule.what_it_does and rule.why_bad

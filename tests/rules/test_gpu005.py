"""GPU005 runner-without-with: a runner used outside a with-statement.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu005_runner_without_with.py``).
Elsewhere: its rewrites byte for byte in ``tests/fixtures/fix/``
(``runner_fixture_without_with``, ``runner_class_without_with_helper``,
``runner_fixture_yields_runner``, ``runner_without_with_line_length``).
"""

from __future__ import annotations

import pytest
from rule_testing import example_tests, rule_class

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source

RULE = rule_class("GPU005")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


RUNNER_FIXTURE = '''import pytest


@pytest.fixture
def opt(vllm_runner):
    r = vllm_runner("m")
    {handout} r
    r.__exit__(None, None, None)


def test_opt(opt):
    assert opt.llm.generate(["hi"])
'''


@pytest.mark.parametrize("handout", ["yield", "return"])
def test_fixture_hands_out_the_runner_itself(handout: str) -> None:
    # Its tests expect the runner (`opt.llm`), not its engine.
    source = RUNNER_FIXTURE.format(handout=handout)
    if handout == "return":
        source = source.replace("    r.__exit__(None, None, None)\n", "")
    outcome = fix_source(source.encode(), "tests/test_case.py", Config())
    assert outcome.new_source is not None
    assert outcome.new_source.decode() == '''import pytest


@pytest.fixture
def opt(vllm_runner):
    with vllm_runner("m") as r:
        yield r


def test_opt(opt):
    assert opt.llm.generate(["hi"])
'''
    assert [v.code for v in outcome.fixed] == ["GPU005"]

"""GPU005 runner-without-with: a runner used outside a with-statement.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu005_runner_without_with.py``).
Elsewhere: its rewrites byte for byte in ``tests/fixtures/fix/``
(``runner_fixture_without_with``, ``runner_class_without_with_helper``,
``runner_fixture_yields_runner``, ``runner_without_with_line_length``).
"""

from __future__ import annotations

import pytest
from rule_testing import example_tests, rule_class

from lint_gpu_tests.checking.checker import check_source
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


def test_a_runner_entered_by_its_name() -> None:
    """``runner = vllm_runner(...)`` then ``with runner as m:`` right after enters the
    runner before anything else runs: nothing to report. Entered later (a statement in
    between, or ``stack.enter_context(runner)``): reported without a fix, as a with-statement
    around the construction would enter the runner twice."""
    source = '''import contextlib

import pytest


@pytest.fixture(scope="class")
def served(vllm_runner):
    runner = vllm_runner("m", max_model_len=64)
    with runner as model:
        yield model


def test_checked_first(vllm_runner):
    runner = vllm_runner("m")
    assert runner is not None
    with runner as model:
        assert model


def test_on_a_stack(vllm_runner):
    runner = vllm_runner("m")
    with contextlib.ExitStack() as stack:
        assert stack.enter_context(runner)
'''
    found = [(v.location.row, v.code, v.fix.applicability.value if v.fix else "",
              v.fix.reason if v.fix else "")
             for v in check_source(source.encode(), "tests/test_x.py", Config())]
    twice = ("the runner is entered later (line {line}): a with-statement around its "
             "construction would enter it twice")
    assert found == [(14, "GPU005", "none", twice.format(line=16)),
                     (21, "GPU005", "none", twice.format(line=23))]
    assert fix_source(source.encode(), "tests/test_x.py", Config(),
                      unsafe=True).new_source is None  # nothing to write


def test_a_runner_built_in_a_guarding_try_and_entered_after_it() -> None:
    """A runner built as the whole body of a ``try`` whose handlers all leave, entered by
    its name right after that ``try``, is entered before anything else runs: nothing to
    report. A handler that falls through (the name may be unbound), or a statement
    before the with-statement, and it is reported."""
    source = '''import pytest


def test_skipped(vllm_runner):
    try:
        runner = vllm_runner("m")
    except Exception as e:
        pytest.skip(str(e))
    with runner as model:
        assert model


def test_falls_through(vllm_runner):
    try:
        runner = vllm_runner("m")
    except Exception as e:
        print(e)
    with runner:
        assert runner


def test_checked_first(vllm_runner):
    try:
        runner = vllm_runner("m")
    except ValueError:
        raise
    assert runner is not None
    with runner:
        assert runner
'''
    found = [(v.location.row, v.code)
             for v in check_source(source.encode(), "tests/test_x.py", Config())]
    assert found == [(15, "GPU005"), (24, "GPU005")]


def test_a_runner_entered_through_an_alias_a_container_or_a_helper() -> None:
    """Entered later through an alias, an item of a container holding it, a function of the
    module that enters its parameter, or ``__enter__()``: no fix (a with-statement around
    the construction would enter it twice). Entered by the next statement on a stack: not
    reported. Entered only after its name is bound to another runner: the first runner is
    never entered, and its fix stands."""
    source = '''import contextlib


def _use(r):
    with r as m:
        return m.llm.generate(["a"])


def test_alias(vllm_runner):
    runner = vllm_runner("m")
    r2 = runner
    with r2 as m:
        assert m


def test_container(vllm_runner):
    runners = (vllm_runner("m"),)
    with runners[0] as m:
        assert m


def test_helper(vllm_runner):
    runner = vllm_runner("m")
    assert _use(runner)


def test_dunder(vllm_runner):
    runner = vllm_runner("m")
    runner.__enter__()
    try:
        assert runner.llm.generate(["a"])
    finally:
        runner.__exit__(None, None, None)


def test_stack_next(vllm_runner):
    with contextlib.ExitStack() as stack:
        runner = vllm_runner("m")
        stack.enter_context(runner)
        assert runner.llm.generate(["a"])


def test_rebound(vllm_runner):
    runner = vllm_runner("m", seed=0)
    first = runner.llm.generate(["a"])
    runner = vllm_runner("m", seed=1)
    with runner as m:
        assert m and first
'''
    found = [(v.location.row, v.fix.applicability.value if v.fix else "",
              v.fix.reason if v.fix else "")
             for v in check_source(source.encode(), "tests/test_x.py", Config())
             if v.code == "GPU005"]
    twice = ("the runner is entered later (line {line}): a with-statement around its "
             "construction would enter it twice")
    assert found == [(10, "none", twice.format(line=12)),
                     (17, "none", twice.format(line=18)),
                     (23, "none", twice.format(line=24)),
                     (28, "none", twice.format(line=29)),
                     (44, "safe", "")]

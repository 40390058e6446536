"""GPU002 fixture-yields-engine: a fixture hands out the engine itself instead of a weak
proxy.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu002_fixture_yields_engine.py``).
Elsewhere: its rewrites byte for byte in ``tests/fixtures/fix/fixture_*``.
"""

from __future__ import annotations

from rule_testing import PATH, example_tests, fix_reports, own_rules, rule_class

from lint_gpu_tests.fixing.fixloop import fix_source

RULE = rule_class("GPU002")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


FROM_HELPER = '''\
import pytest
from vllm import LLM


def _make(model):
    return LLM(model=model)


@pytest.fixture
def bound():
    engine = _make("m")
    yield engine
    del engine


@pytest.fixture
def yielded():
    yield _make("m")


@pytest.fixture(scope="module")
def returned():
    return _make("m")
'''


def test_fixtures_handing_out_an_engine_from_a_factory_helper() -> None:
    """Bound and yielded, yielded straight from the call, or returned: each is GPU002, and
    each goes with the helper's unit, whose with-blocks hand out the helper's weak proxy."""
    assert fix_reports(FROM_HELPER) == [
        (6, "GPU001", "safe", ""),
        (12, "GPU002", "safe", ""),
        (13, "GPU004", "safe", ""),
        (18, "GPU002", "safe", ""),
        (23, "GPU002", "safe", ""),
    ]
    assert fix_source(FROM_HELPER.encode(), PATH, own_rules()).new_source == b'''\
import contextlib
import weakref

import pytest
from lint_gpu_tests.runtime import VllmRunner


@contextlib.contextmanager
def _make(model):
    with VllmRunner(model=model) as runner:
        yield weakref.proxy(runner.llm)


@pytest.fixture
def bound():
    with _make("m") as engine:
        yield engine


@pytest.fixture
def yielded():
    with _make("m") as runner:
        yield runner


@pytest.fixture(scope="module")
def returned():
    with _make("m") as runner:
        yield runner
'''

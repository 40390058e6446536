"""Fixtures wider than a function that build an engine by hand: the fix enters the runner
class in the fixture, so the engine lives as long as the fixture's scope, as before. Safe
where nothing else changes; the other reasons still apply (and a scope that is not a literal,
a group of engines, ``target = "vllm"`` keep the scope's own reason).

The rewrites themselves are the ``fixture_module_scope`` and ``fixture_wide_scopes`` fix
fixtures (byte for byte); ``tests/e2e/suites/test_module_scoped_fixture.py`` and
``test_wide_fixture_variants.py`` are their proof on vLLM.
"""

from __future__ import annotations

import pytest

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config

FIXTURE = '''\
import gc

import pytest
from vllm import LLM


@pytest.fixture(scope={scope})
def llm():
    llm = LLM("m")
    yield llm
    del llm
    gc.collect()


def test_x(llm):
    {use}
'''


def gpu001(source: str, config: Config | None = None) -> tuple[str, str, str]:
    """``(applicability, title, reason)`` of the GPU001 fix of ``source``."""
    (found,) = [v for v in check_source(source.encode(), "tests/test_case.py",
                                        config or Config()) if v.code == "GPU001"]
    assert found.fix is not None
    return found.fix.applicability.value, found.fix.title, found.fix.reason


@pytest.mark.parametrize("scope", ['"class"', '"module"', '"package"', '"session"'])
def test_a_literal_wide_scope_is_safe_over_the_runner_class(scope: str) -> None:
    source = FIXTURE.format(scope=scope, use="assert llm.generate(['a'])")
    assert gpu001(source) == ("safe", "Wrap in `with VllmRunner(...)`", "")


def test_a_scope_that_is_not_a_literal_stays_unsafe() -> None:
    source = FIXTURE.format(scope="SCOPE", use="assert llm.generate(['a'])")
    assert gpu001(source) == (
        "unsafe", "Wrap in `with VllmRunner(...)`",
        "a dynamic-scoped fixture: the engine's lifetime follows the fixture's scope and the "
        "runner must allow it")


def test_target_vllm_requests_vllms_fixture_and_stays_unsafe() -> None:
    source = FIXTURE.format(scope='"module"', use="assert llm.generate(['a'])")
    assert gpu001(source, Config(target="vllm")) == (
        "unsafe", "Wrap in `with vllm_runner(...)`",
        "a module-scoped fixture: the engine's lifetime follows the fixture's scope and the "
        "runner must allow it")


def test_an_identity_check_of_a_consumer_stays_unsafe() -> None:
    source = FIXTURE.format(scope='"module"', use="assert llm is not object()")
    applicability, _, reason = gpu001(source)
    assert applicability == "unsafe"
    assert "runner must allow it" not in reason and "identity" in reason


def test_a_consumer_comparing_with_none_is_no_identity_check() -> None:
    """A weak proxy is no more ``None`` than the engine: the consumer's check answers the
    same after the fix."""
    source = FIXTURE.format(scope='"module"', use="assert llm is not None")
    assert gpu001(source)[0] == "safe"


def test_engines_of_a_group_in_a_module_fixture_stay_unsafe() -> None:
    source = '''\
import pytest
from vllm import LLM


@pytest.fixture(scope="module")
def llms():
    llms = [LLM("m", seed=s) for s in range(2)]
    yield llms
    for llm in llms:
        llm.llm_engine.engine_core.shutdown()
'''
    applicability, _, reason = gpu001(source)
    assert applicability == "unsafe"
    assert reason.endswith("a module-scoped fixture: the engine's lifetime follows the "
                           "fixture's scope and the runner must allow it")

"""``target = "vllm"`` modules of the corpus: the ``vllm_runner`` fixture is vLLM's own (session
scoped, handing out its ``VllmRunner`` class), restated in ``tests/e2e/vllm_test_runner.py``."""

import pytest
from vllm_test_runner import VllmTestRunner


@pytest.fixture(scope="session")
def vllm_runner():
    return VllmTestRunner

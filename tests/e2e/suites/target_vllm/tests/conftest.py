"""vLLM's ``tests/conftest.py`` as this folder's modules import its runner class
(``from tests.conftest import VllmRunner``, as vLLM's own tests do): the class is restated in
``tests/e2e/vllm_test_runner.py``."""

from vllm_test_runner import VllmTestRunner as VllmRunner

__all__ = ["VllmRunner"]

"""A factory method under `target = "vllm"`: a method of the test class that builds an engine
and returns it, called on `self` by tests that tear the engine down by hand. The fix makes the
method a context manager over vLLM's `VllmRunner`, imported from the project's
tests/conftest.py (its callers are not given the `vllm_runner` fixture), the runner's
differing defaults spelled out, and every call a `with` block."""

import gc
import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


class TestFactoryMethodVllm:
    def _make_llm(self, max_num_seqs):
        return LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32",
                   max_num_seqs=max_num_seqs)

    def test_configuration(self):
        llm = self._make_llm(4)
        config = llm.llm_engine.vllm_config
        resolved = (config.scheduler_config.max_num_seqs, config.model_config.max_model_len)
        params = SamplingParams(temperature=0.0, max_tokens=5)
        texts = [o.outputs[0].text for o in llm.generate(PROMPTS, params)]
        del llm
        gc.collect()
        assert resolved == (4, 128) and len(texts) == 2

    def test_shut_down_in_finally(self):
        llm = self._make_llm(2)
        try:
            params = SamplingParams(temperature=0.0, max_tokens=3)
            assert llm.generate(PROMPTS[:1], params)
        finally:
            llm.llm_engine.engine_core.shutdown()

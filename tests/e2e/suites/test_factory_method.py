"""Factory methods: a method of the test class, or of a base class of the module, that builds
an engine and returns it, called on `self` (or on the class: `TestOwnMethod._make_llm(self,
...)`; or on an instance: `maker._make_llm(...)`) by the tests that tear the engine down by
hand (in a `try/finally`, or with `del` and `gc.collect()`). The fix makes the method a context manager
over the runner and every call of it a `with` block: safe in a run over the tree, where no
other module imports this one."""

import gc
import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


def _texts(llm, prompts, max_tokens=6):
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return [o.outputs[0].text for o in llm.generate(prompts, params)]


class EngineTests:
    max_model_len = 256

    def build(self, seed=0):
        llm = LLM(MODEL, max_model_len=self.max_model_len, enforce_eager=True,
                  dtype="float32", seed=seed)
        return llm


class TestInherited(EngineTests):
    max_model_len = 128

    def test_shut_down_in_finally(self):
        llm = self.build()
        try:
            assert len(_texts(llm, PROMPTS)) == 2
            resolved = llm.llm_engine.vllm_config.model_config.max_model_len
        finally:
            llm.llm_engine.engine_core.shutdown()
        assert resolved == 128

    def test_deleted_by_hand(self):
        llm = self.build(seed=1)
        texts = _texts(llm, PROMPTS[:1], max_tokens=4)
        del llm
        gc.collect()
        assert texts


class TestOwnMethod:
    def _make_llm(self, max_num_seqs):
        return LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32",
                   max_num_seqs=max_num_seqs)

    def test_max_num_seqs(self):
        llm = self._make_llm(4)
        resolved = llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
        assert _texts(llm, PROMPTS)
        del llm
        gc.collect()
        assert resolved == 4

    def test_called_on_the_class(self):
        llm = TestOwnMethod._make_llm(self, 2)
        texts = _texts(llm, PROMPTS[1:], max_tokens=4)
        resolved = llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
        del llm
        gc.collect()
        assert texts and resolved == 2


def test_called_on_an_instance():
    maker = TestOwnMethod()
    llm = maker._make_llm(3)
    resolved = llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
    texts = _texts(llm, PROMPTS, max_tokens=3)
    del llm
    gc.collect()
    assert resolved == 3 and len(texts) == 2

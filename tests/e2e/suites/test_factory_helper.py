"""Factory helpers that build an engine and return it, shared by several tests: the shape of
vLLM's LoRA tests (`setup_engine()` called by each test, torn down by hand, in a `try/finally`
or behind a guard). The fix makes each helper a context manager over the runner and every call
a `with` block: safe for the private helper, and for the public one too in a run over the
tree, where no other module imports this one (checked alone, its fix is unsafe: another module
could import it)."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


def _engine(seed=0, max_model_len=256):
    return LLM(MODEL, max_model_len=max_model_len, enforce_eager=True, dtype="float32",
               seed=seed)


def build_engine(max_num_seqs):
    llm = LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32",
              max_num_seqs=max_num_seqs)
    llm.generate(["warm up"], SamplingParams(temperature=0.0, max_tokens=1))
    return llm


def _texts(llm, prompts, max_tokens=6):
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return [o.outputs[0].text for o in llm.generate(prompts, params)]


def test_shut_down_in_finally():
    llm = _engine()
    try:
        assert len(_texts(llm, PROMPTS)) == 2
    finally:
        llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()


def test_guarded_shutdown():
    llm = None
    try:
        llm = _engine(seed=1)
        texts = _texts(llm, PROMPTS, max_tokens=4)
    finally:
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
    assert len(texts) == 2


@pytest.mark.parametrize("max_model_len", [128])
def test_deleted_by_hand(max_model_len):
    llm = _engine(max_model_len=max_model_len)
    resolved = llm.llm_engine.vllm_config.model_config.max_model_len
    del llm
    gc.collect()
    assert resolved == max_model_len


def test_public_factory_warms_up():
    llm = build_engine(4)
    texts = _texts(llm, PROMPTS[:1])
    del llm
    gc.collect()
    assert texts

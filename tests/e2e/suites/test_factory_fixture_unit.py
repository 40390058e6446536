"""Fixtures that hand out a factory of engines and keep none of them: each test that calls the
factory cleans its engine up by hand (`del` and `gc.collect()`, a `try/finally` shutdown), and
a fixture hands on the engine it gets. The fix makes each factory a context manager over the
runner and every call a `with` block, the cleanup gone: safe in a run over the tree, where no
other module imports this one."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


@pytest.fixture
def make_llm():
    def _make(**overrides):
        return LLM(MODEL, enforce_eager=True, dtype="float32", **overrides)

    return _make


@pytest.fixture(name="build")
def build_fixture():
    def _build(seed):
        llm = LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32", seed=seed)
        return llm

    return _build


@pytest.fixture
def small_llm(make_llm):
    return make_llm(max_model_len=128, max_num_seqs=2)


def _texts(llm, max_tokens=6):
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return [o.outputs[0].text for o in llm.generate(PROMPTS, params)]


def test_deleted_by_hand(make_llm):
    llm = make_llm(max_model_len=256, seed=0)
    texts = _texts(llm)
    resolved = llm.llm_engine.vllm_config.model_config.max_model_len
    del llm
    gc.collect()
    assert len(texts) == 2
    assert resolved == 256


def test_shut_down_in_finally(build):
    llm = build(1)
    try:
        assert len(_texts(llm, max_tokens=4)) == 2
    finally:
        llm.llm_engine.engine_core.shutdown()


def test_from_the_fixture(small_llm):
    assert small_llm.llm_engine.vllm_config.scheduler_config.max_num_seqs == 2
    assert len(_texts(small_llm)) == 2

"""The most common pre-migration fixture in vLLM's suite: it already yields a proxy."""

import os
import weakref

import pytest
from vllm import LLM, SamplingParams
from vllm.distributed import cleanup_dist_env_and_memory

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


@pytest.fixture
def llm():
    llm = LLM(model=MODEL, max_model_len=192, enforce_eager=True, dtype="float32", seed=1)

    yield weakref.proxy(llm)

    del llm
    cleanup_dist_env_and_memory()


def test_uses_the_fixture(llm):
    outputs = llm.generate(["hello my name is"], GREEDY)
    assert len(outputs[0].outputs[0].token_ids) == 8


@pytest.fixture(scope="module")
def shared_llm():
    llm = LLM(model=MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=2,
              max_num_batched_tokens=1024)
    yield weakref.proxy(llm)
    del llm
    cleanup_dist_env_and_memory()


def test_shared_first(shared_llm):
    assert shared_llm.generate(["the capital of france is"], GREEDY)


def test_shared_second(shared_llm):
    outputs = shared_llm.generate(["the future of ai is", "hello"], GREEDY)
    assert len(outputs) == 2

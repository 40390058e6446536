"""Fixtures of an example GPU test suite, written the way suites are before migration."""

import gc

import pytest
import torch
from vllm import LLM

MODEL = "facebook/opt-125m"


@pytest.fixture
def llm(request):
    engine = LLM(model=MODEL, enforce_eager=True, tokenizer=MODEL)
    request.addfinalizer(engine.llm_engine.engine_core.shutdown)
    yield engine
    del engine
    gc.collect()
    torch.cuda.empty_cache()


@pytest.fixture
def chat_llm(vllm_runner):
    with vllm_runner(MODEL, enforce_eager=True) as runner:
        yield runner.llm

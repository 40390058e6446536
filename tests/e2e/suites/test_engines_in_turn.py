"""One name bound to engines in turn: a construction expected to fail inside
`pytest.raises`, then the same name bound to an engine that builds; two engines deleted in
turn; and a bare runner deleted while a thread still generates with it."""

import gc
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=5)


def test_refused_then_built():
    with pytest.raises(ValueError):
        # without chunked prefill a batch must hold the longest prompt
        llm = LLM(MODEL, max_num_batched_tokens=128, max_model_len=256,
                  enable_chunked_prefill=False, enforce_eager=True, dtype="float32")

    llm = LLM(MODEL, max_num_batched_tokens=256, max_model_len=256,
              enable_chunked_prefill=False, enforce_eager=True, dtype="float32", seed=5)
    outputs = llm.generate(["the weather today is"] * 3, GREEDY)
    assert len({o.outputs[0].text for o in outputs}) == 1


def test_deleted_in_turn():
    llm = LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32", seed=6)
    first = llm.generate(["one two three"], GREEDY)[0].outputs[0].text
    del llm
    gc.collect()

    llm = LLM(MODEL, max_model_len=96, enforce_eager=True, dtype="float32", seed=6)
    second = llm.generate(["one two three"], GREEDY)[0].outputs[0].text
    del llm
    gc.collect()

    assert first == second


def test_deleted_while_a_thread_generates(vllm_runner):
    model = vllm_runner(MODEL, max_model_len=128, enforce_eager=True, dtype="float32", seed=7)
    main = model.llm.generate(["a b c"], GREEDY)
    with ThreadPoolExecutor(max_workers=1) as executor:
        future = executor.submit(model.llm.generate, ["a b c"], GREEDY)
        del model
        gc.collect()
        threaded = future.result()
    assert main[0].outputs[0].text == threaded[0].outputs[0].text

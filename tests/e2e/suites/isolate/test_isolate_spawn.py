"""Tests fixed by running each in a new process (fix-strategy isolate), as vLLM migrated its
cudagraph tests: the cleanup goes, the construction stays, the child's exit frees the engine."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams
from vllm.distributed import cleanup_dist_env_and_memory

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]
# Engines a test kept "for later": nothing else in the module reads it, so in a child it
# changes nothing the rest of the module sees.
_KEPT = []


@pytest.mark.parametrize("max_tokens", [6])
def test_cleanup_and_finalizer(max_tokens, request):
    llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=0)
    request.addfinalizer(llm.llm_engine.engine_core.shutdown)
    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=max_tokens))
    assert len(outputs) == 2
    del llm
    gc.collect()
    cleanup_dist_env_and_memory()


def test_group_teardown_loop():
    # Two engines alive together; the loop that shuts them down goes with the isolation.
    llms = [LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32", seed=s,
                gpu_memory_utilization=0.4)
            for s in (2, 3)]
    outputs = [llm.generate(PROMPTS[:1], SamplingParams(temperature=0.0, max_tokens=4))
               for llm in llms]
    assert [len(o) for o in outputs] == [1, 1]
    for llm in llms:
        llm.llm_engine.engine_core.shutdown()


def test_engine_kept_in_module_state():
    # The runner strategy has no fix: the engine escapes into module state and outlives
    # any with-block; in its own process it dies with the child.
    _KEPT.append(LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32", seed=1))
    outputs = _KEPT[-1].generate(PROMPTS[:1], SamplingParams(temperature=0.0, max_tokens=5))
    assert outputs[0].outputs[0].text


def test_starts_after_the_kept_engine():
    # No engine of its own: before the fix, the engine `_KEPT` holds is still alive here.
    assert PROMPTS

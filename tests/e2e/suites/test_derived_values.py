"""Values derived from the engine that are used after the last direct use of its name."""

import functools
import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def test_engine_kept_in_containers():
    box = {"engine": LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32")}
    pair = (box["engine"], "tag")
    engines = [pair[0]]
    engine, tag = pair
    assert tag == "tag"
    texts = [o.outputs[0].text for o in engines[0].generate(PROMPTS, GREEDY)]
    assert len(texts) == 2


def test_lazy_generator_partial_and_bound_method():
    llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=5)
    lazy = (llm.generate([p], GREEDY)[0].outputs[0].text for p in PROMPTS)
    generate = functools.partial(llm.generate, sampling_params=GREEDY)
    bound = llm.generate
    first = list(lazy)
    second = [o.outputs[0].text for o in generate(PROMPTS)]
    third = [o.outputs[0].text for o in bound(PROMPTS, GREEDY)]
    assert first == second == third

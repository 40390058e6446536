"""A helper class that owns an engine, shared by two tests through a module fixture: the
shape of vLLM's LoRA suite before its hand migration (issue 11, shape 4)."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams
from vllm.distributed import cleanup_dist_env_and_memory

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


class GreedyChecker:
    """Builds one engine in its constructor; two methods use it, `close()` frees it."""

    def __init__(self, seed):
        self.seed = seed
        self.llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32", seed=seed)

    def texts(self, prompts, max_tokens):
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        return [o.outputs[0].text for o in self.llm.generate(prompts, params)]

    def token_ids(self, prompt):
        return self.llm.get_tokenizer().encode(prompt)

    def close(self):
        del self.llm
        gc.collect()
        cleanup_dist_env_and_memory()


@pytest.fixture(scope="module")
def checker():
    owner = GreedyChecker(seed=0)
    yield owner
    owner.close()


def test_greedy_is_deterministic(checker):
    first = checker.texts(PROMPTS, 6)
    assert first == checker.texts(PROMPTS, 6)


def test_tokenizer_sees_the_prompt(checker):
    assert len(checker.token_ids(PROMPTS[0])) > 0

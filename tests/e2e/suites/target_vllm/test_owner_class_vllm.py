"""A helper class that builds and holds an engine, with a hand ``close()``, under
``target = "vllm"``: the fix makes it a context manager over vLLM's ``VllmRunner``, imported
from the project's tests/conftest.py as vLLM's tests import it, with the runner's differing
defaults spelled out. One test builds its own instance; a module-scoped fixture shares another
with two tests."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


class Generator:
    """Builds one engine in its constructor; `close()` frees it."""

    def __init__(self, seed, max_tokens=6):
        self.max_tokens = max_tokens
        self.llm = LLM(MODEL, max_model_len=192, enforce_eager=True, dtype="float32",
                       seed=seed)

    def texts(self, prompts):
        params = SamplingParams(temperature=0.0, max_tokens=self.max_tokens)
        return [o.outputs[0].text for o in self.llm.generate(prompts, params)]

    def vocab_size(self):
        return len(self.llm.get_tokenizer())

    def close(self):
        del self.llm
        gc.collect()


def test_own_generator():
    generator = Generator(seed=4)
    texts = generator.texts(["hello my name is", "the capital of france is"])
    generator.close()
    assert len(texts) == 2


@pytest.fixture(scope="module")
def shared():
    generator = Generator(seed=5, max_tokens=4)
    yield generator
    generator.close()


def test_shared_texts(shared):
    assert len(shared.texts(["the future of ai is"])) == 1


def test_shared_vocab(shared):
    assert shared.vocab_size() > 0

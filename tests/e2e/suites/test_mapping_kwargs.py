"""The model in a mapping (issue 11, shape 2): ``LLM(**ENGINES[name])`` with the bundled runner,
which takes ``model=`` (and passes ``tokenizer=`` on) as ``LLM`` does."""

import gc
import os

import pytest
from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)
ENGINES = {
    "small": {"model": MODEL, "tokenizer": MODEL, "max_model_len": 192, "enforce_eager": True,
              "dtype": "float32", "seed": 4},
}


@pytest.mark.parametrize("name", ["small"])
def test_table_entry(name):
    llm = LLM(**ENGINES[name])
    outputs = llm.generate(["the future of ai is"], GREEDY)
    del llm
    gc.collect()
    assert len(outputs[0].outputs[0].token_ids) == 6


def test_starts_after_the_mapping_engine():
    assert True

"""A test of the conftest's fixture that hands on the factory's engine, and a test class
calling the factory with its own settings."""

import gc

from vllm import SamplingParams


def test_from_the_fixture(small_llm):
    assert small_llm.llm_engine.vllm_config.scheduler_config.max_num_seqs == 2
    params = SamplingParams(temperature=0.0, max_tokens=5)
    assert len(small_llm.generate(["the capital of france is"], params)) == 1


class TestSeeded:
    def test_seeded(self, make_llm):
        llm = make_llm(max_model_len=128, seed=7)
        assert llm.llm_engine.vllm_config.model_config.seed == 7
        del llm
        gc.collect()

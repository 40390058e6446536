"""Hand-managed on purpose, run by ``test_leak_confirmed_e2e.py`` with
``--gpu-leak-report-file``: two of its three tests leave an engine alive, the third
builds none in this run (its engine is behind a switch that stays off)."""

import os

from conftest import KWARGS, MODEL
from vllm import LLM, SamplingParams

PARAMS = SamplingParams(max_tokens=2, temperature=0.0)


def test_a_fails_holding_its_engine():
    os.environ["VLLM_LEAK_SUITE_MARK"] = "1"  # GPU008: a leaked engine does not confirm it
    llm = LLM(MODEL, **KWARGS)
    assert llm.generate(["hello my name is"], PARAMS)[0].outputs[0].text == "?"


def test_b_uses_the_shared_engine(shared_llm):
    assert len(shared_llm.generate(["the capital of"], PARAMS)[0].outputs[0].token_ids) == 2


def test_c_builds_no_engine_here():
    if os.environ.get("LEAK_SUITE_BUILD_ENGINE"):
        llm = LLM(MODEL, **KWARGS)
        assert llm

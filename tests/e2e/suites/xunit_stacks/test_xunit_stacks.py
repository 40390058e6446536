"""Engines xunit set-ups store and their teardowns clean up by hand, beyond a class's set-up
building its own: a module's `setup_module` storing the engine in a global (shared by the
module's tests, deleted in `teardown_module`), and a class's `setup_class` getting its engine
from a helper of the sibling module (`stack_engine_helpers.py`). The fix enters each engine's
runner on an `ExitStack` in the set-up (a global stack for the module's) and closes it where
the teardown's cleanup began: each engine lives exactly as long as before."""

import gc

from vllm import LLM, SamplingParams

from stack_engine_helpers import MODEL, build_engine

GREEDY = SamplingParams(temperature=0.0, max_tokens=6)
llm = None


def setup_module():
    global llm
    llm = LLM(MODEL, max_model_len=208, enforce_eager=True, dtype="float32", seed=5)


def teardown_module():
    global llm
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()


def test_module_engine_generates():
    outputs = llm.generate(["hello my name is", "the capital of france is"], GREEDY)
    assert [len(o.outputs[0].token_ids) for o in outputs] == [6, 6]


def test_module_engine_is_shared():
    assert llm.llm_engine.vllm_config.model_config.max_model_len == 208


class TestHelperEngine:
    @classmethod
    def setup_class(cls):
        cls.engine = build_engine(max_model_len=176, seed=3)

    @classmethod
    def teardown_class(cls):
        del cls.engine
        gc.collect()

    def test_helper_engine_generates(self):
        text = self.engine.generate(["the future of ai is"], GREEDY)[0].outputs[0].text
        assert text

    def test_helper_engine_config(self):
        assert self.engine.llm_engine.vllm_config.model_config.max_model_len == 176

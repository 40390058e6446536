"""Engines an xunit set-up stores on its class, shared by the class's tests and cleaned up
by hand in the paired teardown: a pytest class (`setup_class`/`teardown_class`) and a
`unittest.TestCase` (`setUpClass`/`tearDownClass`). The fix enters the runner class on an
`ExitStack` in the set-up, the attribute bound to the engine's proxy, and the teardown
closes the stack where its cleanup began: the engine lives exactly as long as before. A last
class has no teardown: its engine lives until the session ends, and the fix adds the
teardown that closes the stack when the class's tests are done."""

import gc
import os
import unittest

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=6)


class TestClassEngine:
    @classmethod
    def setup_class(cls):
        cls.llm = LLM(MODEL, max_model_len=224, enforce_eager=True, dtype="float32", seed=8)
        cls.prompts = ["hello my name is", "the capital of france is"]

    @classmethod
    def teardown_class(cls):
        cls.llm.llm_engine.engine_core.shutdown()
        del cls.llm
        gc.collect()
        cls.prompts = None

    def test_class_engine_generates(self):
        outputs = self.llm.generate(self.prompts, GREEDY)
        assert len(outputs) == 2

    def test_class_engine_is_shared(self):
        config = self.llm.llm_engine.vllm_config.model_config
        assert config.max_model_len == 224


class TestCaseEngine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = LLM(MODEL, max_model_len=160, enforce_eager=True, dtype="float32")

    @classmethod
    def tearDownClass(cls):
        del cls.engine
        gc.collect()

    def test_case_engine_generates(self):
        text = self.engine.generate(["the future of ai is"], GREEDY)[0].outputs[0].text
        self.assertTrue(text)


class TestNoTeardownEngine:
    """No teardown: the engine lives until the session ends; the fix adds the teardown."""

    @classmethod
    def setup_class(cls):
        cls.llm = LLM(MODEL, max_model_len=192, enforce_eager=True, dtype="float32", seed=9)

    def test_engine_without_teardown_generates(self):
        outputs = self.llm.generate(["hello my name is"], GREEDY)
        assert len(outputs[0].outputs[0].token_ids) == 6

"""An engine built before a `try` whose `finally` shuts it down behind a guard (`if llm is not
None:`), the test itself checking the engine against `None`: comparisons with `None` answer
the same for the weak proxy the fix binds, so the wrap is safe and the guarded shutdown goes."""

import os

from vllm import LLM, SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
PROMPTS = ["hello my name is", "the capital of france is"]


def test_guarded_shutdown_after_a_none_check():
    llm = LLM(MODEL, max_model_len=128, enforce_eager=True, dtype="float32", seed=3)
    try:
        assert llm is not None
        params = SamplingParams(temperature=0.0, max_tokens=5)
        texts = [o.outputs[0].text for o in llm.generate(PROMPTS, params)]
        assert len(texts) == 2
    finally:
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()

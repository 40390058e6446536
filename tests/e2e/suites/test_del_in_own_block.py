"""`del` of the runner inside its own with-block (issue 12): the with-statement holds the
runner until its `__exit__`, so the `del` frees nothing; the safe fix removes it."""

import os

from vllm import SamplingParams

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


def test_del_runner_inside_its_block(vllm_runner):
    with vllm_runner(MODEL, max_model_len=256, enforce_eager=True, dtype="float32",
                     seed=0) as vllm_model:
        outputs = vllm_model.llm.generate(["hello my name is"],
                                          SamplingParams(temperature=0.0, max_tokens=6))
        del vllm_model
        assert len(outputs) == 1

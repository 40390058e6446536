"""A bare construction (building the engine is what is under test) as the whole body of a
with-statement, with `model=` and `tokenizer=` (issue 26): the fix joins the two with-headers
(ruff's SIM117) and keeps both keywords, which the bundled runner hands to `LLM` as written."""

import contextlib
import os

from vllm import LLM

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]


def test_builds_under_a_context():
    with contextlib.nullcontext():
        LLM(
            model=MODEL,
            tokenizer=MODEL,
            max_model_len=128,
            enforce_eager=True,
            dtype="float32",
        )


def test_starts_after_the_bare_engine():
    assert MODEL

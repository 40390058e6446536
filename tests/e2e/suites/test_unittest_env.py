"""GPU008 in a `unittest.TestCase` (issue 25): `setUp` writes a vLLM setting into
`os.environ` with no `tearDown` restoring it, so the setting stays for every later test of
the session. The safe fix opens a `MonkeyPatch` in `setUp`, registers its `undo` with
`self.addCleanup` and sets the variable through it: the test's engine still gets the
setting (its KV cache bytes, which vLLM's CPU platform reads from `VLLM_CPU_KVCACHE_SPACE`),
and the test case restores the variable after the test."""

import os
import unittest

from vllm import SamplingParams

from lint_gpu_tests.runtime import VllmRunner

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
GIB = 1 << 30


class TestBiggerCache(unittest.TestCase):
    def setUp(self):
        self.prompt = "hello my name is"
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = "2"

    def test_engine_gets_the_setting(self):
        with VllmRunner(MODEL, max_model_len=256, enforce_eager=True, dtype="float32",
                        seed=21) as runner:
            cache = runner.llm.llm_engine.vllm_config.cache_config
            self.assertEqual(cache.kv_cache_memory_bytes, 2 * GIB)
            outputs = runner.llm.generate([self.prompt],
                                          SamplingParams(temperature=0.0, max_tokens=4))
            self.assertEqual(len(outputs), 1)

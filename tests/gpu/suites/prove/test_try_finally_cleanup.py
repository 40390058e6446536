"""A parametrized test that builds an engine under ``monkeypatch``'s environment, reads what it
resolved and tears it down in ``finally`` with ``del`` and ``cleanup_dist_env_and_memory()``,
as plugin suites' configuration tests do; one engine a case.

Part of the suite ``gpu-test-lint prove`` ran on the H200 (``docs/gpu-runtime.md``).
"""

import os

import pytest
from vllm import LLM
from vllm.distributed import cleanup_dist_env_and_memory

MODEL = os.environ["GPU_TINY_MODEL"]


@pytest.mark.parametrize("max_num_seqs", [8, 32])
def test_max_num_seqs_is_kept(monkeypatch, max_num_seqs):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    llm = LLM(model=MODEL, dtype="bfloat16", max_model_len=128, enforce_eager=True,
              gpu_memory_utilization=0.1, max_num_seqs=max_num_seqs)
    try:
        resolved = llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
    finally:
        del llm
        cleanup_dist_env_and_memory()
    assert resolved == max_num_seqs

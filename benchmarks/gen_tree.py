"""Write a synthetic pytest tree for the benchmark: ``python gen_tree.py DIR N``.

N test files in directories of 100, deterministic. The mix follows what vLLM-style suites
hold: 80 % kernel/unit tests with no engine (no prefilter needle), 10 % tests that already use
``with vllm_runner(...)`` (needle present, no violation), 10 % tests that build ``LLM`` by hand
and clean up manually (GPU001 and GPU004 violations). Each file is 25 to 45 lines.
"""

from __future__ import annotations

import sys
from pathlib import Path

KERNEL = '''\
import pytest
import torch

from some_project.ops import fused_add_{i}, reference_add


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("size", [{size}, {size2}])
def test_fused_add_{i}(dtype, size):
    a = torch.randn(size, dtype=dtype)
    b = torch.randn(size, dtype=dtype)
    out = fused_add_{i}(a, b)
    torch.testing.assert_close(out, reference_add(a, b))


def test_fused_add_{i}_empty():
    a = torch.empty(0)
    assert fused_add_{i}(a, a).numel() == 0


class TestShapes{i}:
    def test_broadcast(self):
        a = torch.ones(4, 1)
        b = torch.ones(1, 4)
        assert fused_add_{i}(a, b).shape == (4, 4)

    def test_cache_clear(self):
        torch.cuda.empty_cache()
'''

MANAGED = '''\
import weakref

import pytest

MODELS = ["facebook/opt-125m", "Qwen/Qwen3-0.6B"]


@pytest.mark.parametrize("model", MODELS)
def test_generate_{i}(vllm_runner, model):
    with vllm_runner(model, enforce_eager=True, max_model_len={size}) as runner:
        llm = weakref.proxy(runner.llm)
        outputs = llm.generate(["Hello, my name is"] * 4)
        assert len(outputs) == 4


@pytest.fixture
def text_llm_{i}(vllm_runner):
    with vllm_runner("facebook/opt-125m", enforce_eager=True) as runner:
        yield weakref.proxy(runner.llm)


def test_chat_{i}(text_llm_{i}):
    out = text_llm_{i}.chat([{{"role": "user", "content": "hi"}}])
    assert out
'''

HAND = '''\
import gc

import pytest
import torch
from vllm import LLM, SamplingParams
from vllm.distributed import cleanup_dist_env_and_memory


@pytest.mark.parametrize("temperature", [0.0, 0.{size2}])
def test_sampling_{i}(temperature):
    llm = LLM("facebook/opt-125m", enforce_eager=True, max_model_len={size})
    params = SamplingParams(temperature=temperature, max_tokens=8)
    outputs = llm.generate(["The capital of France is"], params)
    assert outputs[0].outputs[0].text
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    cleanup_dist_env_and_memory()


def test_tokenizer_{i}():
    llm = LLM("facebook/opt-125m")
    tok = llm.get_tokenizer()
    assert tok.encode("hi")
'''


def write_tree(root: Path, count: int) -> None:
    """Write ``count`` test files under ``root`` (created if missing)."""
    for i in range(count):
        directory = root / f"pkg_{i // 100:04d}"
        directory.mkdir(parents=True, exist_ok=True)
        kind = i % 10
        template = HAND if kind == 3 else MANAGED if kind == 7 else KERNEL
        text = template.format(i=i, size=64 + i % 512, size2=1 + i % 9)
        (directory / f"test_mod_{i:05d}.py").write_text(text)


if __name__ == "__main__":
    write_tree(Path(sys.argv[1]), int(sys.argv[2]))

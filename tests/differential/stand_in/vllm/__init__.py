"""Stand-in for ``vllm`` in the differential generator's child pytest sessions (never
installed; put first on ``sys.path`` by :mod:`tests.differential.harness`).

``LLM(model, **kwargs)`` takes the model as its one positional argument and every other
argument by keyword, like vLLM's, and raises ``TypeError`` on a keyword it does not know
(vLLM's ``EngineArgs`` does). Its resolved configuration, :attr:`LLM.config`, is every
argument with :data:`DEFAULTS` filled in, plus the ``VLLM_*`` variables of ``os.environ`` at
construction that differ from those at the test's start (:func:`set_env_base`; an engine
reads its environment when it is built, and a variable an earlier test leaked is that test's
doing, which the GPU008 fix is meant to change). ``max_model_len`` below
:data:`MIN_MODEL_LEN` raises ``ValueError``, as an engine that cannot fit one block does.

``generate`` returns texts computed from the prompt, the sampling parameters and the
configuration (a rewrite that changes any of them changes the texts). After
``llm.shutdown()`` or ``llm.llm_engine.engine_core.shutdown()`` every call raises
``RuntimeError``.

Like vLLM's client, an engine keeps a reference cycle (its ``llm_engine`` points back at it),
so ``del llm`` alone frees it only when the garbage collector runs. Every engine is kept in a
registry of weak references: :func:`live_engines` counts those still referenced and not shut
down, and :func:`forget_engines` drops the registry (between two modules of one session).
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
from typing import Any

__all__ = [
    "DEFAULTS",
    "LLM",
    "RequestOutput",
    "SamplingParams",
    "forget_engines",
    "live_engines",
    "set_env_base",
]

#: Every keyword argument ``LLM`` takes, with its default.
DEFAULTS: dict[str, Any] = {
    "tokenizer": None,
    "tokenizer_mode": "auto",
    "skip_tokenizer_init": False,
    "trust_remote_code": False,
    "tensor_parallel_size": 1,
    "dtype": "auto",
    "quantization": None,
    "revision": None,
    "seed": 0,
    "gpu_memory_utilization": 0.9,
    "swap_space": 4,
    "cpu_offload_gb": 0,
    "enforce_eager": False,
    "compilation_config": None,
    "max_model_len": None,
    "max_num_seqs": None,
    "max_num_batched_tokens": None,
    "block_size": None,
    "enable_chunked_prefill": None,
    "enable_prefix_caching": None,
    "kv_cache_dtype": "auto",
    "load_format": "auto",
    "disable_log_stats": True,
    "distributed_executor_backend": None,
    "enable_lora": False,
    "max_loras": 1,
}
MIN_MODEL_LEN = 8

_REGISTRY: list[weakref.ref[LLM]] = []
_ENV_BASE: dict[str, str] = {}


def set_env_base() -> None:
    """Take ``os.environ`` as it is now as the base an engine's ``env`` is read against (at
    each test's start: a variable an earlier test left set is not this test's)."""
    _ENV_BASE.clear()
    _ENV_BASE.update(os.environ)


def live_engines() -> int:
    """Engines still referenced and not shut down."""
    return sum(1 for ref in _REGISTRY if (llm := ref()) is not None and not llm.closed)


def forget_engines() -> None:
    """Stop counting every engine built so far."""
    _REGISTRY.clear()


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


class SamplingParams:
    """``SamplingParams(temperature=1.0, max_tokens=16, seed=None, **others)``."""

    def __init__(self, temperature: float = 1.0, max_tokens: int = 16,
                 seed: int | None = None, **others: Any) -> None:
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.others = others

    def key(self) -> dict[str, Any]:
        """The parameters, as a plain dict."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens,
                "seed": self.seed, **self.others}


class CompletionOutput:
    """One completion: ``text`` and ``token_ids``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.token_ids = [ord(c) % 97 for c in text]


class RequestOutput:
    """One prompt's result: ``prompt`` and ``outputs`` (one :class:`CompletionOutput`)."""

    def __init__(self, prompt: str, text: str) -> None:
        self.prompt = prompt
        self.outputs = [CompletionOutput(text)]


class Tokenizer:
    """A character tokenizer."""

    def encode(self, text: str) -> list[int]:
        """One id per character."""
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        """The inverse of :meth:`encode`."""
        return "".join(chr(i) for i in ids)


class _Config:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class EngineCoreClient:
    """``shutdown(timeout=None)`` ends the engine."""

    def __init__(self, llm: LLM) -> None:
        self._llm = weakref.ref(llm)

    def shutdown(self, timeout: float | None = None) -> None:
        """Mark the engine shut down (again: nothing)."""
        llm = self._llm()
        if llm is not None:
            llm.closed = True


class LLMEngine:
    """``engine_core``, ``vllm_config``, ``model_config``; holds its ``LLM`` (a cycle)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.engine_core = EngineCoreClient(llm)
        config = llm.config
        self.model_config = _Config(
            model=llm.model, max_model_len=config["max_model_len"] or 2048,
            trust_remote_code=config["trust_remote_code"], dtype=config["dtype"],
            seed=config["seed"], enforce_eager=config["enforce_eager"],
            tokenizer=config["tokenizer"] or llm.model)
        self.vllm_config = _Config(
            model_config=self.model_config,
            cache_config=_Config(block_size=config["block_size"] or 16),
            scheduler_config=_Config(
                enable_chunked_prefill=bool(config["enable_chunked_prefill"]),
                max_num_batched_tokens=config["max_num_batched_tokens"] or 2048),
            compilation_config=_Config(mode=0 if config["enforce_eager"] else 3,
                                       cudagraph_capture_sizes=[]))


class LLM:
    """``LLM(model, **kwargs)``; see the module docstring.

    Raises:
        TypeError: a second positional argument or an unknown keyword.
        ValueError: ``max_model_len`` below :data:`MIN_MODEL_LEN`.
    """

    def __init__(self, model: str, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(DEFAULTS))
        if unknown:
            raise TypeError(f"LLM.__init__() got an unexpected keyword argument {unknown[0]!r}")
        max_len = kwargs.get("max_model_len")
        if max_len is not None and max_len < MIN_MODEL_LEN:
            raise ValueError(f"max_model_len {max_len} is below {MIN_MODEL_LEN}")
        self.model = model
        env = {k: v for k, v in sorted(os.environ.items())
               if k.startswith("VLLM_") and _ENV_BASE.get(k) != v}
        self.config: dict[str, Any] = {"model": model, **DEFAULTS, **kwargs, "env": env}
        self.closed = False
        self.llm_engine = LLMEngine(self)
        _REGISTRY.append(weakref.ref(self))

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("the engine has been shut down")

    def generate(self, prompts: Any, sampling_params: Any = None, **kwargs: Any
                 ) -> list[RequestOutput]:
        """One :class:`RequestOutput` per prompt (a string or a list of them).

        Raises:
            RuntimeError: the engine has been shut down.
        """
        self._check_open()
        if isinstance(prompts, str):
            prompts = [prompts]
        params = sampling_params if sampling_params is not None else SamplingParams()
        listed = params if isinstance(params, list) else [params] * len(prompts)
        config = {k: v for k, v in self.config.items() if k != "env"}
        return [RequestOutput(p, f"<{_digest(p, s.key(), config, self.config['env'])}>")
                for p, s in zip(prompts, listed, strict=True)]

    def chat(self, messages: Any, sampling_params: Any = None, **kwargs: Any
             ) -> list[RequestOutput]:
        """Generate from the messages' contents joined."""
        if messages and isinstance(messages[0], dict):
            messages = [messages]
        prompts = [" ".join(str(m.get("content", "")) for m in conv) for conv in messages]
        return self.generate(prompts, sampling_params)

    def get_tokenizer(self) -> Tokenizer:
        """A :class:`Tokenizer`.

        Raises:
            RuntimeError: the engine has been shut down.
        """
        self._check_open()
        return Tokenizer()

    def get_default_sampling_params(self) -> SamplingParams:
        """Greedy sampling."""
        return SamplingParams(temperature=0.0)

    def shutdown(self) -> None:
        """Shut the engine down."""
        self.llm_engine.engine_core.shutdown()

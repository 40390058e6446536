"""What vLLM's own test runner hands to ``LLM``, and what vLLM then resolves.

``target = "vllm"`` fixes call the ``VllmRunner`` of vLLM's ``tests/conftest.py``, which is not
installed with vLLM. This module restates, in our words, how that runner turns its arguments
into an ``LLM(...)`` call (read off vllm-project/vllm ``tests/conftest.py`` at commit
4fe45004, 2026): its first argument ``model_name`` becomes ``model=``, ``tokenizer_name``
becomes ``tokenizer=``, its own defaults are in :data:`RUNNER_DEFAULTS`, and when
``compilation_config`` is missing or falsy it passes ``{"cudagraph_capture_sizes": [4]}``.

:func:`resolve_llm_call` resolves an ``LLM(...)`` call without building an engine: it runs
vLLM's own ``LLM.__init__`` up to the ``EngineArgs`` it makes (``LLMEngine.from_engine_args``
is stopped there) and returns ``EngineArgs.create_engine_config()``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lint_gpu_tests.runtime.recorder import config_summary

__all__ = ["config_summary", "resolve_llm_call", "runner_llm_kwargs"]

#: The runner's defaults where it has its own (``default_torch_num_threads`` only sets torch
#: threads and is left out; ``swap_space`` is dropped when vLLM's EngineArgs has no such field).
RUNNER_DEFAULTS: dict[str, Any] = {
    "runner": "auto",
    "convert": "auto",
    "tokenizer_mode": "auto",
    "trust_remote_code": True,
    "seed": 0,
    "max_model_len": 1024,
    "dtype": "auto",
    "disable_log_stats": True,
    "tensor_parallel_size": 1,
    "block_size": 16,
    "enable_chunked_prefill": False,
    "swap_space": 4,
    "enforce_eager": False,
}


def runner_llm_kwargs(model_name: str, tokenizer_name: str | None = None,
                      **kwargs: Any) -> dict[str, Any]:
    """The keyword arguments vLLM's test runner passes to ``LLM`` for this runner call."""
    args = dict(RUNNER_DEFAULTS)
    for key in list(kwargs):
        if key in args:
            args[key] = kwargs.pop(key)
    kwargs.pop("default_torch_num_threads", None)
    if not kwargs.get("compilation_config", None):
        kwargs["compilation_config"] = {"cudagraph_capture_sizes": [4]}
    from vllm.engine.arg_utils import EngineArgs

    if "swap_space" not in {f.name for f in dataclasses.fields(EngineArgs)}:
        args.pop("swap_space")
    return {"model": model_name, "tokenizer": tokenizer_name, **args, **kwargs}


class _Stop(Exception):
    def __init__(self, engine_args: Any) -> None:
        super().__init__("stopped before the engine was built")
        self.engine_args = engine_args


def resolve_llm_call(*args: Any, **kwargs: Any) -> Any:
    """The ``VllmConfig`` vLLM resolves for ``LLM(*args, **kwargs)``, no engine built.

    Raises:
        whatever vLLM raises for invalid arguments.
    """
    import vllm
    import vllm.entrypoints.llm as llm_module

    engine_cls = llm_module.LLMEngine
    original = engine_cls.from_engine_args

    def stop(*_: Any, engine_args: Any = None, **__: Any) -> Any:
        raise _Stop(engine_args)

    engine_cls.from_engine_args = stop  # type: ignore[method-assign]
    try:
        vllm.LLM(*args, **kwargs)
    except _Stop as stopped:
        return stopped.engine_args.create_engine_config()
    finally:
        engine_cls.from_engine_args = original  # type: ignore[method-assign]
    raise AssertionError("LLM.__init__ did not reach LLMEngine.from_engine_args")


class VllmTestRunner:
    """vLLM's ``tests/conftest.py`` ``VllmRunner`` as the corpus's ``target = "vllm"`` modules
    need it (``suites/target_vllm/conftest.py`` hands out the class as the ``vllm_runner``
    fixture): ``LLM(**runner_llm_kwargs(...))`` on entry, and on exit what vLLM's does,
    ``del self.llm`` and ``cleanup_dist_env_and_memory()``.
    """

    def __init__(self, model_name: str, tokenizer_name: str | None = None,
                 **kwargs: Any) -> None:
        from vllm import LLM

        self.llm = LLM(**runner_llm_kwargs(model_name, tokenizer_name, **kwargs))

    def __enter__(self) -> VllmTestRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        from vllm.distributed import cleanup_dist_env_and_memory

        del self.llm
        cleanup_dist_env_and_memory()

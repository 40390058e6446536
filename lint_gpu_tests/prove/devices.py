"""The devices a module's sessions need, and the devices there are.

A module's engines need ``tensor_parallel_size × pipeline_parallel_size`` devices each; the
recorder does not record them, so they are read off the module's source
(:func:`engine_devices`: each engine construction's keyword literals, 1 where they are not
literals).
"""

from __future__ import annotations

import ast
import os

from lint_gpu_tests.config import DEFAULT_ENGINE_CLASSES

#: Callables that build an engine: the engine classes' names, and vLLM's test runner.
ENGINE_CALLS = frozenset({*(c.rsplit(".", 1)[-1] for c in DEFAULT_ENGINE_CLASSES),
                          "VllmRunner", "vllm_runner"})

#: The keywords whose product is the devices one engine takes.
PARALLEL_KEYWORDS = ("tensor_parallel_size", "pipeline_parallel_size")


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def engine_devices(source: bytes | str) -> list[int]:
    """Per engine construction in ``source`` (a call of :data:`ENGINE_CALLS`), in source
    order, the devices it takes: the product of its :data:`PARALLEL_KEYWORDS` given as
    integer literals (a keyword missing or not a literal counts 1). ``[]`` for a module that
    builds no engine or does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))
    for node in calls:
        if _called(node) not in ENGINE_CALLS:
            continue
        devices = 1
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg in PARALLEL_KEYWORDS and isinstance(value, ast.Constant) \
                    and type(value.value) is int and value.value > 0:
                devices *= value.value
        out.append(devices)
    return out


#: The variable that names the devices a process sees, per platform
#: (:func:`lint_gpu_tests.runtime._platform.detect_platform`).
VISIBILITY = {"cuda": "CUDA_VISIBLE_DEVICES", "rocm": "HIP_VISIBLE_DEVICES",
              "xpu": "ZE_AFFINITY_MASK", "other": "CUDA_VISIBLE_DEVICES"}

#: The environment variable that names the devices ``prove`` schedules on (``0,1,2``),
#: instead of the visible ones: ``--devices``.
DEVICES_ENV = "GPU_TEST_LINT_PROVE_DEVICES"


def visibility_variable() -> str:
    """This platform's visibility variable (:data:`VISIBILITY`)."""
    from lint_gpu_tests.runtime._platform import detect_platform

    return VISIBILITY[detect_platform()]


def visible_options(devices: tuple[str, ...]) -> list[str]:
    """The pytest options that make a session see only ``devices`` through this platform's
    visibility variable (the plugin :mod:`lint_gpu_tests.prove.visibility`); ``[]`` without
    devices."""
    if not devices:
        return []
    return ["-p", "lint_gpu_tests.prove.visibility",
            f"--gpu-test-lint-visible={visibility_variable()}={','.join(devices)}"]


def _split(value: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in value.split(",") if d.strip())


def _nvml_devices() -> tuple[str, ...] | None:
    """The devices NVML counts (nvidia-ml-py), or None without it or a driver."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            return tuple(str(i) for i in range(int(pynvml.nvmlDeviceGetCount())))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver or no device: no devices to schedule
        return None


def find_devices(given: str | None = None, environ: dict[str, str] | None = None
                 ) -> tuple[str, ...] | None:
    """The devices to schedule sessions on: ``given`` (``--devices``, or
    ``$GPU_TEST_LINT_PROVE_DEVICES``), else the platform's visibility variable when it is set,
    else the devices NVML counts; None on a machine with none of them (no GPU: sessions are
    scheduled by ``--jobs``)."""
    env = os.environ if environ is None else environ
    for value in (given, env.get(DEVICES_ENV), env.get(visibility_variable())):
        if value is not None and _split(value):
            return _split(value)
    return _nvml_devices()

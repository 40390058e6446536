"""The devices a module's sessions need, and the devices there are.

A module's engines need ``tensor_parallel_size × pipeline_parallel_size`` devices each; the
recorder does not record them, so they are read off the module's source
(:func:`engine_devices`: each engine construction's keyword literals, 1 where they are not
literals).
"""

from __future__ import annotations

import ast

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

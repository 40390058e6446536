"""Shared by the inner pytest sessions of ``test_runtime_e2e.py`` (imported there, never
collected): the engine's model and arguments, and a record of what psutil saw.

The inner sessions run in their own ``python -m pytest`` processes with this folder on
``PYTHONPATH``; ``RT_MODEL`` (the tiny model's path) and ``RT_RECORDS`` (a JSON-lines file)
come from the outer test.
"""

from __future__ import annotations

import json
import os
from typing import Any

from engine_procs import engine_processes
from tiny_model import ENGINE_KWARGS

MODEL: str = os.environ.get("RT_MODEL", "")
KWARGS: dict[str, Any] = dict(ENGINE_KWARGS)


def engine_names() -> list[str]:
    """Titles of this process's live engine processes (``VLLM::EngineCore`` ...), sorted."""
    names = []
    for process in engine_processes():
        try:
            names.append(process.cmdline()[0].split()[0] if process.cmdline() else process.name())
        except Exception:
            continue
    return sorted(names)


def record(key: str, value: Any) -> None:
    """Append ``{key: value}`` to ``$RT_RECORDS`` (one JSON object a line)."""
    with open(os.environ["RT_RECORDS"], "a") as file:
        file.write(json.dumps({key: value}) + "\n")


def read_records(path: str) -> dict[str, Any]:
    """Every record of ``path`` as one dict (a later key wins)."""
    merged: dict[str, Any] = {}
    with open(path) as file:
        for line in file:
            merged.update(json.loads(line))
    return merged

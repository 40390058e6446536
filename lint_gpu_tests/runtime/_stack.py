"""Where the runtime's warnings point: the user's line, not a line of the runtime.

``warnings.warn(..., stacklevel=n)`` files a warning under the ``n``-th frame up; pytest's
warnings summary shows that file and line. A fixed ``n`` points into the runtime whenever
the call path differs (``VllmRunner.__exit__`` vs ``VllmRunnerFactory.close``), so the level
is counted here: the first frame outside this package and ``contextlib`` (a ``with`` block
in a generator fixture goes through ``contextlib``).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["stacklevel_outside_runtime", "warn_at_function"]

_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_CONTEXTLIB = os.path.abspath(sys.modules["contextlib"].__file__ or "contextlib.py")


def _is_internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_RUNTIME_DIR) or path == _CONTEXTLIB


def stacklevel_outside_runtime() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the caller of this function that
    names the first frame outside the runtime (1 = the caller itself)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level if frame is not None else 1


def warn_at_function(
    message: str, category: type[Warning], func: Callable[..., Any] | None
) -> None:
    """Warn under ``func``'s own ``def`` line (the test an isolation wrapper runs: the
    frames above the wrapper are pytest's); falls back to
    :func:`stacklevel_outside_runtime` when ``func`` has no code object."""
    code = getattr(func, "__code__", None)
    if code is None:
        warnings.warn(message, category, stacklevel=stacklevel_outside_runtime())
        return
    module_name = getattr(func, "__module__", None) or "__main__"
    module = sys.modules.get(module_name)
    registry: dict[Any, Any] = {}
    if module is not None:
        registry = vars(module).setdefault("__warningregistry__", {})
    warnings.warn_explicit(
        message, category, code.co_filename, code.co_firstlineno, module_name, registry
    )

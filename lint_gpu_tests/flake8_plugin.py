"""flake8 plugin: the same engine, the same codes, inside flake8.

Registered in ``pyproject.toml`` as the ``flake8.extension`` entry point ``GPU``, so
``flake8 --select GPU`` (or ``extend-select = GPU``) turns it on. flake8 hands the plugin the
``ast`` tree it already parsed; the plugin runs :func:`lint_gpu_tests.engine.check_tree` on
it with ``apply_noqa=False`` (flake8 applies ``# noqa`` itself). A file that does not parse
never reaches plugins: that is flake8's ``E999``, so ``GPU900`` is not reported here.

Settings come from the same ``[tool.gpu-test-lint]`` table the CLI reads, found by walking up
from each file's directory (resolved once per directory).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

from lint_gpu_tests import __version__
from lint_gpu_tests.config import Config, ConfigError, resolve_config
from lint_gpu_tests.engine import INTERNAL_ERROR_CODE, InternalError, check_tree

Flake8Result = tuple[int, int, str, type[Any]]


@lru_cache(maxsize=256)
def _config_for_dir(directory: str) -> Config | str:
    """The config for files in ``directory``, or an error message."""
    try:
        return resolve_config([directory])
    except ConfigError as exc:
        return str(exc)


class GpuTestLintPlugin:
    """flake8 AST plugin reporting ``GPU0xx`` violations.

    Args:
        tree: the module flake8 parsed.
        filename: the path flake8 is checking (``"stdin"`` or ``"-"`` for standard input).
        lines: the physical lines of the file (flake8's ``lines`` parameter).
    """

    name = "gpu-test-lint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str = "stdin",
                 lines: Sequence[str] | None = None) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = list(lines) if lines is not None else []

    def run(self) -> Iterator[Flake8Result]:
        """Yield ``(line, column0, "CODE message", type)`` for each violation."""
        if not isinstance(self.tree, ast.Module):
            return
        on_disk = self.filename not in ("stdin", "-", "") and os.path.exists(self.filename)
        directory = os.path.dirname(os.path.abspath(self.filename)) if on_disk else os.getcwd()
        config = _config_for_dir(directory)
        if isinstance(config, str):
            yield 1, 0, f"{INTERNAL_ERROR_CODE} configuration error: {config}", type(self)
            return
        text = "".join(self.lines)
        try:
            violations = check_tree(self.tree, text, self.filename, config, apply_noqa=False)
        except InternalError as exc:
            yield 1, 0, f"{INTERNAL_ERROR_CODE} internal error: {exc}", type(self)
            return
        for v in violations:
            yield v.location.row, v.location.column - 1, f"{v.code} {v.message}", type(self)

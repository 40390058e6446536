"""flake8 plugin: the same engine, the same codes, the same settings, inside flake8.

Registered in ``pyproject.toml`` as the ``flake8.extension`` entry point ``GPU``, so
``flake8 --select GPU`` (or ``extend-select = GPU``) turns it on. flake8 hands the plugin the
``ast`` tree it already parsed; the plugin runs :func:`lint_gpu_tests.engine.check_tree` on
it. A file that does not parse never reaches plugins: that is flake8's ``E999``, so ``GPU900``
is not reported here.

Settings come from the ``[tool.gpu-test-lint]`` table the CLI reads, resolved per file as the
CLI resolves them (:class:`~lint_gpu_tests.config.ConfigResolver`, cached per directory). A
file that the config's ``exclude``/``extend-exclude`` (or the default excludes) skip gets no
reports, as the CLI would not check it. ``# noqa`` is read by the engine's own
:func:`~lint_gpu_tests.engine.parse_noqa`, the one the CLI uses (flake8 applies its own
afterwards, which changes nothing for these codes); flake8's ``--disable-noqa`` turns both off.

One code is the plugin's own: ``GPU999``, reported on line 1 when the file's config is invalid
(``GPU999 configuration error: ...``) or a rule fails on the file (``GPU999 internal error:
...``), where the CLI would print an ``error:`` line and exit 2.
"""

from __future__ import annotations

import argparse
import ast
import os
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from lint_gpu_tests import __version__
from lint_gpu_tests.config import Config, ConfigError, ConfigResolver
from lint_gpu_tests.conftest_index import ConftestIndex
from lint_gpu_tests.discovery import is_excluded
from lint_gpu_tests.engine import INTERNAL_ERROR_CODE, InternalError, check_tree

Flake8Result = tuple[int, int, str, type[Any]]

_RESOLVER = ConfigResolver(fix_settings=False)  # flake8 fixes nothing
#: The conftests read by flake8's run in this process (kept as long as the resolver).
_CONFTESTS = ConftestIndex(learns=False)
#: Configuration errors already reported by this process: each is reported once, on the
#: first file it concerns, not on every file (flake8's worker processes report it once each).
_REPORTED: set[str] = set()


def _config_for(path: str) -> Config | str:
    """The config of the file at ``path``, or an error message."""
    try:
        return _RESOLVER.for_file(path)
    except ConfigError as exc:
        return str(exc)


class GpuTestLintPlugin:
    """flake8 AST plugin reporting ``GPU0xx`` violations (and ``GPU999``, see the module).

    Args:
        tree: the module flake8 parsed.
        filename: the path flake8 is checking (``"stdin"`` or ``"-"`` for standard input).
        lines: the physical lines of the file (flake8's ``lines`` parameter).
    """

    name = "gpu-test-lint"
    version = __version__
    apply_noqa: ClassVar[bool] = True
    """Apply ``# noqa`` in the plugin (the tests turn it off to see flake8's own decisions)."""
    disable_noqa: ClassVar[bool] = False
    """flake8's ``--disable-noqa`` was given: no ``# noqa`` holds."""

    def __init__(self, tree: ast.AST, filename: str = "stdin",
                 lines: Sequence[str] | None = None) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = list(lines) if lines is not None else []

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        """flake8 hands over its parsed options once: honour ``--disable-noqa``."""
        cls.disable_noqa = bool(getattr(options, "disable_noqa", False))

    def run(self) -> Iterator[Flake8Result]:
        """Yield ``(line, column0, "CODE message", type)`` for each violation."""
        if not isinstance(self.tree, ast.Module):
            return
        on_disk = self.filename not in ("stdin", "-", "") and os.path.exists(self.filename)
        path = self.filename if on_disk else os.path.join(os.getcwd(), "stdin.py")
        config = _config_for(path)
        if isinstance(config, str):
            if config not in _REPORTED:
                _REPORTED.add(config)
                yield 1, 0, f"{INTERNAL_ERROR_CODE} configuration error: {config}", type(self)
            return
        if on_disk and is_excluded(path, config):
            return
        text = "".join(self.lines)
        try:
            violations = check_tree(self.tree, text, self.filename, config,
                                    apply_noqa=self.apply_noqa and not self.disable_noqa,
                                    conftests=_CONFTESTS)
        except InternalError as exc:
            yield 1, 0, f"{INTERNAL_ERROR_CODE} internal error: {exc}", type(self)
            return
        for v in violations:
            yield v.location.row, v.location.column - 1, f"{v.code} {v.message}", type(self)

"""flake8 plugin: the same engine, the same codes, the same settings, inside flake8.

Registered in ``pyproject.toml`` as the ``flake8.extension`` entry point ``GPU``, so
``flake8 --select GPU`` (or ``extend-select = GPU``) turns it on. flake8 hands the plugin the
``ast`` tree it already parsed; the plugin runs :func:`lint_gpu_tests.checking.checker.check_tree`
on it. A file that does not parse never reaches plugins: that is flake8's ``E999``, so ``GPU900``
is not reported here.

Settings come from the ``[tool.gpu-test-lint]`` table the CLI reads, resolved per file as the
CLI resolves them (:class:`~lint_gpu_tests.config.ConfigResolver`, cached per directory). A
file that the config's ``exclude``/``extend-exclude`` (or the default excludes) skip gets no
reports, as the CLI would not check it. ``# noqa`` is read by the engine's own
:func:`~lint_gpu_tests.checking.checker.parse_noqa`, the one the CLI uses (flake8 applies its own
afterwards, which changes nothing for these codes); flake8's ``--disable-noqa`` turns both off.

A baseline (``--gpu-baseline FILE`` in flake8's options or config, where flake8 anchors a
path with a ``/`` at the config file: ``./gpu-baseline.json``; else the ``baseline`` of
``[tool.gpu-test-lint]``) leaves out the violations it records,
matched as the CLI matches them (:mod:`lint_gpu_tests.report.baseline`); the plugin never writes it
(``gpu-test-lint check --update-baseline`` does).

One code is the plugin's own: ``GPU999``, reported on line 1 when the file's config is invalid
(``GPU999 configuration error: ...``) or a rule fails on the file (``GPU999 internal error:
...``), or the baseline cannot be read (``GPU999 baseline error: ...``), where the CLI would
print an ``error:`` line and exit 2.
"""

from __future__ import annotations

import argparse
import ast
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from lint_gpu_tests import __version__
from lint_gpu_tests.checking.checker import INTERNAL_ERROR_CODE, InternalError, check_tree
from lint_gpu_tests.checking.conftest_index import ConftestIndex
from lint_gpu_tests.config import STDIN_PATH, Config, ConfigError, ConfigResolver
from lint_gpu_tests.running.discovery import is_excluded

if TYPE_CHECKING:
    from lint_gpu_tests.ftypes import Violation
    from lint_gpu_tests.report.baseline import BaselineEntry

Flake8Result = tuple[int, int, str, type[Any]]

_RESOLVER = ConfigResolver(fix_settings=False)  # flake8 fixes nothing
#: The conftests read by flake8's run in this process (kept as long as the resolver).
_CONFTESTS = ConftestIndex(learns=False)
#: Configuration errors already reported by this process: each is reported once, on the
#: first file it concerns, not on every file (flake8's worker processes report it once each).
_REPORTED: set[str] = set()
#: The baseline files read by this process: path -> their entries, or why they cannot be read.
_BASELINES: dict[str, frozenset[BaselineEntry] | str] = {}


def _baseline_entries(path: str) -> frozenset[BaselineEntry] | str:
    """The entries of the baseline file at ``path`` (read once a process), or an error."""
    if path not in _BASELINES:
        from lint_gpu_tests.report.baseline import BaselineError, read_baseline

        try:
            _BASELINES[path] = read_baseline(path)
        except BaselineError as exc:
            _BASELINES[path] = str(exc)
    return _BASELINES[path]


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
    baseline: ClassVar[str | None] = None
    """``--gpu-baseline``: the baseline file for every file (absolute), over the config's."""

    def __init__(self, tree: ast.AST, filename: str = "stdin",
                 lines: Sequence[str] | None = None) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = list(lines) if lines is not None else []

    @classmethod
    def add_options(cls, parser: Any) -> None:
        """Register ``--gpu-baseline FILE`` (also ``gpu-baseline`` in flake8's config, which
        flake8 anchors at the config file when it has a ``/``) with flake8's option
        manager."""
        parser.add_option("--gpu-baseline", metavar="FILE", default=None,
                          parse_from_config=True, normalize_paths=True,
                          help="gpu-test-lint baseline file: report only the GPU violations "
                               "it does not record (default: the `baseline` of "
                               "[tool.gpu-test-lint]).")

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        """flake8 hands over its parsed options once: honour ``--disable-noqa`` and
        ``--gpu-baseline``."""
        cls.disable_noqa = bool(getattr(options, "disable_noqa", False))
        named = getattr(options, "gpu_baseline", None)
        cls.baseline = os.path.abspath(named) if named else None

    def run(self) -> Iterator[Flake8Result]:
        """Yield ``(line, column0, "CODE message", type)`` for each violation."""
        if not isinstance(self.tree, ast.Module):
            return
        nameless = self.filename in ("stdin", STDIN_PATH, "")
        on_disk = not nameless and os.path.exists(self.filename)
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
            # Standard input is checked as `gpu-test-lint check -` checks it.
            violations = check_tree(self.tree, text, STDIN_PATH if nameless else self.filename,
                                    config, apply_noqa=self.apply_noqa and not self.disable_noqa,
                                    conftests=_CONFTESTS)
        except InternalError as exc:
            yield 1, 0, f"{INTERNAL_ERROR_CODE} internal error: {exc}", type(self)
            return
        chosen = self.baseline or config.baseline
        if chosen and violations:
            kept = self._new_violations(violations, chosen, text)
            if isinstance(kept, str):  # reported once, as a configuration error
                if kept not in _REPORTED:
                    _REPORTED.add(kept)
                    yield 1, 0, f"{INTERNAL_ERROR_CODE} baseline error: {kept}", type(self)
                return
            violations = kept
        for v in violations:
            yield v.location.row, v.location.column - 1, f"{v.code} {v.message}", type(self)

    def _new_violations(self, violations: list[Violation], baseline: str, text: str
                        ) -> list[Violation] | str:
        """The violations the baseline file ``baseline`` does not record (keyed on the lines
        flake8 read), or why it cannot be read."""
        from lint_gpu_tests.report.baseline import baseline_entries

        entries = _baseline_entries(baseline)
        if isinstance(entries, str):
            return entries
        lines = text.splitlines()
        pairs = baseline_entries(violations, os.path.dirname(baseline),
                                 lines_of=lambda _path: lines)
        held = {v for v, entry in pairs if entry in entries}
        return [v for v in violations if v not in held]

"""``wrap_runner_in_with.WrapRunnerInWith``, the name ``python -m libcst.tool codemod`` knows
the with-block codemod by (:class:`~lint_gpu_tests.codemods.wrap_in_runner.WrapInRunner`,
which enters bare runners and wraps hand-built engines)."""

from __future__ import annotations

from lint_gpu_tests.codemods.wrap_in_runner import WrapInRunner as WrapRunnerInWith

__all__ = ["WrapRunnerInWith"]

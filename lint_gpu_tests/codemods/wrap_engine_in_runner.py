"""``wrap_engine_in_runner.WrapEngineInRunner``, the name ``python -m libcst.tool codemod``
knows the with-block codemod by (:class:`~lint_gpu_tests.codemods.wrap_in_runner.WrapInRunner`,
which wraps hand-built engines and enters bare runners)."""

from __future__ import annotations

from lint_gpu_tests.codemods.wrap_in_runner import WrapInRunner as WrapEngineInRunner

__all__ = ["WrapEngineInRunner"]

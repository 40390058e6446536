"""pytest plugin of the differential generator's child sessions (``-p differential_recorder``).

The runtime's :class:`~lint_gpu_tests.runtime.recorder.Recorder`, with what the stand-in
engine (``vllm`` of this folder) can tell instead of engine processes:

- ``engines``: each engine's whole resolved configuration (:attr:`vllm.LLM.config`);
- ``leaked_at_start``: stand-in engines alive (referenced, not shut down) when the test's
  set-up starts;
- one record ``<end>::<module>`` per module whose ``leaked_at_start`` is the engines still
  alive after its last test's teardown (its module fixtures finalised); the registry is then
  forgotten and ``os.environ`` restored, so one module's leaks never reach the next module's
  records.

The automatic garbage collector is off in the session, so an engine kept alive by its reference
cycle is freed only where the module (or the runner) calls ``gc.collect()``: every count is the
same run after run. Writes ``$GPU_TEST_LINT_RECORD`` at the session's end.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Generator
from typing import Any

import pytest
import vllm

from lint_gpu_tests.runtime.recorder import RECORD_ENV, Recorder, patch_engines


class DifferentialRecorder(Recorder):
    """Records per test what :mod:`differential_recorder`'s docstring lists."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        # os.environ when the module's first test started, restored after its last one
        self.module_environ: dict[str, str] | None = None

    def install(self) -> None:
        """Record each engine's whole configuration and each ``generate``'s texts."""
        recorder = self

        def on_engine(llm: Any) -> None:
            recorder._entry()["engines"].append(llm.config)

        def on_texts(texts: list[str], kind: str) -> None:
            entry = recorder._entry()
            entry["texts"].append(texts)
            entry["sampling"].append(kind)

        patch_engines(on_engine, on_texts)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any
                                ) -> Generator[None, None, None]:
        """Count the live engines at the test's start; after a module's last test, those
        left alive."""
        self.current = item.nodeid
        if self.module_environ is None:
            self.module_environ = dict(os.environ)
        vllm.set_env_base()
        self._entry(item.nodeid)["leaked_at_start"] = vllm.live_engines()
        try:
            yield
        finally:
            self.current = None
            if nextitem is None or nextitem.path != item.path:
                module = os.path.relpath(str(item.path)).replace(os.sep, "/")
                end = self._entry(f"<end>::{module}")
                end["outcome"] = "end"
                end["leaked_at_start"] = vllm.live_engines()
                vllm.forget_engines()
                os.environ.clear()
                os.environ.update(self.module_environ or {})
                self.module_environ = None


def pytest_configure(config: pytest.Config) -> None:
    """Register the recorder when ``$GPU_TEST_LINT_RECORD`` is set; turn the automatic
    garbage collector off."""
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    gc.disable()
    recorder = DifferentialRecorder(path)
    recorder.install()
    config.pluginmanager.register(recorder, "differential-recorder")

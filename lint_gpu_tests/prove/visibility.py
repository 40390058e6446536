"""pytest plugin of ``prove``'s sessions on scheduled devices.

``prove`` loads it with ``-p lint_gpu_tests.prove.visibility`` when it gives a session devices
of its own:

- ``--gpu-test-lint-visible VAR=0,1`` sets the platform's visibility variable before any
  ``conftest.py`` is imported (so before any test imports torch), for the session and the
  engine processes it starts;
- ``--gpu-test-lint-start-lock PATH`` (once per device shared with other sessions) holds an
  exclusive lock on each ``PATH`` (in the order given) while ``vllm.LLM.__init__`` runs, so
  that no two sessions sharing a device start an engine at once (vLLM's start-up memory
  profile fails when another process allocates or frees the device's memory meanwhile).
  Engines built in a child that a test spawns are not serialised (it does not load this
  plugin).

Which device a session ran on is not an input of its recording: it must not change what it
records.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import importlib.util
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """The two options ``prove`` passes."""
    group = parser.getgroup("gpu-test-lint prove")
    group.addoption("--gpu-test-lint-visible", default=None,
                    help="VAR=DEVICES: the visibility variable to set before conftests load.")
    group.addoption("--gpu-test-lint-start-lock", action="append", default=[],
                    help="A lock file held around each engine's construction.")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> None:
    """Set the visibility variable before the first ``conftest.py`` is imported."""
    given = early_config.known_args_namespace.gpu_test_lint_visible
    if given:
        name, _, devices = given.partition("=")
        os.environ[name] = devices


@contextlib.contextmanager
def held(paths: Sequence[str]) -> Iterator[None]:
    """Exclusive locks on ``paths``, taken in order, released in reverse."""
    with contextlib.ExitStack() as stack:
        for path in paths:
            f = stack.enter_context(open(path, "a+b"))  # noqa: SIM115 - closed by the stack
            fcntl.flock(f, fcntl.LOCK_EX)
            stack.callback(fcntl.flock, f, fcntl.LOCK_UN)
        yield


def pytest_configure(config: pytest.Config) -> None:
    """Serialise engine constructions on the start locks given, where vLLM is installed."""
    locks: list[str] = config.getoption("gpu_test_lint_start_lock")
    if not locks or importlib.util.find_spec("vllm") is None:
        return
    vllm: Any = importlib.import_module("vllm")
    construct = vllm.LLM.__init__

    def __init__(llm: Any, *args: Any, **kwargs: Any) -> None:
        with held(locks):
            construct(llm, *args, **kwargs)

    vllm.LLM.__init__ = __init__

"""The ``gpu-test-lint`` console script and ``python -m lint_gpu_tests``: a run that its kept
answer serves (:mod:`lint_gpu_tests.running.answers`) is answered before the command line
(click) and the checker are imported; any other goes to
:func:`lint_gpu_tests.interfaces.cli.run`."""

from __future__ import annotations

import sys
from typing import NoReturn

import lint_gpu_tests.running.answers as answers


def run() -> NoReturn:
    """Answer ``sys.argv`` from its kept answer when it still holds (the process ends
    there), else run the command line.

    Raises:
        SystemExit: never; the process leaves with ``os._exit`` and the exit status.
    """
    answers.replay(sys.argv)
    from lint_gpu_tests.interfaces.cli import run as run_command_line

    run_command_line()

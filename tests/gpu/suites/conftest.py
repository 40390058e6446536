"""Conftest of the GPU suites: each runs as its own pytest session, started by a test in
``tests/gpu`` (never collected by the project's own run)."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_probe import BASELINE_BYTES, GIB, TOTAL_GIB, above_gib, record

record("baseline_gib", BASELINE_BYTES / GIB)
record("total_gib", TOTAL_GIB)


@pytest.fixture
def at_setup(request: pytest.FixtureRequest) -> None:
    """Record what the test's own fixtures (typically: the next engine) find on the device."""
    record(f"{request.node.name}.at_setup_gib", above_gib())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record each test's outcome (``passed``, ``failed``, ``skipped``, ``xfailed``) and,
    for a skip, the location pytest reports it at."""
    if report.when == "call" or report.outcome != "passed":
        name = report.nodeid.split("::")[-1]
        outcome: str = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        record(f"{name}.outcome", outcome)
        longrepr: Any = report.longrepr
        if report.skipped and isinstance(longrepr, tuple):
            record(f"{name}.skip_location", f"{longrepr[0]}:{longrepr[1]}")

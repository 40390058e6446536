"""Hypothesis profiles for the hardening tests.

``ci`` (the default) keeps the fuzz tests to a bounded number of examples so the whole
hardening suite stays well under a minute on two cores; ``long`` is for a run by hand::

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest -q tests/hardening/test_fuzz.py

Both profiles have no deadline (LibCST's first parse of a run is slow) and derandomize in CI
so a red build is reproducible.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          database=None,
                          suppress_health_check=_SUPPRESSED, print_blob=True)
settings.register_profile("long", max_examples=1000, deadline=None,
                          suppress_health_check=_SUPPRESSED, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project with a ``tests/`` directory; the working directory is its root."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    (tmp_path / "tests").mkdir()
    return tmp_path

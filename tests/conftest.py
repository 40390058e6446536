"""The whole test session runs with a rule from outside the package registered:
``tests/scratch_rule.py``'s, which reports every line GPU001 reports. Registered as a project
registers its own (``docs/architecture.md``, "Where a new rule goes"), it is off by default,
so every test runs with it present and no output changes unless a test selects it by its
code (``tests/test_scratch_rule.py`` does).
"""

from __future__ import annotations

import pytest

from lint_gpu_tests import rules


def pytest_configure(config: pytest.Config) -> None:
    """Register the scratch rule before any test module is imported (some parametrize over
    the registry)."""
    from scratch_rule import ScratchEngineLine

    rules.register(ScratchEngineLine)

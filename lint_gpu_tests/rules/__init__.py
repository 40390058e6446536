"""All rules, one module each. ``ALL_RULES`` is ordered by code."""

from __future__ import annotations

from lint_gpu_tests.rule import Rule

ALL_RULES: list[type[Rule]] = []


def rule_by_code(code: str) -> type[Rule] | None:
    """Return the rule class for ``code`` (case-insensitive), or ``None``."""
    code = code.upper()
    return next((rule for rule in ALL_RULES if rule.code == code), None)

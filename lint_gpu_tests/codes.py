"""Every code the checker can report, as data (the bottom layer: imports nothing).

Configuration validates ``select``/``ignore`` against these without importing the rules;
``tests/test_layers.py`` checks that :data:`RULE_CODES` matches the rule registry.
"""

from __future__ import annotations

#: Rule code -> kebab-case name, in code order (``lint_gpu_tests/rules/``).
RULE_CODES: dict[str, str] = {
    "GPU001": "engine-outside-runner",
    "GPU002": "fixture-yields-engine",
    "GPU003": "finalizer-shutdown",
    "GPU004": "manual-engine-cleanup",
    "GPU005": "runner-without-with",
    "GPU006": "strong-engine-alias",
    "GPU007": "engines-oversubscribe-device",
    "GPU008": "environment-mutated-without-isolation",
}

PARSE_ERROR_CODE = "GPU900"
"""A file that does not parse (reported, never rewritten)."""
PARSE_ERROR_NAME = "syntax-error"
INTERNAL_ERROR_CODE = "GPU999"
"""The flake8 plugin's report of a rule that crashed on a file."""

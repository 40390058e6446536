"""GPU002 fixture-yields-engine: a fixture hands out the engine itself instead of a weak
proxy.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu002_fixture_yields_engine.py``).
Elsewhere: its rewrites byte for byte in ``tests/fixtures/fix/fixture_*``.
"""

from __future__ import annotations

from rule_testing import example_tests, rule_class

RULE = rule_class("GPU002")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)

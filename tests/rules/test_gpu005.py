"""GPU005 runner-without-with: a runner used outside a with-statement.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu005_runner_without_with.py``).
Elsewhere: its rewrites byte for byte in ``tests/fixtures/fix/``
(``runner_fixture_without_with``, ``runner_class_without_with_helper``).
"""

from __future__ import annotations

from rule_testing import example_tests, rule_class

RULE = rule_class("GPU005")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)

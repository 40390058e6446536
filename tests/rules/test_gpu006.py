"""GPU006 strong-engine-alias: a name holds the runner's engine strongly.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu006_strong_engine_alias.py``) and
what else is particular to it. Elsewhere: its rewrites byte for byte in
``tests/fixtures/fix/`` (``strong_alias*``).
"""

from __future__ import annotations

from rule_testing import SOUNDNESS, example_tests, rule_class

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixloop import fix_source

RULE = rule_class("GPU006")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


def test_unsafe_alias_fix_needs_unsafe_fixes() -> None:
    before = (SOUNDNESS / "strong_alias_used_after_the_block.py").read_bytes()
    safe_only = fix_source(before, "tests/test_case.py", Config())
    assert safe_only.new_source is None
    (alias,) = safe_only.remaining
    assert alias.fix is not None and alias.fix.reason == (
        "`llm` is used after the runner's block, where a proxy is dead")

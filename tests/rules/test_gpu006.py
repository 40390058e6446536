"""GPU006 strong-engine-alias: a name holds the runner's engine strongly.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu006_strong_engine_alias.py``) and
what else is particular to it. Elsewhere: its rewrites byte for byte in
``tests/fixtures/fix/`` (``strong_alias*``).
"""

from __future__ import annotations

from rule_testing import SOUNDNESS, example_tests, rule_class

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source

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


def test_strong_references_beyond_a_plain_alias() -> None:
    """A tuple element bound to a name and a walrus are aliases (safe fix); a display
    assigned to a name and ``append`` to a local list hold it in a container (unsafe fix),
    ``append`` to a parameter's list has none; a tuple element bound to a subscript, and
    ``runner.llm`` read for a call, are not reported."""
    from lint_gpu_tests.checking.checker import check_source

    source = (
        "def test_x(vllm_runner, kept):\n"
        "    with vllm_runner('m') as runner:\n"
        "        llm, tok = runner.llm, runner.tokenizer\n"
        "        engines = (runner.llm, 1)\n"
        "        local = []\n"
        "        local.append(runner.llm)\n"
        "        kept.append(runner.llm)\n"
        "        local[0], n = runner.llm, 2\n"
        "        print(runner.llm)\n"
        "        assert (w := runner.llm) and llm and tok and engines and local and n\n")
    found = [(v.location.row, v.location.column, v.fix.applicability.value)
             for v in check_source(source.encode(), "tests/test_x.py", Config())
             if v.code == "GPU006" and v.fix is not None]
    assert found == [(3, 20, "safe"), (4, 20, "unsafe"), (6, 22, "unsafe"), (7, 21, "none"),
                     (10, 22, "safe")]

"""GPU001 engine-outside-runner: an engine built by hand instead of by the runner's
with-statement.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu001_engine_outside_runner.py``) and
what else is particular to it. Elsewhere: how its fix is planned, shape by shape, in
``tests/test_fix_*.py`` and ``tests/test_engine_owner_class.py``; its rewrites byte for byte
in ``tests/fixtures/fix/``; what counts as vLLM's engine (name resolution, process targets)
in ``tests/test_precision.py``.
"""

from __future__ import annotations

from rule_testing import SOUNDNESS, example_tests, own_rules, rule_class

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixloop import fix_source

RULE = rule_class("GPU001")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


def test_runtime_compilation_config_needs_unsafe_fixes() -> None:
    before = (SOUNDNESS / "runtime_compilation_config_target_vllm.py").read_bytes()
    safe_only = fix_source(before, "tests/test_case.py", own_rules(Config(target="vllm")))
    assert safe_only.new_source is None
    (engine,) = safe_only.remaining
    assert engine.code == "GPU001" and engine.fix is not None
    assert engine.fix.applicability.value == "unsafe"
    assert engine.fix.reason.startswith("`compilation_config=cc` is only known at run time")

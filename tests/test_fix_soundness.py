"""Fixes a code review proved wrong before they were fixed: each input in
``tests/fixtures/soundness/<case>.py`` must give exactly ``<case>.fixed`` with
``--fix --unsafe-fixes`` and leave exactly the listed violations (code, row, applicability).
What each case shows: ``tests/fixtures/soundness/README.md``. That plain ``--fix`` leaves the
two cases whose fixes are unsafe unchanged is in ``tests/rules/test_gpu001.py`` and
``test_gpu006.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source

HERE = Path(__file__).parent / "fixtures" / "soundness"
PATH = "tests/test_case.py"

#: case -> violations left after --fix --unsafe-fixes (code, row, applicability); what each
#: case shows is in the directory's README.md
CASES: dict[str, list[tuple[str, int, str]]] = {
    "runner_llm_bound_to_a_name": [],
    "engine_method_bound_to_a_name": [],
    "fixture_returns_engine_inside_an_if": [("GPU001", 7, "none"), ("GPU002", 9, "none")],
    "fixture_returns_engine_on_one_path": [("GPU001", 8, "none"), ("GPU002", 8, "none")],
    "unittest_testcase_method": [],
    "runtime_compilation_config_target_vllm": [],
    "strong_alias_used_after_the_block": [],
    "parameters_with_defaults": [],
    "construction_on_a_with_header_line": [("GPU001", 6, "none")],
    "one_line_try_finally": [("GPU004", 8, "none")],
    "cleanup_sharing_its_line": [("GPU004", 7, "none")],
    "name_rebound_to_a_second_engine": [],
    "engine_fixture_parameter_owns_an_engine": [],
    "exit_deleting_something_else": [("GPU001", 6, "none")],
    "finally_shutting_down_another_engine": [("GPU003", 8, "none"), ("GPU007", 9, "-")],
    "engine_in_a_self_referencing_container": [],
    "helper_class_methods_without_blank_lines": [],
    "clock_read_after_the_last_use": [],
    "clock_read_after_a_finally_shutdown": [],
}


def config_for(case: str) -> Config:
    return Config(target="vllm") if case == "runtime_compilation_config_target_vllm" else Config()


@pytest.mark.parametrize("case", sorted(CASES))
def test_fix_matches_and_leaves_exactly(case: str) -> None:
    before = (HERE / f"{case}.py").read_bytes()
    outcome = fix_source(before, PATH, config_for(case), unsafe=True)
    after = outcome.new_source or before
    assert outcome.error is None
    assert after == (HERE / f"{case}.fixed").read_bytes()
    ast.parse(after)
    left = [(v.code, v.location.row, v.fix.applicability.value if v.fix else "-")
            for v in outcome.remaining]
    assert left == CASES[case]
    again = fix_source(after, PATH, config_for(case), unsafe=True)
    assert again.new_source is None
    assert not [n for n, line in enumerate(after.splitlines(), 1)
                if line.strip() == b"" and line != b""], "whitespace-only lines written"


def test_every_case_file_is_listed() -> None:
    assert sorted(p.stem for p in HERE.glob("*.py")) == sorted(CASES)
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    for case in CASES:
        assert f"`{case}`" in readme, f"{case} is not described in README.md"


def test_self_referencing_container_is_unsafe_with_its_reason() -> None:
    """A container that refers to itself keeps the engine alive past the block
    through the cycle, so the fix is never safe: plain ``--fix`` leaves the file as it was,
    and each GPU001 says which name makes the cycle."""
    before = (HERE / "engine_in_a_self_referencing_container.py").read_bytes()
    outcome = fix_source(before, PATH, Config(), unsafe=False)
    assert outcome.new_source is None
    reasons = [(v.location.row, v.fix.applicability.value, v.fix.reason)
               for v in outcome.remaining if v.fix is not None]
    tail = ("holds the engine and refers to itself (a reference cycle): the cycle keeps "
            "the engine alive past the block until the garbage collector runs")
    assert reasons == [(5, "unsafe", f"`box` {tail}"), (11, "unsafe", f"`engines` {tail}"),
                       (17, "unsafe", f"`inner` {tail}")]

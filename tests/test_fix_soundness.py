"""Fixes a code review proved wrong before they were fixed: each input in
``tests/fixtures/soundness/<case>.py`` must give exactly ``<case>.fixed`` with
``--fix --unsafe-fixes`` and leave exactly the listed violations (code, row, applicability),
and plain ``--fix`` must never change a case whose remaining fixes are all unsafe."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixloop import fix_source

HERE = Path(__file__).parent / "fixtures" / "soundness"
PATH = "tests/test_case.py"

#: case -> (what it guards against, violations left after --fix --unsafe-fixes)
CASES: dict[str, tuple[str, list[tuple[str, int, str]]]] = {
    "a1": ("`llm = vllm_runner(...).llm`: the block covers the uses of `llm`", []),
    "a1b": ("`gen = llm.generate`: the block covers the calls of `gen`", []),
    "a2": ("a fixture returning the engine inside an `if`: no fix",
           [("GPU001", 7, "none"), ("GPU002", 9, "none")]),
    "a3": ("`return LLM(...)` on one path of a fixture: no return->yield",
           [("GPU001", 8, "none"), ("GPU002", 8, "none")]),
    "a4": ("a unittest.TestCase method cannot take fixtures: the runner class", []),
    "a5": ("target vllm: a run-time `compilation_config` keeps the meaning of None, ints "
           "and dicts (0 stays compilation off); unsafe, as other falsy values cannot", []),
    "a6": ("a strong alias used after the block: the proxy fix is unsafe", []),
    "b1": ("parameters with defaults: the fixture goes before them", []),
    "b2": ("a construction on a `with` header line: no fix (was a crash)",
           [("GPU001", 6, "none")]),
    "b3": ("a one-line try/finally is not unwrapped (was a crash)", [("GPU004", 8, "none")]),
    "c1": ("cleanup sharing its line with other code is not removed",
           [("GPU004", 7, "none")]),
    "d1": ("a name rebound to a second engine: two consecutive blocks", []),
    "d2": ("a test receiving a migrated fixture owns an engine (GPU004)", []),
    "d4": ("a class whose __exit__ deletes something else is not a runner",
           [("GPU001", 6, "none")]),
    "e1": ("a try/finally that shuts down another (suppressed) engine stays: the second "
           "engine's block goes inside the try; both engines are alive together (GPU007)",
           [("GPU003", 8, "none"), ("GPU007", 9, "-")]),
}


def config_for(case: str) -> Config:
    return Config(target="vllm") if case == "a5" else Config()


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
    assert left == CASES[case][1]
    again = fix_source(after, PATH, config_for(case), unsafe=True)
    assert again.new_source is None


def test_every_case_file_is_listed() -> None:
    assert sorted(p.stem for p in HERE.glob("*.py")) == sorted(CASES)


def test_runtime_compilation_config_needs_unsafe_fixes() -> None:
    before = (HERE / "a5.py").read_bytes()
    safe_only = fix_source(before, PATH, Config(target="vllm"))
    assert safe_only.new_source is None
    (engine,) = safe_only.remaining
    assert engine.code == "GPU001" and engine.fix is not None
    assert engine.fix.applicability.value == "unsafe"
    assert engine.fix.reason.startswith("`compilation_config=cc` is only known at run time")


def test_unsafe_alias_fix_needs_unsafe_fixes() -> None:
    before = (HERE / "a6.py").read_bytes()
    safe_only = fix_source(before, PATH, Config())
    assert safe_only.new_source is None
    (alias,) = safe_only.remaining
    assert alias.fix is not None and alias.fix.reason == (
        "`llm` is used after the runner's block, where a proxy is dead")

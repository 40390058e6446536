"""Tiny fake rules for testing the CLI, output formats, cache and plugin plumbing without
depending on what the real rules report.

``install(monkeypatch)`` replaces ``ALL_RULES`` with three rules keyed on call names:

* ``GPU091`` fake-safe: every call ``LLM(...)``; safe fix.
* ``GPU092`` fake-unsafe: every call ``unsafe_llm(...)``; unsafe fix.
* ``GPU093`` fake-nofix: every call ``nofix_llm(...)``; no fix.

Files must name ``LLM`` somewhere for the prefilter to let them through (the samples do).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from lint_gpu_tests.ftypes import Applicability, FixInfo
from lint_gpu_tests.rule import Example, Hit, Rule


def _calls(module: object, name: str) -> Iterator[ast.Call]:
    tree = module.tree  # type: ignore[attr-defined]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            yield node


class _FakeRule(Rule):
    call_name = ""
    applicability: Applicability | None = None

    def check(self, module: object) -> Iterator[Hit]:  # type: ignore[override]
        for call in _calls(module, self.call_name):
            fix = None
            if self.applicability is not None:
                fix = FixInfo(self.applicability, self.fix_title)
            yield Hit(call.lineno, call.col_offset, call.end_lineno or call.lineno,
                      call.end_col_offset or call.col_offset,
                      f"`{self.call_name}(...)` built by hand", fix)


class FakeSafe(_FakeRule):
    code = "GPU091"
    name = "fake-safe"
    summary = "Engine built by hand"
    what_it_does = "Checks for `LLM(...)` calls."
    why_bad = "The engine leaks."
    fix_title = "Wrap in `with vllm_runner(...)`"
    fix_safety = "Safe."
    options = ("runner-fixture",)
    references = ("[vLLM](https://docs.vllm.ai)",)
    INVALID = (Example('from vllm import LLM\nllm = LLM("m")  # error: GPU091\n', "Bad"),)
    VALID = (Example('def test(vllm_runner):\n    with vllm_runner("m") as r:\n        pass\n'),)
    call_name = "LLM"
    applicability = Applicability.SAFE


class FakeUnsafe(_FakeRule):
    code = "GPU092"
    name = "fake-unsafe"
    summary = "Unsafe engine"
    what_it_does = "Checks for `unsafe_llm(...)` calls."
    why_bad = "Leaks."
    fix_title = "Wrap unsafely"
    call_name = "unsafe_llm"
    applicability = Applicability.UNSAFE


class FakeNoFix(_FakeRule):
    code = "GPU093"
    name = "fake-nofix"
    summary = "Engine without fix"
    what_it_does = "Checks for `nofix_llm(...)` calls."
    why_bad = "Leaks."
    call_name = "nofix_llm"


FAKE_RULES: list[type[Rule]] = [FakeSafe, FakeUnsafe, FakeNoFix]

SAMPLE = (
    "from vllm import LLM\n"
    "\n"
    "def test_x():\n"
    '    llm = LLM("m")\n'
    '    other = unsafe_llm("m")\n'
    '    third = nofix_llm("m")\n'
)
"""GPU091 at 4:11, GPU092 at 5:13, GPU093 at 6:13."""


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the fake rules the only rules for this test."""
    import lint_gpu_tests.codes as codes
    import lint_gpu_tests.rules as rules

    monkeypatch.setattr(rules, "ALL_RULES", list(FAKE_RULES))
    # Configuration validates codes against the code table, not the registry.
    monkeypatch.setattr(codes, "RULE_CODES", {r.code: r.name for r in FAKE_RULES})

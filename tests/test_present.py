"""One presenter for every ``check`` report: a run over a file on disk and the same source
read from stdin (a run of one file) are presented the same way, with and without ``--fix``,
with and without ``--statistics``, in every output format, under every exit option. The
results come from the library (the real rules and fix); only :func:`present` is varied."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from lint_gpu_tests.api import ConfigResolver, RunOptions, RunResult, check_buffer, check_paths
from lint_gpu_tests.report.output import OutputFormat
from lint_gpu_tests.report.present import PresentOptions, present

SOURCE = ('from vllm import LLM\n\n\ndef test_generate():\n    llm = LLM("m")\n'
          '    llm.generate("x")\n')
FIXED = ('import weakref\n\n\ndef test_generate(vllm_runner):\n'
         '    with vllm_runner("m") as runner:\n'
         '        llm = weakref.proxy(runner.llm)\n        llm.generate("x")\n')
MESSAGE = "Engine `LLM(...)` built outside `with vllm_runner(...)`"
SUMMARY = "Found 1 violation.\n[*] 1 fixable with the `--fix` option.\n"
WRAPPED = ('def test_generate(vllm_runner):\n    with vllm_runner("m") as runner:\n'
           '        llm = weakref.proxy(runner.llm)\n        llm.generate("x")\n')
JUNIT_HEAD = ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="gpu-test-lint" '
              'tests="1" skipped="0" failures="{n}" errors="0">\n')


def _junit_left() -> str:
    return (JUNIT_HEAD.format(n=1)
            + '    <testsuite name="test_a.py" tests="1" skipped="0" errors="0" failures="1" '
              'package="org.gpu-test-lint">\n'
              '        <testcase name="org.gpu-test-lint.GPU001" classname="test_a" line="5" '
              'column="11">\n'
              f'            <failure message="{MESSAGE}">line 5, col 11, {MESSAGE}</failure>\n'
              '        </testcase>\n    </testsuite>\n</testsuites>\n')


JUNIT_NONE = (JUNIT_HEAD.format(n=0)
              + '    <testsuite name="gpu-test-lint" tests="1" skipped="0" errors="0" '
                'failures="0" package="org.gpu-test-lint">\n'
                '        <testcase name="No errors found" classname="gpu-test-lint"/>\n'
                '    </testsuite>\n</testsuites>\n')

#: The report of each (fix, format) without ``--statistics``, where it is plain text.
TEXT_REPORTS = {
    (False, OutputFormat.CONCISE): f"test_a.py:5:11: GPU001 [*] {MESSAGE}\n{SUMMARY}",
    (False, OutputFormat.FULL): (
        f"GPU001 [*] {MESSAGE}\n --> test_a.py:5:11\n  |\n3 |\n4 | def test_generate():\n"
        '5 |     llm = LLM("m")\n  |           ^^^^^^^^\n6 |     llm.generate("x")\n  |\n'
        f"help: Wrap in `with vllm_runner(...)`\n{SUMMARY}"),
    (False, OutputFormat.GITHUB): (
        "::error title=gpu-test-lint (GPU001),file=test_a.py,line=5,col=11,endLine=5,"
        f"endColumn=19::GPU001 {MESSAGE}\n"),
    (False, OutputFormat.JUNIT): _junit_left(),
    (True, OutputFormat.CONCISE): "Found 1 violation (1 fixed, 0 remaining).\n",
    (True, OutputFormat.FULL): "Found 1 violation (1 fixed, 0 remaining).\n",
    (True, OutputFormat.GITHUB): "",
    (True, OutputFormat.JUNIT): JUNIT_NONE,
    (True, OutputFormat.JSON): "[]\n",
}
STATISTICS = {False: "1\tGPU001\t[*] engine-outside-runner\n"
                     "[*] 1 fixable with the `--fix` option.\n",
              True: "1\tGPU001\t[*] engine-outside-runner\n"}
#: ``--statistics --output-format json``, as ruff prints it (with or without --fix: the fixed
#: violation is counted).
STATISTICS_JSON = ('[\n  {\n    "code": "GPU001",\n    "name": "engine-outside-runner",\n'
                   '    "count": 1,\n    "fixable": true\n  }\n]\n')
EDITS = [((1, 1), (2, 1), "import weakref\n"), ((4, 1), (7, 1), WRAPPED)]
#: Exit status by (fix, exit option): one violation left without --fix, one fixed with it.
STATUS = {(False, "plain"): 1, (False, "non-zero-on-fix"): 1, (False, "zero"): 0,
          (True, "plain"): 0, (True, "non-zero-on-fix"): 1, (True, "zero"): 0}


Made = dict[tuple[bool, bool, bool], tuple[RunResult, Path]]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """Results by (stdin, fix, edits), each made in a folder of its own holding test_a.py
    (the folder comes with it)."""
    base = tmp_path_factory.mktemp("present")
    made: Made = {}
    here = os.getcwd()
    try:
        for stdin in (False, True):
            for fix in (False, True):
                for edits in (False, True):
                    folder = base / f"{stdin:d}{fix:d}{edits:d}"
                    folder.mkdir()
                    (folder / "test_a.py").write_text(SOURCE)
                    os.chdir(folder)
                    options = RunOptions(fix=fix, edits=edits, cache=False, jobs=1)
                    result = (check_buffer(SOURCE.encode(), "test_a.py", ConfigResolver(),
                                           options)
                              if stdin else check_paths(["test_a.py"], ConfigResolver(), options))
                    made[stdin, fix, edits] = (result, folder)
                    if fix and not stdin:
                        assert (folder / "test_a.py").read_text() == FIXED
        yield made
    finally:
        os.chdir(here)


def _expected_report(fix: bool, statistics: bool, fmt: OutputFormat) -> str | None:
    """The exact report, or ``None`` for JSON and SARIF with a violation (checked parsed)."""
    if statistics and fmt is OutputFormat.JSON:
        return STATISTICS_JSON
    if statistics:
        return STATISTICS[fix]
    if fmt is OutputFormat.SARIF:
        return None
    if fmt is OutputFormat.JSON and not fix:
        return None
    return TEXT_REPORTS[fix, fmt]


def _check_machine_report(report: str, fix: bool, fmt: OutputFormat, cwd: Path) -> None:
    """JSON and SARIF: the violation (none after --fix) and its fix's edits, exactly."""
    edits = [{"content": text, "end_location": {"column": end[1], "row": end[0]},
              "location": {"column": start[1], "row": start[0]}} for start, end, text in EDITS]
    if fmt is OutputFormat.JSON:
        assert json.loads(report) == [{
            "cell": None, "code": "GPU001",
            "end_location": {"column": 19, "row": 5}, "filename": str(cwd / "test_a.py"),
            "fix": {"applicability": "safe", "edits": edits,
                    "message": "Wrap in `with vllm_runner(...)`"},
            "location": {"column": 11, "row": 5}, "message": MESSAGE,
            "name": "engine-outside-runner", "noqa_row": 5, "severity": "error",
            "url": "docs/rules.md#gpu001"}]
        return
    results = json.loads(report)["runs"][0]["results"]
    if fix:
        assert results == []
        return
    artifact = {"uri": "test_a.py", "uriBaseId": "%SRCROOT%"}
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]) for r in results] == [
        ("GPU001", {"artifactLocation": artifact, "region": {
            "startLine": 5, "startColumn": 11, "endLine": 5, "endColumn": 19}})]
    assert results[0]["fixes"][0]["artifactChanges"] == [{
        "artifactLocation": artifact,
        "replacements": [{"deletedRegion": {"startLine": start[0], "startColumn": start[1],
                                            "endLine": end[0], "endColumn": end[1]},
                          "insertedContent": {"text": text}} for start, end, text in EDITS]}]


@pytest.mark.parametrize("exit_option", ["plain", "non-zero-on-fix", "zero"])
@pytest.mark.parametrize("fmt", list(OutputFormat), ids=lambda f: f.value)
@pytest.mark.parametrize("statistics", [False, True], ids=["report", "statistics"])
@pytest.mark.parametrize("fix", [False, True], ids=["check", "fix"])
def test_files_and_stdin_are_presented_alike(
        results: Made, fix: bool, statistics: bool, fmt: OutputFormat, exit_option: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    edits = fmt in (OutputFormat.JSON, OutputFormat.SARIF) and not statistics
    shown = {}
    for stdin in (False, True):
        result, folder = results[stdin, fix, edits]
        monkeypatch.chdir(folder)  # `full` reads the source lines it shows
        options = PresentOptions(fmt=fmt, fix=fix, statistics=statistics, cwd=str(folder),
                                 exit_non_zero_on_fix=exit_option == "non-zero-on-fix",
                                 exit_zero=exit_option == "zero", paths=("test_a.py",),
                                 stdin=SOURCE.encode() if stdin else None)
        shown[stdin] = (tuple(present(result, options)), folder)
    (out, err, status), folder = shown[False]
    expected = _expected_report(fix, statistics, fmt)
    if expected is None:
        _check_machine_report(out, fix, fmt, folder)
    else:
        assert out == expected
    assert (err, status) == ("", STATUS[fix, exit_option])
    (stdin_out, stdin_err, stdin_status), stdin_folder = shown[True]
    report = out.replace(str(folder), str(stdin_folder))  # JSON's absolute file names
    # Under --fix, stdout carries the fixed source and the report goes to stderr.
    assert (stdin_out, stdin_err, stdin_status) == (
        (FIXED, report, status) if fix else (report, "", status))


def test_diff_of_files_and_stdin(results: Made) -> None:
    """``--diff``: the same diff; files on disk add how many violations it fixes (stdin
    does not), and both exit 1 (0 with ``--exit-zero``)."""
    diff = ("--- test_a.py\n+++ test_a.py\n@@ -1,6 +1,7 @@\n-from vllm import LLM\n"
            "+import weakref\n \n \n-def test_generate():\n-    llm = LLM(\"m\")\n"
            "-    llm.generate(\"x\")\n+def test_generate(vllm_runner):\n"
            "+    with vllm_runner(\"m\") as runner:\n+        llm = weakref.proxy(runner.llm)\n"
            "+        llm.generate(\"x\")\n")
    here = os.getcwd()
    try:
        for stdin in (False, True):
            folder = results[False, False, False][1].parent / f"diff{stdin:d}"
            folder.mkdir()
            (folder / "test_a.py").write_text(SOURCE)
            os.chdir(folder)
            options = RunOptions(diff=True, cache=False, jobs=1)
            result = (check_buffer(SOURCE.encode(), "test_a.py", ConfigResolver(), options)
                      if stdin else check_paths(["test_a.py"], ConfigResolver(), options))
            shown = PresentOptions(diff=True, stdin=SOURCE.encode() if stdin else None)
            assert tuple(present(result, shown)) == (
                diff, "" if stdin else "Would fix 1 violation.\n", 1)
            assert tuple(present(result, replace(shown, exit_zero=True)))[2] == 0
            assert (folder / "test_a.py").read_text() == SOURCE
    finally:
        os.chdir(here)


def test_show_fixes_lists_the_fixed_violations_of_files(results: Made,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    result, folder = results[False, True, False]
    monkeypatch.chdir(folder)
    assert tuple(present(result, PresentOptions(fix=True, show_fixes=True))) == (
        "Fixed 1 violation:\n- test_a.py:\n    1 × GPU001 (engine-outside-runner)\n"
        "Found 1 violation (1 fixed, 0 remaining).\n", "", 0)


def test_stdin_excluded_goes_through_unchanged() -> None:
    """A source on stdin that ``--force-exclude`` leaves out is a run of no file: with
    ``--fix`` the source is printed as read, and nothing else."""
    source = SOURCE.encode()
    assert tuple(present(RunResult(), PresentOptions(fix=True, stdin=source))) == (SOURCE, "", 0)
    assert tuple(present(RunResult(), PresentOptions(stdin=source))) == ("", "", 0)


@pytest.mark.parametrize("options", [["--fix", "--exit-non-zero-on-fix"], ["--statistics"],
                                     ["--fix", "--statistics"]])
def test_cli_stdin_and_file_agree(options: list[str], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line, end to end: the same exit status and counts for a file given as a
    path and the same source on stdin (under ``--fix``, stdin's report is on stderr)."""
    from click.testing import CliRunner

    from lint_gpu_tests.interfaces.cli import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "test_a.py").write_text(SOURCE)
    on_stdin = CliRunner().invoke(cli, ["check", "--no-cache", *options, "--stdin-filename",
                                        "test_a.py", "-"], input=SOURCE)
    on_disk = CliRunner().invoke(cli, ["check", "--no-cache", *options, "test_a.py"])
    report = on_stdin.stderr if "--fix" in options else on_stdin.stdout
    assert (on_stdin.exit_code, report) == (on_disk.exit_code, on_disk.stdout)
    assert on_disk.exit_code == (1 if options != ["--fix", "--statistics"] else 0)
    if "--statistics" in options:
        assert report == STATISTICS["--fix" in options]

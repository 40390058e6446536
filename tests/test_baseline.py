"""Baselines (``check --baseline``, ``--update-baseline``, ``--ratchet``, ``baseline`` in the
config, the flake8 plugin's ``--gpu-baseline``; the pre-commit hook's test is in
test_precommit.py): only new violations are reported, entries survive lines moving and go
stale when their statement changes, and the file's bytes are the same on every run."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests.api import (
    BaselineEntry,
    BaselineError,
    BaselineUpdate,
    ConfigResolver,
    apply_run_baselines,
    check_paths,
    read_baseline,
)
from lint_gpu_tests.interfaces import cli
from lint_gpu_tests.interfaces.flake8_plugin import GpuTestLintPlugin
from lint_gpu_tests.report.baseline import render_baseline

TEST = ('from vllm import LLM\n\n\ndef test_a():\n    llm = LLM(\n        model="m",\n'
        '    )\n    llm.generate("hi")\n')
"""One GPU001 at 5:11 (a call over three lines) and nothing else."""
SECOND = '\n\ndef test_b():\n    llm = LLM(\n        model="m",\n    )\n    llm.generate("x")\n'
"""A second test with the same statement (its GPU001 at 12:11 when appended to TEST)."""
GPU001 = "GPU001 [*] Engine `LLM(...)` built outside `with vllm_runner(...)`"


def digest(code: str, path: str, text: str) -> str:
    """The fingerprint's hash as defined: the code, the path relative to the baseline and
    the statement's lines without whitespace."""
    return hashlib.sha256(f"{code}\0{path}\0{text}".encode()).hexdigest()[:16]


STATEMENT = 'llm=LLM(model="m",)'
ENTRY_A = {"path": "tests/test_a.py", "code": "GPU001",
           "fingerprint": f"{digest('GPU001', 'tests/test_a.py', STATEMENT)}:1",
           "statement": "llm = LLM("}


def baseline_text(*entries: dict[str, str]) -> str:
    rows = ",\n".join(f"    {json.dumps(entry)}" for entry in entries)
    body = f"\n{rows}\n  " if entries else ""
    return f'{{\n  "gpu-test-lint-baseline": 1,\n  "entries": [{body}]\n}}\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(TEST)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, ["check", "--no-cache", *args], catch_exceptions=False)


def recorded(project: Path) -> Result:
    """Write the baseline of the project as it is."""
    result = run("--baseline", "gpu-baseline.json", "--update-baseline", "tests")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    return result


# --------------------------------------------------------------------------- the file


def test_update_writes_sorted_relative_entries_and_exit_0(project: Path) -> None:
    result = recorded(project)
    assert result.stderr.splitlines() == ["Added 1 violation to the baseline gpu-baseline.json.",
                                          "Wrote gpu-baseline.json (1 entry)."]
    assert (project / "gpu-baseline.json").read_text() == baseline_text(ENTRY_A)
    check = run("--baseline", "gpu-baseline.json", "tests")
    assert (check.exit_code, check.stdout) == (0, "All checks passed!\n")
    assert check.stderr == "1 violation in the baseline gpu-baseline.json, not reported.\n"


def test_file_bytes_are_stable_across_runs_and_working_directories(project: Path,
                                                                   monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    (project / "tests" / "sub").mkdir()
    (project / "tests" / "sub" / "test_c.py").write_text(TEST + SECOND)
    recorded(project)
    first = (project / "gpu-baseline.json").read_bytes()
    again = run("--baseline", "gpu-baseline.json", "--update-baseline", "tests")
    assert (again.exit_code, again.stderr) == (0, "")  # nothing to add, drop or write
    assert (project / "gpu-baseline.json").read_bytes() == first
    monkeypatch.chdir(project / "tests")  # the same run from elsewhere: the same bytes
    (project / "gpu-baseline.json").unlink()
    result = run("--baseline", "../gpu-baseline.json", "--update-baseline", ".")
    assert result.exit_code == 0
    assert (project / "gpu-baseline.json").read_bytes() == first
    sub = "tests/sub/test_c.py"
    assert first.decode() == baseline_text(  # sorted by path: "tests/sub/" first
        {"path": sub, "code": "GPU001",
         "fingerprint": f"{digest('GPU001', sub, STATEMENT)}:1", "statement": "llm = LLM("},
        {"path": sub, "code": "GPU001",
         "fingerprint": f"{digest('GPU001', sub, STATEMENT)}:2", "statement": "llm = LLM("},
        ENTRY_A)


def test_render_sorts_by_path_code_statement_and_occurrence_as_a_number() -> None:
    entries = [BaselineEntry("b.py", "GPU001", "ff:10", "x"),
               BaselineEntry("b.py", "GPU001", "ff:9", "x"),
               BaselineEntry("a.py", "GPU004", "00:1", "del llm"),
               BaselineEntry("a.py", "GPU001", "00:1", "z")]
    rows = [json.loads(line.rstrip(",")) for line in
            render_baseline(entries).decode().splitlines()[3:-2]]
    assert [(row["path"], row["code"], row["fingerprint"]) for row in rows] == [
        ("a.py", "GPU001", "00:1"), ("a.py", "GPU004", "00:1"), ("b.py", "GPU001", "ff:9"),
        ("b.py", "GPU001", "ff:10")]


# --------------------------------------------------------------------------- matching


def test_one_fingerprint_function_for_sarif_and_baselines() -> None:
    from collections import Counter

    from lint_gpu_tests.ftypes import Location, Violation
    from lint_gpu_tests.report.output import fingerprint

    lines = TEST.splitlines()
    v = Violation("GPU001", "engine-outside-runner", "m", "t.py", Location(5, 11),
                  Location(7, 6))
    seen: Counter[str] = Counter()
    line = digest("GPU001", "k", "llm=LLM(")  # SARIF: the reported line only
    assert [fingerprint(v, "k", lines, seen), fingerprint(v, "k", lines, seen)] == [
        f"{line}:1", f"{line}:2"]
    assert fingerprint(v, "k", lines, Counter(), every_line=True) == \
        f"{digest('GPU001', 'k', STATEMENT)}:1"


def test_moved_lines_and_unrelated_edits_stay_baselined(project: Path) -> None:
    recorded(project)
    (project / "tests" / "test_a.py").write_text(
        '"""Docs."""\nimport os\n\n' + TEST.replace('llm.generate("hi")', 'llm.generate("bye")')
        + "\n\ndef test_ok():\n    assert os.sep\n")
    result = run("--baseline", "gpu-baseline.json", "tests")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    assert result.stderr == "1 violation in the baseline gpu-baseline.json, not reported.\n"


def test_whitespace_in_the_statement_keeps_it_and_an_update_writes_it_as_it_is(
        project: Path) -> None:
    recorded(project)
    (project / "tests" / "test_a.py").write_text(
        TEST.replace("llm = LLM(\n        model=", "llm=LLM(  model="))
    result = run("--baseline", "gpu-baseline.json", "--ratchet", "tests")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    assert result.stderr.splitlines() == [
        "1 violation in the baseline gpu-baseline.json, not reported.",
        "Wrote gpu-baseline.json (1 entry)."]
    assert (project / "gpu-baseline.json").read_text() == baseline_text(
        {**ENTRY_A, "statement": 'llm=LLM(  model="m",'})


def test_a_changed_statement_is_reported(project: Path) -> None:
    recorded(project)
    # the second line of the statement changes: the entry is stale, the violation new
    (project / "tests" / "test_a.py").write_text(TEST.replace('model="m"', 'model="other"'))
    result = run("--baseline", "gpu-baseline.json", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"tests/test_a.py:5:11: {GPU001}",
                                          "Found 1 violation.",
                                          "[*] 1 fixable with the `--fix` option."]
    assert result.stderr == ("1 entry of the baseline gpu-baseline.json no longer occurs "
                             "(--update-baseline or --ratchet drops them).\n")


def test_a_duplicate_statements_second_occurrence_is_reported(project: Path) -> None:
    recorded(project)
    (project / "tests" / "test_a.py").write_text(TEST + SECOND)
    result = run("--baseline", "gpu-baseline.json", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"tests/test_a.py:12:11: {GPU001}"
    assert result.stdout.splitlines()[1] == "Found 1 violation."
    assert result.stderr == "1 violation in the baseline gpu-baseline.json, not reported.\n"


def test_library_outcome(project: Path) -> None:
    recorded(project)
    (project / "tests" / "test_a.py").write_text(TEST + SECOND)
    resolver = ConfigResolver(overrides={"baseline": "gpu-baseline.json"})  # from the cwd
    result = check_paths(["tests"], resolver, cache=False)
    outcome = apply_run_baselines(result, resolver)
    assert [(v.code, v.location.row) for v in outcome.reported] == [("GPU001", 12)]
    assert [(v.code, v.location.row) for v in outcome.files[0].baselined] == [("GPU001", 5)]
    assert outcome.baselined == 1
    assert read_baseline(str(project / "gpu-baseline.json")) == {
        BaselineEntry(ENTRY_A["path"], "GPU001", ENTRY_A["fingerprint"])}


# --------------------------------------------------------------------------- updates


def test_ratchet_drops_what_no_longer_occurs_and_refuses_new(project: Path) -> None:
    (project / "tests" / "test_b.py").write_text(TEST)
    recorded(project)
    b_entry = {**ENTRY_A, "path": "tests/test_b.py",
               "fingerprint": f"{digest('GPU001', 'tests/test_b.py', STATEMENT)}:1"}
    assert (project / "gpu-baseline.json").read_text() == baseline_text(ENTRY_A, b_entry)
    (project / "tests" / "test_b.py").write_text("def test_ok():\n    pass\n")  # fixed
    (project / "tests" / "test_a.py").write_text(TEST + SECOND)  # a new one
    result = run("--baseline", "gpu-baseline.json", "--ratchet", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"tests/test_a.py:12:11: {GPU001}"
    assert result.stderr.splitlines() == [
        "1 violation in the baseline gpu-baseline.json, not reported.",
        "Dropped 1 entry that no longer occurs from gpu-baseline.json:",
        "  tests/test_b.py: GPU001 llm = LLM(",
        "1 new violation not added to the baseline gpu-baseline.json (--ratchet).",
        "Wrote gpu-baseline.json (1 entry).",
    ]
    assert (project / "gpu-baseline.json").read_text() == baseline_text(ENTRY_A)


def test_update_records_new_and_drops_gone(project: Path) -> None:
    (project / "tests" / "test_b.py").write_text(TEST)
    recorded(project)
    (project / "tests" / "test_b.py").write_text("def test_ok():\n    pass\n")
    (project / "tests" / "test_a.py").write_text(TEST + SECOND)
    result = run("--baseline", "gpu-baseline.json", "--update-baseline", "tests")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    assert result.stderr.splitlines() == [
        "Dropped 1 entry that no longer occurs from gpu-baseline.json:",
        "  tests/test_b.py: GPU001 llm = LLM(",
        "Added 1 violation to the baseline gpu-baseline.json.",
        "Wrote gpu-baseline.json (2 entries).",
    ]
    second = {**ENTRY_A, "fingerprint": f"{digest('GPU001', 'tests/test_a.py', STATEMENT)}:2"}
    assert (project / "gpu-baseline.json").read_text() == baseline_text(ENTRY_A, second)


def test_fixed_violations_leave_the_baseline_when_updated(project: Path) -> None:
    recorded(project)
    result = run("--baseline", "gpu-baseline.json", "--fix", "--ratchet", "tests")
    assert (result.exit_code, result.stdout) == (
        0, "Found 1 violation (1 fixed, 0 remaining).\n")
    assert result.stderr.splitlines() == [
        "Dropped 1 entry that no longer occurs from gpu-baseline.json:",
        "  tests/test_a.py: GPU001 llm = LLM(",
        "Wrote gpu-baseline.json (0 entries).",
    ]
    assert (project / "gpu-baseline.json").read_text() == baseline_text()


def test_a_partial_run_keeps_the_other_files_and_codes(project: Path) -> None:
    (project / "tests" / "test_b.py").write_text(TEST)
    recorded(project)
    before = (project / "gpu-baseline.json").read_bytes()
    (project / "tests" / "test_b.py").write_text("def test_ok():\n    pass\n")
    # test_b.py is not checked (pre-commit's staged files): its entry is not stale
    result = run("--baseline", "gpu-baseline.json", "--ratchet", "tests/test_a.py")
    assert (result.exit_code, result.stderr) == (
        0, "1 violation in the baseline gpu-baseline.json, not reported.\n")
    # only GPU004 is reported: the GPU001 entries are not stale either
    result = run("--baseline", "gpu-baseline.json", "--ratchet", "--select", "GPU004", "tests")
    assert (result.exit_code, result.stderr) == (0, "")
    assert (project / "gpu-baseline.json").read_bytes() == before


# --------------------------------------------------------------------------- exit statuses


@pytest.mark.parametrize(("args", "message"), [
    (["--baseline", "missing.json"],
     "error: baseline file {project}/missing.json does not exist (write it with "
     "--update-baseline)\n"),
    (["--baseline", "missing.json", "--ratchet"],
     "error: baseline file {project}/missing.json does not exist (write it with "
     "--update-baseline)\n"),
    (["--baseline", "bad.json"],
     "error: {project}/bad.json: not a gpu-test-lint baseline (expected "
     '{{"gpu-test-lint-baseline": 1, "entries": [...]}})\n'),
    (["--update-baseline"],
     "error: no baseline file is named for the checked files (--baseline FILE, or `baseline` "
     "in [tool.gpu-test-lint])\n"),
    (["--baseline", "b.json", "--update-baseline", "--diff"],
     "error: --update-baseline and --ratchet cannot be combined with --diff, --add-noqa, "
     "--select-confirmed or --stdin-filename\n"),
])
def test_errors_exit_2(project: Path, args: list[str], message: str) -> None:
    (project / "bad.json").write_text('{"entries": []}\n')
    result = run(*args, "tests")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == message.format(project=project)


def test_statuses_follow_the_new_violations(project: Path) -> None:
    assert run("tests").exit_code == 1  # no baseline: as before
    recorded(project)
    assert run("--baseline", "gpu-baseline.json", "tests").exit_code == 0
    (project / "tests" / "test_a.py").write_text(TEST + SECOND)
    assert run("--baseline", "gpu-baseline.json", "tests").exit_code == 1
    assert run("--baseline", "gpu-baseline.json", "--exit-zero", "tests").exit_code == 0
    assert run("--baseline", "gpu-baseline.json", "--update-baseline", "tests").exit_code == 0
    assert run("--baseline", "gpu-baseline.json", "tests").exit_code == 0


def test_statistics_say_how_many_were_baselined(project: Path) -> None:
    recorded(project)
    (project / "tests" / "test_a.py").write_text(TEST + SECOND)
    result = run("--baseline", "gpu-baseline.json", "--statistics", "tests")
    assert result.exit_code == 1
    assert result.stdout == ("1\tGPU001\t[*] engine-outside-runner\n"
                             "[*] 1 fixable with the `--fix` option.\n")
    assert result.stderr == "1 violation in the baseline gpu-baseline.json, not reported.\n"


def test_stdin_is_matched_on_its_own_text(project: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    recorded(project)
    source = TEST + SECOND
    result = CliRunner().invoke(cli.cli, ["check", "--baseline", "gpu-baseline.json",
                                          "--stdin-filename", "tests/test_a.py"],
                                input=source, catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"tests/test_a.py:12:11: {GPU001}"


# --------------------------------------------------------------------------- config


def test_config_key_is_relative_to_the_config_file(project: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.gpu-test-lint]\nbaseline = "ci/gpu-baseline.json"\n')
    (project / "ci").mkdir()
    monkeypatch.chdir(project / "tests")
    result = run("--update-baseline", ".")
    assert result.stderr.splitlines()[-1] == f"Wrote {project}/ci/gpu-baseline.json (1 entry)."
    entry = {**ENTRY_A, "path": "../tests/test_a.py",
             "fingerprint": f"{digest('GPU001', '../tests/test_a.py', STATEMENT)}:1"}
    assert (project / "ci" / "gpu-baseline.json").read_text() == baseline_text(entry)
    result = run(".")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    settings = run("--show-settings", ".").stdout.splitlines()
    assert [line for line in settings if line.startswith("baseline")] == [
        f'baseline = "{project}/ci/gpu-baseline.json"']


def test_config_key_must_be_a_path(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.gpu-test-lint]\nbaseline = 1\n")
    result = run("tests")
    assert (result.exit_code, result.stderr) == (
        2, f"error: {project}/pyproject.toml: `baseline` must be a path (a non-empty string)\n")


def test_the_baseline_is_not_part_of_the_cache_key(project: Path) -> None:
    resolver = ConfigResolver()
    plain = resolver.for_file("tests/test_a.py")
    named = ConfigResolver(overrides={"baseline": "/x.json"}).for_file("tests/test_a.py")
    assert named.baseline == "/x.json"
    assert named.fingerprint() == plain.fingerprint()


# --------------------------------------------------------------------------- flake8


def test_flake8_plugin_reports_only_new(project: Path) -> None:
    recorded(project)
    path = project / "tests" / "test_a.py"
    source = TEST + SECOND
    path.write_text(source)
    lines = source.splitlines(keepends=True)
    try:
        GpuTestLintPlugin.baseline = str(project / "gpu-baseline.json")
        found = list(GpuTestLintPlugin(ast.parse(source), str(path), lines).run())
        GpuTestLintPlugin.baseline = str(project / "missing.json")
        error = list(GpuTestLintPlugin(ast.parse(source), str(path), lines).run())
    finally:
        GpuTestLintPlugin.baseline = None
    assert [(row, col, message.split()[0]) for row, col, message, _ in found] == [
        (12, 10, "GPU001")]
    assert [(row, col, message) for row, col, message, _ in error] == [
        (1, 0, f"GPU999 baseline error: baseline file {project}/missing.json does not exist "
               "(write it with --update-baseline)")]


def _flake8(cwd: Path, *args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "flake8", "-j", "1", "--select", "GPU",
                           "--format", "%(path)s:%(row)d:%(code)s", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.splitlines()


def test_flake8_option_and_config_key(project: Path) -> None:
    recorded(project)
    (project / "tests" / "test_a.py").write_text(TEST + SECOND)
    assert _flake8(project, "tests") == ["tests/test_a.py:5:GPU001", "tests/test_a.py:12:GPU001"]
    assert _flake8(project, "--gpu-baseline", "gpu-baseline.json", "tests") == [
        "tests/test_a.py:12:GPU001"]
    # flake8 anchors a config path at the config file when it has a `/` (as for `exclude`)
    (project / "setup.cfg").write_text("[flake8]\ngpu-baseline = ./gpu-baseline.json\n")
    assert _flake8(project / "tests", ".") == ["./test_a.py:12:GPU001"]
    (project / "setup.cfg").unlink()
    (project / "pyproject.toml").write_text(
        '[tool.gpu-test-lint]\nbaseline = "gpu-baseline.json"\n')
    assert _flake8(project, "tests") == ["tests/test_a.py:12:GPU001"]


def test_baseline_error_is_raised_by_the_library(project: Path) -> None:
    resolver = ConfigResolver(overrides={"baseline": str(project / "nope.json")})
    result = check_paths(["tests"], resolver, cache=False)
    with pytest.raises(BaselineError, match="does not exist"):
        apply_run_baselines(result, resolver)
    outcome = apply_run_baselines(result, resolver, BaselineUpdate.WRITE)
    assert [e.path for e in outcome.files[0].added] == ["tests/test_a.py"]

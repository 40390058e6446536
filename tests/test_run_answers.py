"""A report-only ``check`` run again on an unchanged tree is answered before the checker is
imported, with the same output and exit status; anything the output depends on that
changes makes the run a full one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lint_gpu_tests.running import answers

REPO = Path(__file__).resolve().parents[1]

ENGINE = "from vllm import LLM\n\n\ndef test_a():\n    llm = LLM('m')\n    llm.generate([])\n"


def _project(root: Path) -> Path:
    (root / "tests" / "sub").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "tests" / "test_a.py").write_text(ENGINE)
    (root / "tests" / "sub" / "notes.txt").write_text("not python\n")
    return root


def _run(cwd: Path, *args: str) -> tuple[int, str, str, list[str]]:
    """``python -X importtime -m lint_gpu_tests ARGS``: exit status, stdout, stderr without
    the import lines, and the package's modules the process imported."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GPU_TEST_LINT_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "lint_gpu_tests", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, check=False,
                          timeout=120)
    imports = [line for line in proc.stderr.splitlines() if line.startswith("import time:")]
    stderr = "".join(line + "\n" for line in proc.stderr.splitlines()
                     if not line.startswith("import time:"))
    modules = [line.rsplit("|", 1)[1].strip() for line in imports[1:]]
    return proc.returncode, proc.stdout, stderr, modules


def _kept(cwd: Path) -> list[str]:
    runs = cwd / ".gpu-test-lint-cache" / answers.RUNS_DIR
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


def test_an_unchanged_tree_is_answered_without_the_checker_and_a_change_is_seen(
        tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / ".gpu-test-lint-cache").mkdir()  # else the first run's making it is racy
    time.sleep(answers.RACY_NS / 1e9 + 0.1)  # older than the racy window
    full = _run(project, "check", "--output-format", "json", "tests")
    assert full[0] == 1 and '"code": "GPU001"' in full[1]
    assert "click" in full[3] and len(_kept(project)) == 1
    replayed = _run(project, "check", "--output-format", "json", "tests")
    assert replayed[:3] == full[:3]
    assert "click" not in replayed[3]
    assert sorted(m for m in replayed[3] if m.startswith("lint_gpu_tests")) == [
        "lint_gpu_tests", "lint_gpu_tests.interfaces", "lint_gpu_tests.interfaces.entry",
        "lint_gpu_tests.running", "lint_gpu_tests.running.answers"]
    # Another command line is another answer; a new file where the run looked is seen.
    concise = _run(project, "check", "tests")
    assert concise[1].splitlines()[-2:] == ["Found 1 violation.",
                                           "[*] 1 fixable with the `--fix` option."]
    (project / "tests" / "sub" / "test_b.py").write_text(ENGINE)
    again = _run(project, "check", "tests")
    assert "click" in again[3]
    assert again[1].splitlines()[-2] == "Found 2 violations."


def test_a_run_that_writes_or_reads_stdin_keeps_no_answer(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / ".gpu-test-lint-cache").mkdir()
    time.sleep(answers.RACY_NS / 1e9 + 0.1)
    _run(project, "check", "--diff", "tests")
    _run(project, "check", "--no-cache", "tests")
    assert _kept(project) == []
    assert _run(project, "check", "--fix", "tests")[0] == 0
    assert _kept(project) == []
    # Files just written are racy: this run keeps no answer either.
    assert _run(project, "check", "tests")[0] == 0
    assert _kept(project) == []


def _snap(listed: list[Path], above: list[Path]) -> str | None:
    return answers.snapshot([str(p) for p in listed], [str(p) for p in above])


@pytest.mark.parametrize("change", [
    "edit", "new_module", "new_directory", "removed_module", "config_above", "gitignore",
    "conftest_above", "git_exclude",
])
def test_the_snapshot_changes_with_what_the_run_depends_on(tmp_path: Path, change: str
                                                            ) -> None:
    project = _project(tmp_path / "p")
    (project / ".git" / "info").mkdir(parents=True)
    tests, sub = project / "tests", project / "tests" / "sub"
    listed, above = [tests, sub], [project, tmp_path]
    before = _snap(listed, above)
    if change == "edit":
        (tests / "test_a.py").write_text(ENGINE + "\n")
    elif change == "new_module":
        (sub / "test_b.py").write_text(ENGINE)
    elif change == "new_directory":
        (tests / "more").mkdir()
    elif change == "removed_module":
        (tests / "test_a.py").unlink()
    elif change == "config_above":
        (tmp_path / ".gpu-test-lint.toml").write_text("ignore = ['GPU001']\n")
    elif change == "gitignore":
        (project / ".gitignore").write_text("tests/\n")
    elif change == "conftest_above":
        (project / "conftest.py").write_text("")
    else:
        (project / ".git" / "info" / "exclude").write_text("tests/\n")
    assert before is not None and _snap(listed, above) != before


def test_the_snapshot_holds_through_what_the_run_never_reads(tmp_path: Path) -> None:
    project = _project(tmp_path / "p")
    tests, sub = project / "tests", project / "tests" / "sub"
    listed, above = [tests, sub], [project, tmp_path]
    before = _snap(listed, above)
    (sub / "notes.txt").write_text("changed\n")
    (sub / "data.json").write_text("{}\n")
    (tests / "__pycache__").mkdir()
    (project / "README.md").write_text("readme\n")
    (project / "docs").mkdir()  # a directory above is not listed whole
    assert _snap(listed, above) == before


def test_a_racy_snapshot_is_refused(tmp_path: Path) -> None:
    project = _project(tmp_path / "p")
    listed = [str(project / "tests")]
    # Files written just now, by a run that started now or earlier: refused.
    assert answers.snapshot(listed, [], time.time_ns()) is None
    assert answers.snapshot(listed, [], time.time_ns() - answers.RACY_NS * 10) is None
    # A run that started long after they were written takes its snapshot.
    assert answers.snapshot(listed, [], time.time_ns() + answers.RACY_NS * 10) is not None


def test_the_cache_directory_follows_the_options_and_the_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(answers.CACHE_DIR_ENV, raising=False)
    w = str(tmp_path)
    assert answers.cache_dir_of(["check", "tests"], w) == f"{w}/.gpu-test-lint-cache"
    assert answers.cache_dir_of(["--cache-dir", "c", "tests"], w) == f"{w}/c"
    assert answers.cache_dir_of(["--cache-dir=/abs", "tests"], w) == "/abs"
    assert answers.cache_dir_of(["--no-cache", "tests"], w) is None
    assert answers.cache_dir_of(["--", "--no-cache"], w) == f"{w}/.gpu-test-lint-cache"
    # Below the config root, the result cache's directory there, when it exists.
    (tmp_path / "tests" / "sub").mkdir(parents=True)
    below = str(tmp_path / "tests" / "sub")
    assert answers.cache_dir_of(["."], below) == f"{below}/.gpu-test-lint-cache"
    (tmp_path / ".gpu-test-lint-cache").mkdir()
    assert answers.cache_dir_of(["."], below) == f"{w}/.gpu-test-lint-cache"
    monkeypatch.setenv(answers.CACHE_DIR_ENV, "envdir")
    assert answers.cache_dir_of(["tests"], w) == f"{w}/envdir"


def test_a_run_below_the_config_root_is_answered_from_the_cache_there(tmp_path: Path
                                                                      ) -> None:
    project = _project(tmp_path)
    (project / "pyproject.toml").write_text("[tool.gpu-test-lint]\nselect = ['GPU']\n")
    (project / ".gpu-test-lint-cache").mkdir()  # the config root's, as a first run makes it
    time.sleep(answers.RACY_NS / 1e9 + 0.1)
    full = _run(project / "tests", "check", ".")
    assert full[0] == 1 and "click" in full[3] and len(_kept(project)) == 1
    replayed = _run(project / "tests", "check", ".")
    assert replayed[:3] == full[:3] and "click" not in replayed[3]
    assert not (project / "tests" / ".gpu-test-lint-cache").exists()


def test_a_change_of_the_projects_runner_outside_the_tree_is_seen(tmp_path: Path) -> None:
    """The config above the project names a runner beside it: a module no walk lists."""
    project = _project(tmp_path / "p")
    (tmp_path / ".gpu-test-lint.toml").write_text("runner = \"lib.runners:managed_llm\"\n")
    (tmp_path / "lib").mkdir()
    runner = ("import contextlib\n\n\n@contextlib.contextmanager\n"
              "def managed_llm(**llm_kwargs):\n    yield None\n")
    (tmp_path / "lib" / "runners.py").write_text(runner)
    (project / ".gpu-test-lint-cache").mkdir()
    time.sleep(answers.RACY_NS / 1e9 + 0.1)
    full = _run(project, "check", "tests")
    assert full[0] == 1 and len(_kept(project)) == 1, full[2]
    replayed = _run(project, "check", "tests")
    assert replayed[:3] == full[:3] and "click" not in replayed[3]
    (tmp_path / "lib" / "runners.py").write_text(runner.replace("**llm_kwargs", "model"))
    again = _run(project, "check", "tests")
    assert "click" in again[3]

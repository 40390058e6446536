"""The pre-commit hooks, run as pre-commit runs them: the hook's ``entry`` plus ``args``
plus the staged files that match its ``types``, in the repository root, in a subprocess.

(``pre-commit try-repo`` would build a fresh virtualenv and install this package from an
index, which a test cannot rely on; this runs the same command line with the installed
console script instead.)
"""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SAMPLE = 'from vllm import LLM\n\ndef test_x():\n    llm = LLM("m")\n    llm.generate("hi")\n'
CLEAN = "def test_ok():\n    assert True\n"


def hooks() -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    return {hook["id"]: hook for hook in data}


def test_hook_definitions() -> None:
    found = hooks()
    assert list(found) == ["gpu-test-lint", "gpu-test-lint-fix"]
    for hook in found.values():
        assert set(hook) >= {"id", "name", "entry", "language", "types"}
        assert hook["language"] == "python"
        assert hook["types"] == ["python"]
        assert shlex.split(hook["entry"])[0] == "gpu-test-lint"
    assert "--fix" not in shlex.split(found["gpu-test-lint"]["entry"])
    assert "--fix" in shlex.split(found["gpu-test-lint-fix"]["entry"])


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout


def staged_python_files(repo: Path) -> list[str]:
    """What pre-commit hands a hook with ``types: [python]``: staged files, Python only."""
    names = git(repo, "diff", "--cached", "--name-only", "--diff-filter=ACMR").splitlines()
    return [n for n in names if n.endswith((".py", ".pyi"))]


def run_hook(repo: Path, hook_id: str) -> subprocess.CompletedProcess[str]:
    hook = hooks()[hook_id]
    argv = shlex.split(hook["entry"]) + list(hook.get("args", []))
    exe = Path(sys.executable).with_name(argv[0])
    if not exe.exists():
        pytest.skip("gpu-test-lint console script not installed next to this interpreter")
    return subprocess.run([str(exe), *argv[1:], *staged_python_files(repo)], cwd=repo,
                          capture_output=True, text=True, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gpu-test-lint]\nextend-exclude = ["tests/legacy/"]\n')
    (tmp_path / "tests" / "legacy").mkdir(parents=True)
    (tmp_path / "tests" / "test_ok.py").write_text(CLEAN)
    (tmp_path / "tests" / "legacy" / "test_old.py").write_text(SAMPLE)
    (tmp_path / "README.md").write_text("not python\n")
    git(tmp_path, "add", ".")
    return tmp_path


def test_check_hook_passes_clean_files_and_honours_excludes(repo: Path) -> None:
    proc = run_hook(repo, "gpu-test-lint")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "All checks passed!\n", "")


def test_check_hook_fails_on_violation(repo: Path) -> None:
    (repo / "tests" / "test_new.py").write_text(SAMPLE)
    git(repo, "add", ".")
    proc = run_hook(repo, "gpu-test-lint")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[0].startswith("tests/test_new.py:4:11: GPU001 [*] ")
    assert (repo / "tests" / "test_new.py").read_text() == SAMPLE


def test_fix_hook_rewrites_then_check_hook_passes(repo: Path) -> None:
    if importlib.util.find_spec("lint_gpu_tests.codemods.driver") is None:
        pytest.skip("lint_gpu_tests.codemods.driver not in the tree yet")
    (repo / "tests" / "test_new.py").write_text(SAMPLE)
    git(repo, "add", ".")
    fixed = run_hook(repo, "gpu-test-lint-fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "with vllm_runner(" in (repo / "tests" / "test_new.py").read_text()
    git(repo, "add", ".")
    assert run_hook(repo, "gpu-test-lint").returncode == 0


def test_check_hook_reports_only_what_the_config_baseline_does_not_record(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(
        '[tool.gpu-test-lint]\nextend-exclude = ["tests/legacy/"]\n'
        'baseline = "gpu-baseline.json"\n')
    (repo / "tests" / "test_new.py").write_text(SAMPLE)
    git(repo, "add", ".")
    missing = run_hook(repo, "gpu-test-lint")
    assert (missing.returncode, missing.stderr) == (
        2, f"error: baseline file {repo}/gpu-baseline.json does not exist (write it with "
           "--update-baseline)\n")
    recorded = subprocess.run(
        [str(Path(sys.executable).with_name("gpu-test-lint")), "check", "--update-baseline",
         "tests"], cwd=repo, capture_output=True, text=True, check=False)
    assert recorded.returncode == 0, recorded.stderr
    (repo / "tests" / "test_new.py").write_text(
        SAMPLE + '\n\ndef test_y():\n    llm = LLM("other")\n    llm.generate("hi")\n')
    git(repo, "add", ".")
    proc = run_hook(repo, "gpu-test-lint")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[:2] == [
        "tests/test_new.py:9:11: GPU001 [*] Engine `LLM(...)` built outside "
        "`with vllm_runner(...)`", "Found 1 violation."]
    assert proc.stderr == "1 violation in the baseline gpu-baseline.json, not reported.\n"

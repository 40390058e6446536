"""The repository is clean under its own tool (as flake8-bugbear runs itself on its source)."""

from __future__ import annotations

from pathlib import Path

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.config import load_config_file

ROOT = Path(__file__).resolve().parent.parent


def test_repository_is_clean_under_gpu_test_lint() -> None:
    config = load_config_file(ROOT / "pyproject.toml")
    result = check_paths([str(ROOT)], config, cache=False, jobs=1)
    checked = [Path(f.path) for f in result.files]
    assert ROOT / "lint_gpu_tests" / "checking" / "checker.py" in checked
    assert not any("fixtures" in p.parts or "examples" in p.parts for p in checked)
    assert [(f.path, v.code, v.location.row) for f in result.files for v in f.violations] == []
    assert [f.error for f in result.files if f.error] == []

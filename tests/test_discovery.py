"""File discovery: default excludes, virtualenvs, .gitignore (nested), exclude /
extend-exclude, explicit files, missing paths, symlink trouble, order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lint_gpu_tests.config import Config
from lint_gpu_tests.running.discovery import PathNotFoundError, Problem, discover_files


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    touch(tmp_path, "tests/test_b.py", "tests/test_a.py", "tests/sub/test_c.py",
          "tests/data.txt", "tests/stub.pyi")
    return tmp_path


def files(paths: list[str], config: Config | None = None, **kw: bool) -> list[str]:
    return discover_files(paths, config or Config(root=os.getcwd()), **kw).files


def test_recurses_into_py_files_sorted(project: Path) -> None:
    assert files(["tests"]) == ["tests/sub/test_c.py", "tests/test_a.py", "tests/test_b.py"]
    assert files([]) == files(["."]) == files(["tests"])
    assert files(["./tests/../tests"]) == files(["tests"])


def test_default_excludes(project: Path) -> None:
    touch(project, ".git/hooks/x.py", ".venv/lib/a.py", "venv/a.py", "build/a.py", "dist/a.py",
          "tests/__pycache__/a.py", ".tox/a.py", ".nox/a.py", "node_modules/a.py",
          "pkg.egg-info/a.py", "deep/build/a.py", "myenv/pyvenv.cfg", "myenv/lib/a.py")
    assert files(["."]) == ["tests/sub/test_c.py", "tests/test_a.py", "tests/test_b.py"]


def test_exclude_replaces_defaults_extend_exclude_adds(project: Path) -> None:
    touch(project, "build/test_x.py", "tests/legacy/test_old.py")
    config = Config(root=str(project), exclude=("tests/sub/",))
    assert files(["."], config) == ["build/test_x.py", "tests/legacy/test_old.py",
                                    "tests/test_a.py", "tests/test_b.py"]
    config = Config(root=str(project), extend_exclude=("legacy/", "test_b.py"))
    assert files(["."], config) == ["tests/sub/test_c.py", "tests/test_a.py"]


def test_exclude_anchored_at_config_root(project: Path) -> None:
    config = Config(root=str(project), extend_exclude=("/tests/sub",))
    assert files(["tests"], config) == ["tests/test_a.py", "tests/test_b.py"]
    os.chdir(project / "tests")
    assert files(["."], config) == ["test_a.py", "test_b.py"]


def test_gitignore_including_nested_and_negation(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("generated/\ntest_b.py\n")
    (project / "tests" / "sub" / ".gitignore").write_text("*.py\n!test_c.py\ntest_skip*\n")
    touch(project, "tests/generated/test_g.py", "tests/sub/test_d.py", "tests/sub/test_skip1.py",
          "other/test_b.py")
    assert files(["."]) == ["tests/sub/test_c.py", "tests/test_a.py"]
    # the root .gitignore applies when walking a subdirectory too
    assert files(["tests"]) == ["tests/sub/test_c.py", "tests/test_a.py"]
    assert files(["."], respect_gitignore=False) == [
        "other/test_b.py", "tests/generated/test_g.py", "tests/sub/test_c.py",
        "tests/sub/test_d.py", "tests/sub/test_skip1.py", "tests/test_a.py", "tests/test_b.py"]


def test_git_info_exclude(project: Path) -> None:
    (project / ".git" / "info").mkdir(parents=True)
    (project / ".git" / "info" / "exclude").write_text("test_a.py\n")
    assert files(["tests"]) == ["tests/sub/test_c.py", "tests/test_b.py"]


def test_explicit_files_always_checked(project: Path) -> None:
    (project / ".gitignore").write_text("test_a.py\n")
    (project / ".git").mkdir()
    touch(project, "build/test_x.py")
    config = Config(root=str(project), extend_exclude=("tests/test_b.py",))
    named = ["tests/test_a.py", "tests/test_b.py", "build/test_x.py", "tests/data.txt"]
    assert files(named, config) == ["build/test_x.py", "tests/data.txt", "tests/test_a.py",
                                    "tests/test_b.py"]
    assert files(named, config, force_exclude=True) == ["tests/data.txt"]


def test_duplicates_collapsed(project: Path) -> None:
    assert files(["tests", "tests/test_a.py", "./tests/test_a.py"]) == [
        "tests/sub/test_c.py", "tests/test_a.py", "tests/test_b.py"]


def test_missing_path_raises(project: Path) -> None:
    with pytest.raises(PathNotFoundError, match=r"^nope: path does not exist$"):
        files(["tests", "nope"])
    os.symlink("missing", "dangling.py")
    with pytest.raises(PathNotFoundError, match=r"^dangling.py: path is a dangling symlink$"):
        files(["dangling.py"])


def test_symlink_loop_and_dangling_link_reported_run_goes_on(project: Path) -> None:
    os.symlink("..", project / "tests" / "sub" / "loop")
    os.symlink("nowhere.py", project / "tests" / "broken.py")
    found = discover_files(["tests"], Config(root=str(project)))
    assert found.files == ["tests/sub/test_c.py", "tests/test_a.py", "tests/test_b.py"]
    assert found.problems == [Problem("tests/broken.py", "dangling symlink"),
                              Problem("tests/sub/loop", "symlink loop")]


def test_symlinked_directory_followed(project: Path, tmp_path_factory: pytest.TempPathFactory
                                      ) -> None:
    outside = tmp_path_factory.mktemp("outside")
    touch(outside, "test_out.py")
    os.symlink(outside, project / "tests" / "linked")
    assert "tests/linked/test_out.py" in files(["tests"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable directories")
def test_unreadable_directory_reported(project: Path) -> None:  # pragma: no cover - non-root
    locked = project / "tests" / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        found = discover_files(["tests"], Config(root=str(project)))
    finally:
        locked.chmod(0o755)
    assert found.problems[0].path == "tests/locked"
    assert found.problems[0].fatal


def test_unreadable_directory_reported_as_fatal(project: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    real_scandir = os.scandir

    def scandir(path: str):  # type: ignore[no-untyped-def]
        if str(path).endswith("sub"):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = discover_files(["tests"], Config(root=str(project)))
    assert found.files == ["tests/test_a.py", "tests/test_b.py"]
    assert found.problems == [
        Problem("tests/sub", "cannot read directory: Permission denied", fatal=True)]

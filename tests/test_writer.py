"""Atomic writes: exact bytes, kept mode, symlinks written through, no debris on failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lint_gpu_tests.parsing import writer


def test_exact_bytes_and_mode_kept(tmp_path: Path) -> None:
    target = tmp_path / "t.py"
    target.write_bytes(b"old\n")
    target.chmod(0o751)
    data = "\ufeffx = 1\r\ny = 'é'\r\n".encode()
    writer.atomic_write(target, data)
    assert target.read_bytes() == data
    assert target.stat().st_mode & 0o7777 == 0o751
    assert sorted(os.listdir(tmp_path)) == ["t.py"]


def test_new_file_gets_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        writer.atomic_write(tmp_path / "new.py", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "new.py").stat().st_mode & 0o777 == 0o644


def test_symlink_target_written_link_kept(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_bytes(b"a")
    os.symlink("real.py", tmp_path / "link.py")
    writer.atomic_write(tmp_path / "link.py", b"b")
    assert os.path.islink(tmp_path / "link.py")
    assert (tmp_path / "real.py").read_bytes() == b"b"


def test_failure_leaves_original_and_no_temp(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "t.py"
    target.write_bytes(b"original")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space"):
        writer.atomic_write(target, b"new")
    assert target.read_bytes() == b"original"
    assert os.listdir(tmp_path) == ["t.py"]


def test_write_if_changed(tmp_path: Path) -> None:
    target = tmp_path / "t.py"
    target.write_bytes(b"same")
    before = target.stat().st_ino
    assert writer.write_if_changed(target, b"same") is False
    assert target.stat().st_ino == before
    assert writer.write_if_changed(target, b"other", old=b"same") is True
    assert target.read_bytes() == b"other"
    assert writer.write_if_changed(tmp_path / "fresh.py", b"x") is True

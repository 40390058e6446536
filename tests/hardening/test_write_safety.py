"""Write safety of ``--fix``: atomic replace, mode and owner kept, nothing written
when nothing changes, two runs at once never tear a file, a damaged cache is harmless."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source
from lint_gpu_tests.interfaces import cli
from lint_gpu_tests.running.cache import CACHE_DIR_NAME

ENGINE = ('from vllm import LLM\n\n\ndef test_{n}():\n    llm = LLM("m{n}")\n'
          '    llm.generate("hi")\n')
FIXED = ('import weakref\n\n\ndef test_{n}(vllm_runner):\n    with vllm_runner("m{n}") as runner:\n'
         '        llm = weakref.proxy(runner.llm)\n        llm.generate("hi")\n')
CLEAN = 'def test_{n}():\n    assert {n} == {n}\n'
# Returned to the caller: GPU001 with no fix, so --fix leaves it alone.
UNFIXABLE = 'from vllm import LLM\n\n\ndef build_{n}():\n    return LLM("m{n}")\n'
OLD = 1_000_000_000  # an mtime far in the past: any write would move it


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli.cli, ["check", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result


def write(project: Path, name: str, text: str) -> Path:
    path = project / "tests" / name
    path.write_text(text)
    os.utime(path, ns=(OLD, OLD))
    return path


def test_fix_replaces_atomically_and_leaves_no_temporary_file(project: Path) -> None:
    path = write(project, "test_a.py", ENGINE.format(n=1))
    inode = path.stat().st_ino
    assert run("--fix", "--no-cache", "tests").exit_code == 0
    assert path.read_text() == FIXED.format(n=1)
    assert path.stat().st_ino != inode  # a new file renamed over the old, not rewritten in place
    assert sorted(p.name for p in (project / "tests").iterdir()) == ["test_a.py"]


def test_mode_kept(project: Path) -> None:
    path = write(project, "test_a.py", ENGINE.format(n=1))
    path.chmod(0o751)
    assert run("--fix", "--no-cache", "tests").exit_code == 0
    assert path.read_text() == FIXED.format(n=1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o751


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root can give a file to another owner")
def test_owner_and_group_kept(project: Path) -> None:
    path = write(project, "test_a.py", ENGINE.format(n=1))
    os.chown(path, 4321, 4322)
    assert run("--fix", "--no-cache", "tests").exit_code == 0
    assert path.read_text() == FIXED.format(n=1)
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4322)


def test_group_kept_for_a_user(project: Path) -> None:
    # Whoever runs the tests may keep a group they belong to (root: any).
    path = write(project, "test_a.py", ENGINE.format(n=1))
    group = os.getgroups()[-1] if os.getgroups() else os.getgid()
    os.chown(path, -1, group)
    assert run("--fix", "--no-cache", "tests").exit_code == 0
    assert path.stat().st_gid == group


@pytest.mark.parametrize("text", [CLEAN.format(n=1), UNFIXABLE.format(n=1), ""],
                         ids=["clean", "unfixable", "empty"])
def test_nothing_written_when_nothing_changes(project: Path, text: str) -> None:
    path = write(project, "test_a.py", text)
    before = path.stat()
    run("--fix", "--unsafe-fixes", "--no-cache", "tests")
    after = path.stat()
    assert path.read_text() == text
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, OLD)


def _tree(project: Path, count: int = 200) -> dict[Path, tuple[bytes, bytes]]:
    """``count`` files: every fourth fixable, the rest clean or unfixable; path -> (old, new)."""
    states: dict[Path, tuple[bytes, bytes]] = {}
    for n in range(count):
        sub = project / "tests" / f"pkg{n % 10}"
        sub.mkdir(exist_ok=True)
        template = (ENGINE, CLEAN, UNFIXABLE, CLEAN)[n % 4]
        path = sub / f"test_{n:03d}.py"
        old = template.format(n=n).encode()
        path.write_bytes(old)
        new = FIXED.format(n=n).encode() if template is ENGINE else old
        states[path] = (old, new)
    return states


def test_two_fix_runs_at_once_never_tear_a_file(project: Path) -> None:
    states = _tree(project)
    old, new = states[project / "tests" / "pkg0" / "test_000.py"]
    assert fix_source(old, "tests/test_000.py", Config()).new_source == new
    command = [sys.executable, "-m", "lint_gpu_tests.interfaces.cli", "check", "--fix", "-q",
               "tests"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    runs = [subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [proc.communicate(timeout=300) for proc in runs]
    for proc, (_out, err) in zip(runs, outputs, strict=True):
        assert proc.returncode == 1, err.decode()  # the unfixable files are left
        assert err == b""
    for path, (old, new) in states.items():
        assert path.read_bytes() in (old, new), path
    # Both runs fix the same bytes the same way; whichever wrote last, every file is new.
    assert all(path.read_bytes() == new for path, (_, new) in states.items())
    leftovers = [p for p in (project / "tests").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    # The shared cache the two runs merged is still sound: a third run agrees, uncached.
    cached = run("-q", "tests")
    assert cached.stdout == run("-q", "--no-cache", "tests").stdout
    assert cached.stdout.count("GPU001") == 50


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "wrong-shape"])
def test_cache_survives_a_damaged_cache_file(project: Path, damage: str) -> None:
    write(project, "test_a.py", ENGINE.format(n=1))
    write(project, "test_b.py", UNFIXABLE.format(n=2))
    first = run("tests")
    (cache_file,) = (project / CACHE_DIR_NAME).rglob("*.json")
    data = cache_file.read_bytes()
    cache_file.write_bytes({
        "truncate": data[: len(data) // 2],
        "garbage": b"\x00\xff not json at all",
        "empty": b"",
        "wrong-shape": b'{"format": 1, "entries": {"x": [1, [[2]]], "y": "z"}}',
    }[damage])
    second = run("tests")
    assert (second.exit_code, second.stdout, second.stderr) == \
        (first.exit_code, first.stdout, first.stderr)
    third = run("tests")  # from the rewritten cache
    assert (third.exit_code, third.stdout) == (first.exit_code, first.stdout)

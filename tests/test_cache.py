"""The content-hash cache: keys, invalidation, corruption, concurrent writers, location."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import fake_rules
import pytest

from lint_gpu_tests import api
from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import Applicability, FixInfo, Location, Violation
from lint_gpu_tests.running import cache
from lint_gpu_tests.running import run as run_module
from lint_gpu_tests.running.cache import ResultCache, content_hash

V = Violation("GPU091", "fake-safe", "msg", "t.py", Location(4, 11), Location(4, 19),
              FixInfo(Applicability.UNSAFE, "Wrap", "escapes"))


def test_roundtrip_and_hash_key(tmp_path: Path) -> None:
    store = ResultCache(tmp_path, "fp")
    store.store("t.py", content_hash(b"a"), [V, V.__class__(**{**V.__dict__, "fix": None})])
    store.save()
    again = ResultCache(tmp_path, "fp")
    assert again.lookup("t.py", content_hash(b"a")) == [
        V, Violation("GPU091", "fake-safe", "msg", "t.py", Location(4, 11), Location(4, 19))]
    assert again.lookup("t.py", content_hash(b"b")) is None
    assert again.lookup("other.py", content_hash(b"a")) is None
    assert ResultCache(tmp_path, "other-fingerprint").lookup("t.py", content_hash(b"a")) is None


def test_version_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ResultCache(tmp_path, "fp")
    store.store("t.py", "h", [V])
    store.save()
    monkeypatch.setattr(cache, "__version__", "9.9.9")
    assert ResultCache(tmp_path, "fp").lookup("t.py", "h") is None


@pytest.mark.parametrize("garbage", [b"", b"{", b"[]", b'{"format": 1, "entries": 3}',
                                     b'{"format": 1, "entries": {"/x/t.py": ["h", [[1]]]}}',
                                     b"\x00\xff" * 10])
def test_corrupt_cache_is_ignored_and_rewritten(tmp_path: Path, garbage: bytes) -> None:
    store = ResultCache(tmp_path, "fp")
    store.file.parent.mkdir(parents=True)
    store.file.write_bytes(garbage)
    store = ResultCache(tmp_path, "fp")
    assert store.lookup("/x/t.py", "h") is None
    store.store("t.py", "h", [V])
    store.save()
    assert json.loads(store.file.read_bytes())["format"] == 1


def test_unwritable_cache_dir_is_not_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    store = ResultCache(blocker / "cache", "fp")
    store.store("t.py", "h", [V])
    store.save()  # no exception


def _writer(args: tuple[str, int]) -> None:
    directory, index = args
    for round_ in range(20):
        store = ResultCache(Path(directory), "fp")
        store.store(f"f{index}_{round_}.py", "h", [V])
        store.save()


def test_concurrent_writers_never_corrupt(tmp_path: Path) -> None:
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_writer, [(str(tmp_path), i) for i in range(4)])
    store = ResultCache(tmp_path, "fp")
    data = json.loads(store.file.read_bytes())
    assert data["format"] == 1
    # Writers merge over what is on disk, so most entries survive; a race may lose some
    # (they are recomputed next run), but the file is always whole and readable.
    assert data["entries"]
    for key in data["entries"]:
        assert store.lookup(key, "h") == [Violation(**{**V.__dict__, "path": key})]
    assert not [p for p in store.file.parent.iterdir() if p.suffix == ".tmp"]


def test_check_paths_uses_cache_and_sees_edits(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fake_rules.install(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    Path("test_a.py").write_text(fake_rules.SAMPLE)
    config = Config(root=str(tmp_path))
    first = api.check_paths(["."], config)
    assert first.cache_hits == 0
    assert [v.code for v in first.violations] == ["GPU091", "GPU092", "GPU093"]
    calls: list[str] = []
    real = run_module.check_module
    monkeypatch.setattr(run_module, "check_module",
                        lambda s, p, c, i: calls.append(p) or real(s, p, c, i))
    second = api.check_paths(["."], config)
    assert (second.cache_hits, calls) == (1, [])
    assert second.violations == first.violations
    Path("test_a.py").write_text(fake_rules.SAMPLE + 'x = LLM("n")\n')
    third = api.check_paths(["."], config)
    assert (third.cache_hits, calls) == (0, ["test_a.py"])
    assert [v.code for v in third.violations] == ["GPU091", "GPU092", "GPU093", "GPU091"]
    other = api.check_paths(["."], config.with_overrides(ignore=("GPU092",)))
    assert other.cache_hits == 0
    assert [v.code for v in other.violations] == ["GPU091", "GPU093", "GPU091"]


def test_cache_dir_env_and_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TEST_LINT_CACHE_DIR", str(tmp_path / "env"))
    assert cache.default_cache_dir("/root") == tmp_path / "env"
    assert cache.default_cache_dir("/root", "arg") == Path("arg")
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR")
    assert cache.default_cache_dir("/root") == Path("/root/.gpu-test-lint-cache")


def _read_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every Python file the run reads through ``Path.read_bytes``."""
    reads: list[str] = []
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.suffix == ".py":
            reads.append(self.name)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    return reads


def test_an_unchanged_file_is_not_read_again(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fake_rules.install(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    monkeypatch.setattr(cache, "RACY_NS", 0)  # the files here are seconds old at most
    Path("test_a.py").write_text(fake_rules.SAMPLE)
    Path("test_b.py").write_text("x = 1\n")
    config = Config(root=str(tmp_path))
    first = api.check_paths(["."], config)
    reads = _read_paths(monkeypatch)
    second = api.check_paths(["."], config)
    assert (second.cache_hits, reads) == (2, [])
    assert second.violations == first.violations


def test_a_file_rewritten_with_its_old_size_and_mtime_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The change time moves even when size and modification time are put back."""
    import os
    import time

    fake_rules.install(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    monkeypatch.setattr(cache, "RACY_NS", 0)
    test = Path("test_a.py")
    test.write_text(fake_rules.SAMPLE)
    config = Config(root=str(tmp_path))
    first = api.check_paths(["."], config)
    before = os.stat(test)
    time.sleep(0.05)  # past the kernel's timestamp tick
    test.write_text(fake_rules.SAMPLE.replace("LLM(", "LLX(", 1))
    os.utime(test, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(test).st_size == before.st_size
    reads = _read_paths(monkeypatch)
    second = api.check_paths(["."], config)
    assert (second.cache_hits, reads) == (0, ["test_a.py"])
    assert len(second.violations) == len(first.violations) - 1


def test_a_file_changed_within_the_racy_window_gets_no_key(tmp_path: Path) -> None:
    import os

    test = tmp_path / "test_a.py"
    test.write_text("x = 1\n")
    status = os.stat(test)
    changed = max(status.st_mtime_ns, status.st_ctime_ns)
    assert cache.stat_key(str(test), "f", now_ns=changed + cache.RACY_NS - 1) is None
    assert cache.stat_key(str(test), "f", now_ns=changed + cache.RACY_NS) == (
        f"{status.st_size}:{status.st_mtime_ns}:{status.st_ctime_ns}:{status.st_ino}:f")
    assert cache.stat_key(str(tmp_path / "missing.py")) is None

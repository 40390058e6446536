"""The recorder (``lint_gpu_tests.runtime.recorder``) sees engines built in a spawned or
forked isolated child (the isolation's child calls ``recorder.install_child``), so ``prove``'s
comparison of a module fixed with ``fix-strategy = "isolate"`` is not vacuous. Run with a stand-in
``vllm`` package (no engine is built, seconds): its ``LLM`` resolves a configuration from its
arguments and generates texts that name the process that generated them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runtime_fakes import STAND_IN_ENGINE_CONFIG

REPO = Path(__file__).resolve().parents[2]

FAKE_VLLM = '''\
from types import SimpleNamespace as N


class LLM:
    def __init__(self, model, max_model_len=1):
''' + STAND_IN_ENGINE_CONFIG + '''
    def generate(self, prompts, *args, **kwargs):
        import os
        return [N(outputs=[N(text=f"{p}@{os.getpid()}")]) for p in prompts]
'''

MODULE = '''\
from lint_gpu_tests.runtime import create_new_process_for_each_test
from vllm import LLM


@create_new_process_for_each_test("spawn")
def test_isolated():
    LLM("m", max_model_len=7).generate(["a", "b"])


def test_in_process():
    LLM("p").generate(["c"])


@create_new_process_for_each_test("fork")
def test_forked():
    LLM("f", max_model_len=5).generate(["d"])
'''


def test_engines_of_a_spawned_child_are_recorded(tmp_path: Path) -> None:
    (tmp_path / "fake" / "vllm").mkdir(parents=True)
    (tmp_path / "fake" / "vllm" / "__init__.py").write_text(FAKE_VLLM)
    tree = tmp_path / "tree"
    (tree / "isolate").mkdir(parents=True)
    (tree / "isolate" / "test_child.py").write_text(MODULE)
    (tree / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    record = tmp_path / "record.json"
    env = dict(os.environ, GPU_TEST_LINT_RECORD=str(record), PYTHONPATH=os.pathsep.join(
        [str(tmp_path / "fake"), str(REPO)]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p",
                           "lint_gpu_tests.runtime.recorder",
                           "-p", "no:randomly", "isolate/test_child.py"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = json.loads(record.read_text())
    isolated = records["isolate/test_child.py::test_isolated"]
    in_process = records["isolate/test_child.py::test_in_process"]
    assert (isolated["outcome"], [e["max_model_len"] for e in isolated["engines"]]) == (
        "passed", [7])
    assert (in_process["outcome"], [e["max_model_len"] for e in in_process["engines"]]) == (
        "passed", [1])
    forked = records["isolate/test_child.py::test_forked"]
    assert (forked["outcome"], [e["max_model_len"] for e in forked["engines"]],
            len(forked["texts"])) == ("passed", [5], 1)
    assert forked["texts"][0][0].split("@")[0] == "d"
    [[a, b]] = isolated["texts"]
    [[c]] = in_process["texts"]
    child_pid, parent_pid = a.split("@")[1], c.split("@")[1]
    assert (a.split("@")[0], b, c.split("@")[0]) == ("a", f"b@{child_pid}", "c")
    assert child_pid != parent_pid  # generated in the child, recorded in the parent
    # the stand-in has no default sampling parameters: its texts may differ run to run
    assert (isolated["sampling"], in_process["sampling"]) == (["random"], ["random"])
    assert not (tmp_path / "record.json.child").exists()

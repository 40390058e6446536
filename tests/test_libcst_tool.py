"""The codemods under LibCST's own tool, and ``--fix`` without LibCST's codemod framework."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

BEFORE = '''import gc

from vllm import LLM


def test_generate():
    llm = LLM("facebook/opt-125m")
    assert llm.generate(["hi"])
    del llm
    gc.collect()
'''

AFTER = '''import weakref


def test_generate(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.generate(["hi"])
'''


@pytest.mark.parametrize("command", ["wrap_in_runner.WrapInRunner",
                                     "wrap_engine_in_runner.WrapEngineInRunner",
                                     "wrap_runner_in_with.WrapRunnerInWith"])
def test_libcst_tool_codemod_runs_a_command(tmp_path: Path, command: str) -> None:
    """``python -m libcst.tool codemod wrap_in_runner.WrapInRunner`` (the README's command,
    also known by its two former names) rewrites a file as ``--fix`` does: the command is a
    LibCST codemod command to the tool though it does not subclass LibCST's classes."""
    (tmp_path / ".libcst.codemod.yaml").write_text((REPO / ".libcst.codemod.yaml").read_text())
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(BEFORE)
    done = subprocess.run([sys.executable, "-m", "libcst.tool", "codemod", "--no-format",
                           command, "tests/"],
                          cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "Transformed 1 files successfully." in done.stderr
    assert (tmp_path / "tests" / "test_a.py").read_text() == AFTER


def test_fix_does_not_load_libcst_codemod_framework(tmp_path: Path) -> None:
    """A fix imports LibCST's parser and nodes but not its codemod framework (whose
    matchers are most of LibCST's import time), unless a rewrite needs its import visitors."""
    code = (
        "import sys\n"
        "from lint_gpu_tests.config import Config\n"
        "from lint_gpu_tests.fixing.fixloop import fix_source\n"
        f"out = fix_source({BEFORE.encode()!r}, 'tests/test_a.py', Config())\n"
        f"assert out.new_source.decode() == {AFTER!r}, out.new_source\n"
        "print(sorted(m for m in sys.modules if m.startswith(('libcst.codemod', "
        "'libcst.matchers'))))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, check=True, env={"PYTHONPATH": str(REPO)})
    assert done.stdout == "[]\n"

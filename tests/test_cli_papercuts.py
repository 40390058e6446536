"""Papercuts a first-time user hit, each pinned by a test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ENGINE_TEST = 'from vllm import LLM\n\n\ndef test_a():\n    llm = LLM("m")\n    assert llm\n'


def test_closed_pipe_is_quiet(tmp_path: Path) -> None:
    for i in range(1200):  # more output than a pipe buffers (64 KiB)
        (tmp_path / f"test_{i}.py").write_text(ENGINE_TEST)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lint_gpu_tests.cli", "check", "--no-cache", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, as `| head -1` does
    stderr = proc.stderr.read()
    assert proc.wait() == 1
    assert first.endswith(b"GPU001 [*] Engine `LLM(...)` built outside `with vllm_runner(...)`\n")
    assert b"Traceback" not in stderr and b"BrokenPipe" not in stderr


def test_help_texts_show_no_rest_markup() -> None:
    """Every command's ``--help`` reads as plain text: no ``double backticks`` or
    ``:role:`` markup from the docstrings click prints."""
    from click.testing import CliRunner

    from lint_gpu_tests import cli

    for args in ([], ["check"], ["rule"], ["rules"]):
        text = CliRunner().invoke(cli.cli, [*args, "--help"]).output
        assert "``" not in text and ":func:" not in text and ":class:" not in text, args
        assert args or "Also: python -m lint_gpu_tests." in " ".join(text.split())

"""Papercuts a first-time user hit, each pinned by a test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE_TEST = 'from vllm import LLM\n\n\ndef test_a():\n    llm = LLM("m")\n    assert llm\n'


def test_closed_pipe_is_quiet(tmp_path: Path) -> None:
    for i in range(1200):  # more output than a pipe buffers (64 KiB)
        (tmp_path / f"test_{i}.py").write_text(ENGINE_TEST)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lint_gpu_tests.interfaces.cli", "check", "--no-cache",
         str(tmp_path)],
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

    from lint_gpu_tests.interfaces import cli

    for args in ([], ["check"], ["rule"], ["rules"]):
        text = CliRunner().invoke(cli.cli, [*args, "--help"]).output
        assert "``" not in text and ":func:" not in text and ":class:" not in text, args
        assert args or "Also: python -m lint_gpu_tests." in " ".join(text.split())


def test_gpu006_on_a_runner_outside_a_with_names_gpu005_and_follows_its_safety() -> None:
    """GPU006 of a runner not in a with-statement says so and names GPU005; its safe fix is
    not offered alone where the GPU005 fix it depends on is unsafe."""
    import textwrap

    from lint_gpu_tests.checking.checker import check_source
    from lint_gpu_tests.config import Config

    def gpu006(source: str) -> list[tuple[str, str, str]]:
        found = check_source(textwrap.dedent(source).encode(), "tests/test_x.py", Config())
        return [(v.message, v.fix.applicability.value, v.fix.reason) for v in found
                if v.code == "GPU006" and v.fix is not None]

    [(message, applicability, reason)] = gpu006("""\
        def test_a(vllm_runner):
            runner = vllm_runner("m")
            llm = runner.llm
            assert llm.generate(["x"])
        """)
    assert message == ("`llm = runner.llm` keeps the engine alive after the runner's teardown, "
                       "and `runner` is not in a with-statement (GPU005, line 2); use a weak "
                       "proxy")
    assert (applicability, reason) == ("safe", "")
    [(_, applicability, reason)] = gpu006("""\
        import threading


        def test_a(vllm_runner):
            runner = vllm_runner("m")
            llm = runner.llm
            threading.Thread(target=runner.close).start()
            assert llm.generate(["x"])
        """)
    assert applicability == "unsafe"
    assert reason.startswith("the GPU005 fix of `runner` (line 5) it depends on is unsafe: ")
    [(message, applicability, _)] = gpu006("""\
        def test_a(vllm_runner):
            with vllm_runner("m") as runner:
                llm = runner.llm
                assert llm.generate(["x"])
        """)
    assert message.endswith("keeps the engine alive after the with-block; use a weak proxy")
    assert applicability == "safe"


def _check(tmp_path: Path, source: str, *args: str, config: str = "") -> str:
    """``check --no-cache ARGS`` of ``source`` as ``tests/test_x.py`` under ``tmp_path``
    (``config`` as its ``pyproject.toml``): stdout and stderr together."""
    from click.testing import CliRunner

    from lint_gpu_tests.interfaces import cli

    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_x.py").write_text(source)
    if config:
        (tmp_path / "pyproject.toml").write_text(config)
    result = CliRunner().invoke(cli.cli, ["check", "--no-cache", *args,
                                          str(tmp_path / "tests")], catch_exceptions=False)
    return result.output


SAFE_AND_UNSAFE = """\
import threading

import pytest
from vllm import LLM


def test_safe():
    llm = LLM("m")
    assert llm.generate(["x"])


def test_unsafe():
    llm = LLM("m")
    threading.Thread(target=llm.generate).start()


@pytest.fixture(scope=lambda fixture_name, config: "module")
def engine():
    llm = LLM("m")
    yield llm
"""


def test_statistics_marks_only_safe_fixes(tmp_path: Path) -> None:
    """``[*]`` for a code with a fix ``--fix`` applies; a code whose fixes are all unsafe is
    ``[ ]`` and counted apart in the summary, as ruff does; ``--unsafe-fixes`` marks both."""
    assert _check(tmp_path, SAFE_AND_UNSAFE, "--statistics") == (
        "3\tGPU001\t[*] engine-outside-runner\n"
        "1\tGPU002\t[ ] fixture-yields-engine\n"
        "[*] 1 fixable with the `--fix` option (3 hidden fixes can be enabled with the "
        "`--unsafe-fixes` option).\n")
    assert _check(tmp_path, SAFE_AND_UNSAFE, "--statistics", "--unsafe-fixes") == (
        "3\tGPU001\t[*] engine-outside-runner\n"
        "1\tGPU002\t[*] fixture-yields-engine\n"
        "[*] 4 fixable with the `--fix` option.\n")


def test_isolate_reason_says_each_sentence_once(tmp_path: Path) -> None:
    source = 'from vllm import LLM\n\nENGINE = LLM("m")\n'
    output = _check(tmp_path, source, "--fix-strategy", "isolate", "--output-format", "full")
    [help_line] = [line for line in output.splitlines() if line.startswith("help:")]
    assert help_line == ("help: Wrap in `with vllm_runner(...)` (no automatic fix: built at "
                         "module or class level: it lives as long as the module; not isolated "
                         "either: no test owns it)")


def test_titles_of_fixes_that_wrap_nothing(tmp_path: Path) -> None:
    """An engine class the runner cannot build gets no fix, and its title does not offer
    the runner; GPU002's title says what the fixture yields, not "Wrap in ..."."""
    source = ("import pytest\n"
              "from vllm import LLM\n"
              "from vllm.v1.engine.async_llm import AsyncLLM\n\n\n"
              "def test_async():\n"
              "    engine = AsyncLLM(ARGS)\n"
              "    assert engine\n\n\n"
              "@pytest.fixture\n"
              "def llm():\n"
              "    return LLM('m')\n")
    config = ('[tool.gpu-test-lint]\n'
              'engine-classes = ["vllm.LLM", "vllm.v1.engine.async_llm.AsyncLLM"]\n')
    output = _check(tmp_path, source, "--output-format", "full", config=config)
    helps = [line for line in output.splitlines() if line.startswith("help:")]
    assert helps == [
        "help: Shut `AsyncLLM` down when the test ends (no automatic fix: the runner builds "
        "`vllm.LLM`, not `vllm.v1.engine.async_llm.AsyncLLM`; `--fix-strategy isolate` would "
        "fix it safely)",
        "help: Wrap in `with vllm_runner(...)`",
        "help: Yield a weak proxy of the engine of `with vllm_runner(...)`",
    ]


def test_rule_prose_is_wrapped_for_a_terminal_and_left_whole_when_piped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``gpu-test-lint rule`` wraps its long prose lines to the terminal (at most 100
    columns), code blocks, tables and headings as they are; piped, it prints the Markdown
    of docs/rules.md unchanged."""
    from lint_gpu_tests.interfaces.commands import _for_terminal

    text = ("# title that is long " + "x" * 90 + "\n" + "word " * 40 + "\n"
            "- " + "item " * 30 + "\n```python\n" + "y = 1  " * 30 + "\n```\n| a | b |")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert _for_terminal(text) == text
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr("shutil.get_terminal_size", lambda: os.terminal_size((60, 20)))
    lines = _for_terminal(text).split("\n")
    assert lines[0] == "# title that is long " + "x" * 90
    assert lines[1:5] == [("word " * 12).strip()] * 3 + [("word " * 4).strip()]
    assert lines[5] == "- " + ("item " * 11).strip() and lines[6].startswith("  item")
    assert lines[-4:] == ["```python", ("y = 1  " * 30), "```", "| a | b |"]

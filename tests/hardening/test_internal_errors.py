"""Internal errors (issue 6): a rule or a codemod that raises on one file is reported for that
file (rule code and a short message; the traceback only with ``--verbose``), the run goes
on, the file is left as it was, and the exit status is 2."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests import cli
from lint_gpu_tests.codemods.wrap_engine_in_runner import WrapEngineInRunner
from lint_gpu_tests.rules.gpu004_manual_engine_cleanup import ManualEngineCleanup

ENGINE = ('import gc\n\nfrom vllm import LLM\n\n\ndef test_x():\n    llm = LLM("m")\n'
          '    llm.generate("hi")\n    gc.collect()\n')
FIXED = ('import weakref\n\n\ndef test_x(vllm_runner):\n    with vllm_runner("m") as runner:\n'
         '        llm = weakref.proxy(runner.llm)\n        llm.generate("hi")\n')
HINT = "hint: run with --verbose to see the traceback"


@pytest.fixture(autouse=True)
def files(project: Path) -> None:
    for name in ("test_a.py", "test_boom.py", "test_z.py"):
        (project / "tests" / name).write_text(ENGINE)


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli.cli, ["check", "--no-cache", "--jobs", "1", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result


@pytest.fixture
def rule_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ManualEngineCleanup.check

    def check(self: ManualEngineCleanup, module: object) -> Iterator[object]:
        if os.path.basename(module.path) == "test_boom.py":  # type: ignore[attr-defined]
            raise KeyError("injected")
        return real(self, module)  # type: ignore[arg-type]

    monkeypatch.setattr(ManualEngineCleanup, "check", check)


@pytest.fixture
def codemod_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    real = WrapEngineInRunner.rewrite

    def rewrite(self: WrapEngineInRunner, tree: object, module: object, todo: object) -> object:
        if os.path.basename(self.context.filename or "") == "test_boom.py":
            raise RuntimeError("injected")
        return real(self, tree, module, todo)  # type: ignore[arg-type]

    monkeypatch.setattr(WrapEngineInRunner, "rewrite", rewrite)


def _others_checked(project: Path, result: Result, fixed: bool) -> None:
    for name in ("test_a.py", "test_z.py"):
        assert (project / "tests" / name).read_text() == (FIXED if fixed else ENGINE)
    if not fixed:
        assert [line.split(":")[0] for line in result.stdout.splitlines()[:-2]] == \
            ["tests/test_a.py"] * 2 + ["tests/test_z.py"] * 2


@pytest.mark.usefixtures("rule_raises")
@pytest.mark.parametrize("fix", [False, True])
def test_rule_error_reported_for_its_file(project: Path, fix: bool) -> None:
    result = run("--fix", "tests") if fix else run("tests")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: failed to check tests/test_boom.py: GPU004 (manual-engine-cleanup): "
        "KeyError: 'injected'",
        HINT,
    ]
    assert "Traceback" not in result.stdout + result.stderr
    assert (project / "tests" / "test_boom.py").read_text() == ENGINE
    _others_checked(project, result, fix)


@pytest.mark.usefixtures("rule_raises")
def test_rule_error_traceback_with_verbose(project: Path) -> None:
    result = run("--verbose", "tests")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: failed to check tests/test_boom.py: GPU004 (manual-engine-cleanup): "
        "KeyError: 'injected'\nTraceback (most recent call last):\n")
    assert "raise KeyError(\"injected\")" in result.stderr
    assert HINT not in result.stderr


@pytest.mark.usefixtures("codemod_raises")
def test_codemod_error_reported_file_left_as_it_was(project: Path) -> None:
    result = run("--fix", "tests")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: failed to check tests/test_boom.py: fix failed: GPU001 (WrapEngineInRunner): "
        "RuntimeError: injected; pass discarded",
        HINT,
    ]
    assert "Traceback" not in result.stdout
    assert (project / "tests" / "test_boom.py").read_text() == ENGINE
    _others_checked(project, result, True)
    assert result.stdout.splitlines()[0].startswith("tests/test_boom.py:7:11: GPU001 [*] ")


@pytest.mark.usefixtures("codemod_raises")
def test_codemod_error_traceback_with_verbose(project: Path) -> None:
    result = run("--fix", "--verbose", "tests")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: failed to check tests/test_boom.py: fix failed: GPU001 (WrapEngineInRunner): "
        "RuntimeError: injected; pass discarded\nTraceback (most recent call last):\n")
    assert 'raise RuntimeError("injected")' in result.stderr


def test_unexpected_error_outside_files_is_one_line(project: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> object:
        raise OSError("disk on fire")

    monkeypatch.setattr("lint_gpu_tests.api.discover_files", boom)
    result = run("tests")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: internal error: OSError: disk on fire\n"

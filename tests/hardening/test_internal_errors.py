"""Internal errors: a rule or a codemod that raises on one file is reported for that
file (rule code and a short message; the traceback only with ``--verbose``), the run goes
on, the file is left as it was, and the exit status is 2."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests.codemods.driver import AppliedFix
from lint_gpu_tests.codemods.wrap_in_runner import WrapInRunner
from lint_gpu_tests.ftypes import FixKind
from lint_gpu_tests.interfaces import cli
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
    real = WrapInRunner.rewrite

    def rewrite(self: WrapInRunner, tree: object, module: object, todo: object) -> object:
        if os.path.basename(self.context.filename or "") == "test_boom.py":
            raise RuntimeError("injected")
        return real(self, tree, module, todo)  # type: ignore[arg-type]

    monkeypatch.setattr(WrapInRunner, "rewrite", rewrite)


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
        "error: failed to fix tests/test_boom.py: GPU001/GPU005 (WrapInRunner): "
        "RuntimeError: injected; pass discarded",
        HINT,
    ]
    assert "Traceback" not in result.stdout
    assert (project / "tests" / "test_boom.py").read_text() == ENGINE
    _others_checked(project, result, True)
    # What the failed pass would have fixed is no longer offered as a fix.
    assert result.stdout.splitlines()[:3] == [
        "tests/test_boom.py:7:11: GPU001 Engine `LLM(...)` built outside "
        "`with vllm_runner(...)`",
        "tests/test_boom.py:9:5: GPU004 Manual cleanup `gc.collect()` in a function that "
        "owns an engine",
        "Found 6 violations (4 fixed, 2 remaining).",
    ]
    assert len(result.stdout.splitlines()) == 3


@pytest.mark.usefixtures("codemod_raises")
def test_codemod_error_traceback_with_verbose(project: Path) -> None:
    result = run("--fix", "--verbose", "tests")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: failed to fix tests/test_boom.py: GPU001/GPU005 (WrapInRunner): "
        "RuntimeError: injected; pass discarded\nTraceback (most recent call last):\n")
    assert 'raise RuntimeError("injected")' in result.stderr


def test_unexpected_error_outside_files_is_one_line(project: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> object:
        raise OSError("disk on fire")

    monkeypatch.setattr("lint_gpu_tests.running.run.discover_files", boom)
    result = run("tests")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: internal error: OSError: disk on fire\n"


# A stand-in for pyo3's ``pyo3_runtime.PanicException`` (LibCST's native parser panicking):
# like it, it derives from BaseException, not Exception.
PanicException = type("PanicException", (BaseException,), {"__module__": "pyo3_runtime"})


@pytest.fixture
def parser_panics(monkeypatch: pytest.MonkeyPatch) -> None:
    import libcst

    real = libcst.parse_module

    def parse_module(source: object, *args: object, **kwargs: object) -> object:
        if b"boom" in (source if isinstance(source, bytes) else str(source).encode()):
            raise PanicException("called `Option::unwrap()` on a `None` value")
        return real(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("lint_gpu_tests.codemods.driver.cst.parse_module", parse_module)


@pytest.mark.usefixtures("parser_panics")
def test_libcst_panic_is_contained_per_file(project: Path) -> None:
    (project / "tests" / "test_boom.py").write_text(ENGINE + "# boom\n")
    result = run("--fix", "tests")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: failed to fix tests/test_boom.py: PanicException: called "
        "`Option::unwrap()` on a `None` value; pass discarded",
        HINT,
    ]
    assert (project / "tests" / "test_boom.py").read_text() == ENGINE + "# boom\n"
    _others_checked(project, result, True)
    assert result.stdout.splitlines() == [
        "tests/test_boom.py:7:11: GPU001 Engine `LLM(...)` built outside "
        "`with vllm_runner(...)`",
        "tests/test_boom.py:9:5: GPU004 Manual cleanup `gc.collect()` in a function that "
        "owns an engine",
        "Found 6 violations (4 fixed, 2 remaining).",
    ]
    json_result = run("--fix", "--output-format", "json", "tests/test_boom.py")
    reasons = {(v["code"], v["fix"], v["no_fix_reason"])
               for v in json.loads(json_result.stdout)}
    assert reasons == {(code, None, "the fix failed: PanicException: called "
                                    "`Option::unwrap()` on a `None` value")
                       for code in ("GPU001", "GPU004")}


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_interrupts_are_not_swallowed(project: Path, monkeypatch: pytest.MonkeyPatch,
                                      interrupt: type[BaseException]) -> None:
    from lint_gpu_tests.api import check_paths
    from lint_gpu_tests.config import Config

    def apply_fixes(*args: object) -> bytes:
        raise interrupt()

    monkeypatch.setattr("lint_gpu_tests.codemods.driver.apply_fixes", apply_fixes)
    with pytest.raises(interrupt):
        check_paths(["tests"], Config(root=str(project)), fix=True, cache=False, jobs=1)
    assert (project / "tests" / "test_a.py").read_text() == ENGINE


def test_fixes_that_do_not_converge_leave_the_file_exit_2(project: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    # Every pass changes the file and leaves the violations: after 10 passes nothing is
    # written (ruff: "Failed to converge after N iterations").
    passes: list[int] = []

    def apply_fixes(source: bytes, *args: object) -> AppliedFix:
        passes.append(1)
        return AppliedFix(FixKind.WRAP_ENGINE_IN_RUNNER, source + b"# again\n")

    monkeypatch.setattr("lint_gpu_tests.codemods.driver.apply_fixes", apply_fixes)
    result = run("--fix", "tests/test_a.py")
    assert result.exit_code == 2
    assert len(passes) == 10
    assert result.stderr.splitlines() == [
        "error: failed to fix tests/test_a.py: failed to converge after 10 passes; "
        "file left unchanged",
    ]  # no traceback to see, so no --verbose hint
    assert (project / "tests" / "test_a.py").read_text() == ENGINE
    # Nothing was written, so nothing counts as fixed nor as fixable.
    assert result.stdout.splitlines() == [
        "tests/test_a.py:7:11: GPU001 Engine `LLM(...)` built outside "
        "`with vllm_runner(...)`",
        "tests/test_a.py:9:5: GPU004 Manual cleanup `gc.collect()` in a function that "
        "owns an engine",
        "Found 2 violations.",
    ]
    json_result = run("--fix", "--output-format", "json", "tests/test_a.py")
    assert {(v["code"], v["fix"], v["no_fix_reason"])
            for v in json.loads(json_result.stdout)} == {
        (code, None, "the fix failed: it did not converge after 10 passes")
        for code in ("GPU001", "GPU004")}


def test_real_libcst_failure_on_valid_code_is_contained(project: Path) -> None:
    # LibCST 1.9 raises TypeError on this valid line: reported for the
    # file, which is left as it was; the run goes on.
    source = ENGINE + "\n\nX = () if 0 else(lambda:())\n"
    (project / "tests" / "test_boom.py").write_text(source)
    result = run("--fix", "tests")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: failed to fix tests/test_boom.py: TypeError: super(type, obj): "
        "obj must be an instance or subtype of type; pass discarded",
        HINT,
    ]
    assert (project / "tests" / "test_boom.py").read_text() == source
    _others_checked(project, result, True)


def test_libcst_parse_error_is_one_line(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import libcst

    def parse_module(source: object, *args: object, **kwargs: object) -> object:
        raise libcst.ParserSyntaxError("expected NEWLINE", lines=["x\n"] * 5005,
                                       raw_line=5005, raw_column=0)

    monkeypatch.setattr("lint_gpu_tests.codemods.driver.cst.parse_module", parse_module)
    result = run("--fix", "tests/test_a.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: failed to fix tests/test_a.py: LibCST cannot parse this file "
        "(expected NEWLINE at line 5005, column 0); pass discarded",
        HINT,
    ]
    assert (project / "tests" / "test_a.py").read_text() == ENGINE

"""Nasty inputs through the CLI (in-process, click's CliRunner) with the real rules: each has
an exact expected outcome, none reaches the user as a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests.interfaces import cli

ENGINE = 'from vllm import LLM\n\n\ndef test_x():\n    llm = LLM("m")\n    llm.generate("{s}")\n'
FIXED = ('import weakref\n\n\ndef test_x(vllm_runner):\n    with vllm_runner("m") as runner:\n'
         '        llm = weakref.proxy(runner.llm)\n        llm.generate("{s}")\n')
GPU001 = "GPU001 [*] Engine `LLM(...)` built outside `with vllm_runner(...)`"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli.cli, ["check", "--no-cache", *args])
    assert "Traceback" not in result.stdout + result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result


def write(project: Path, name: str, data: bytes) -> Path:
    path = project / "tests" / name
    path.write_bytes(data)
    return path


def test_syntax_error_untouched_and_run_goes_on(project: Path) -> None:
    bad = write(project, "test_a_bad.py", b"def f(:\n    LLM()\n")
    good = write(project, "test_b.py", ENGINE.format(s="hi").encode())
    result = run("--fix", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "tests/test_a_bad.py:1:7: GPU900 SyntaxError: invalid syntax",
        "Found 2 violations (1 fixed, 1 remaining).",
    ]
    assert bad.read_bytes() == b"def f(:\n    LLM()\n"
    assert good.read_bytes() == FIXED.format(s="hi").encode()


def test_latin1_file_keeps_its_encoding(project: Path) -> None:
    cookie = "# -*- coding: latin-1 -*-\n"
    path = write(project, "test_latin1.py", (cookie + ENGINE.format(s="café")).encode("latin-1"))
    result = run("--fix", "tests")
    assert result.exit_code == 0
    assert path.read_bytes() == (cookie + FIXED.format(s="café")).encode("latin-1")
    assert b"caf\xe9" in path.read_bytes()


def test_bom_and_crlf_kept(project: Path) -> None:
    path = write(project, "test_bom.py",
                 b"\xef\xbb\xbf" + ENGINE.format(s="hi").replace("\n", "\r\n").encode())
    assert run("tests").stdout.splitlines()[0] == f"tests/test_bom.py:5:11: {GPU001}"
    assert run("--fix", "tests").exit_code == 0
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXED.format(s="hi").replace(
        "\n", "\r\n").encode()


def test_mixed_line_endings_kept_new_lines_take_the_first_ending(project: Path) -> None:
    # Lines that exist keep their own ending; lines the fix creates take the ending of the
    # file's first line (LibCST's default newline).
    path = write(project, "test_mixed.py", ENGINE.format(s="hi").replace("\n", "\r\n", 2).encode())
    assert run("--fix", "tests").exit_code == 0
    assert path.read_bytes() == (
        b'import weakref\r\n\r\n\ndef test_x(vllm_runner):\n    with vllm_runner("m") as runner:\n'
        b'        llm = weakref.proxy(runner.llm)\r\n        llm.generate("hi")\n')


def test_tab_indentation_kept(project: Path) -> None:
    path = write(project, "test_tabs.py", ENGINE.format(s="hi").replace("    ", "\t").encode())
    assert run("--fix", "tests").exit_code == 0
    assert path.read_bytes() == FIXED.format(s="hi").replace("    ", "\t").encode()


@pytest.mark.parametrize(("data", "message"), [
    (b"LLM = 1\x00\n", "1:1: GPU900 SyntaxError: source code string cannot contain null bytes"),
    (bytes(range(256)) * 4, "1:1: GPU900 SyntaxError: cannot decode source: 'utf-8' codec "
     "can't decode byte 0x80 in position 128: invalid start byte"),
    (b"x = 1\ny = '\xff'\n", "1:1: GPU900 SyntaxError: cannot decode source: 'utf-8' codec "
     "can't decode byte 0xff in position 11: invalid start byte"),
    (b"# coding: klingon\nx = 1\n", "1:1: GPU900 SyntaxError: unknown encoding: klingon"),
], ids=["nul", "binary", "undecodable", "unknown-encoding"])
def test_undecodable_and_binary_files_are_gpu900_untouched(project: Path, data: bytes,
                                                         message: str) -> None:
    path = write(project, "test_odd.py", data)
    write(project, "test_z.py", ENGINE.format(s="hi").encode())
    result = run("--fix", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"tests/test_odd.py:{message}"
    assert path.read_bytes() == data
    assert (project / "tests" / "test_z.py").read_bytes() == FIXED.format(s="hi").encode()


def test_empty_file(project: Path) -> None:
    path = write(project, "test_empty.py", b"")
    result = run("--fix", "tests")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    assert path.read_bytes() == b""


HEAD = 'from vllm import LLM\n\n\ndef test_x():\n    llm = LLM("m")\n'


@pytest.mark.parametrize(("body", "message"), [
    # too deep for CPython's parser, whatever the stack
    ("    y = " + "-" * 200_000 + "1\n", "source nests too deeply to parse"),
    ("    y = " + "(" * 300 + "1" + ")" * 300 + "\n", "too many nested parentheses"),
], ids=["unary", "parentheses"])
def test_too_deep_to_parse_is_gpu900(project: Path, body: str, message: str) -> None:
    data = (HEAD + body).encode()
    path = write(project, "test_deep.py", data)
    result = run("--fix", "tests")
    assert result.exit_code == 1
    (line,) = [ln for ln in result.stdout.splitlines() if "GPU900" in ln]
    assert line.endswith(f" GPU900 SyntaxError: {message}")
    assert path.read_bytes() == data


GPU001_NO_FIX = "GPU001 Engine `LLM(...)` built outside `with vllm_runner(...)`"


@pytest.mark.parametrize(("body", "report"), [
    # deeper than the default recursion limit lets the analysis walk: analysed in the deep
    # thread, the engine is reported (a deep expression hides nothing)
    ("    y = llm.a" + " + llm.a" * 1_000 + "\n", GPU001),
    ("    if llm.a == 0:\n        pass\n"
     + "".join(f"    elif llm.a == {i}:\n        pass\n" for i in range(1, 800)), GPU001),
    # parses (in the deep thread) but deeper than the fixer rewrites: no [*]
    ("    y = llm" + ".a" * 20_000 + "\n", GPU001_NO_FIX),
], ids=["binop", "elif", "attributes"])
def test_deep_modules_are_analysed(project: Path, body: str, report: str) -> None:
    data = (HEAD + body).encode()
    write(project, "test_deep.py", data)
    result = run("tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"tests/test_deep.py:5:11: {report}"
    assert "GPU900" not in result.stdout


def _concatenation(parts: int) -> str:
    joined = " + ".join(f'"part {i} "' for i in range(parts))
    return f"\n\nPROMPT = ({joined})\n"


def test_long_string_concatenation_is_fixed(project: Path) -> None:
    # 600 parts (prompt constants) made --fix fail with RecursionError while check
    # advertised [*]; the fix now runs in a thread with a deep stack.
    tail = _concatenation(600)
    path = write(project, "test_prompt.py", (ENGINE.format(s="hi") + tail).encode())
    assert run("tests").stdout.splitlines()[0] == f"tests/test_prompt.py:5:11: {GPU001}"
    result = run("--fix", "tests")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == "Found 1 violation (1 fixed, 0 remaining).\n"
    assert path.read_bytes() == (FIXED.format(s="hi") + tail).encode()


def test_concatenation_deeper_than_the_fixer_is_not_fixable(project: Path) -> None:
    # 2,500 parts nest 2,502 levels, more than MAX_FIX_DEPTH (2,000): the violation is
    # reported without [*], the reason says why, and --fix leaves the file alone.
    data = (ENGINE.format(s="hi") + _concatenation(2_500)).encode()
    path = write(project, "test_prompt.py", data)
    result = run("--output-format", "json", "tests")
    assert result.exit_code == 1
    (found,) = json.loads(result.stdout)
    assert (found["code"], found["location"], found["fix"]) == \
        ("GPU001", {"row": 5, "column": 11}, None)
    assert found["no_fix_reason"] == ("expression too deep (line 9 nests 2502 levels; the "
                                      "fixer rewrites at most 2000)")
    result = run("--fix", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"tests/test_prompt.py:5:11: {GPU001_NO_FIX}",
                                          "Found 1 violation."]
    assert path.read_bytes() == data


def test_concatenation_inside_an_fstring_counts_its_depth(project: Path) -> None:
    # The nesting inside an f-string's braces counts as any other.
    joined = " + ".join(f"'part {i} '" for i in range(2_500))
    data = (ENGINE.format(s="hi") + f'\n\nPROMPT = f"{{{joined}}}"\n').encode()
    write(project, "test_prompt.py", data)
    result = run("--output-format", "json", "tests")
    (found,) = json.loads(result.stdout)
    assert found["no_fix_reason"] == ("expression too deep (line 9 nests 2504 levels; the "
                                      "fixer rewrites at most 2000)")


def test_implicit_concatenation_beyond_libcst_is_not_fixable(project: Path) -> None:
    # LibCST's parser takes at most 3,000 parts of an implicit concatenation
    # (``"a" "b" ...``, one ``ast.Constant``: no depth to measure); with 3,001 ``--fix`` failed
    # ("LibCST cannot parse this file") while ``check`` advertised [*].
    parts = " ".join(f'"part {i} "' for i in range(3_001))
    data = (ENGINE.format(s="hi") + f"\n\nPROMPT = (\n    {parts}\n)\n").encode()
    path = write(project, "test_prompt.py", data)
    result = run("--output-format", "json", "tests")
    (found,) = json.loads(result.stdout)
    assert (found["code"], found["fix"]) == ("GPU001", None)
    assert found["no_fix_reason"] == ("an implicit string concatenation of 3001 parts (line "
                                      "10; the fixer's parser takes at most 3000)")
    result = run("--fix", "tests")
    assert (result.exit_code, result.stderr) == (1, "")
    assert result.stdout.splitlines() == [f"tests/test_prompt.py:5:11: {GPU001_NO_FIX}",
                                          "Found 1 violation."]
    assert path.read_bytes() == data


def test_implicit_concatenation_over_lines_is_counted(project: Path) -> None:
    # The parts of a concatenation laid out one per line, with CRLF endings and non-ASCII
    # text before and inside it (columns are UTF-8 bytes), are counted as on one line.
    parts = "\r\n    ".join(f'"pärt {i} "' for i in range(3_001))
    data = (ENGINE.format(s="hi").replace("\n", "\r\n") +
            f"\r\n\r\nPRÖMPT = (\r\n    {parts}\r\n)\r\n").encode()
    write(project, "test_prompt.py", data)
    result = run("--output-format", "json", "tests")
    (found,) = json.loads(result.stdout)
    assert (found["code"], found["fix"]) == ("GPU001", None)
    assert found["no_fix_reason"] == ("an implicit string concatenation of 3001 parts (line "
                                      "10; the fixer's parser takes at most 3000)")


def test_implicit_concatenation_libcst_takes_is_fixed(project: Path) -> None:
    parts = " ".join(f'"p{i}"' for i in range(3_000))
    tail = f"\n\nPROMPT = ({parts})\n"
    path = write(project, "test_prompt.py", (ENGINE.format(s="hi") + tail).encode())
    assert run("tests").stdout.splitlines()[0] == f"tests/test_prompt.py:5:11: {GPU001}"
    result = run("--fix", "tests")
    assert (result.exit_code, result.stderr) == (0, "")
    assert path.read_bytes() == (FIXED.format(s="hi") + tail).encode()


def test_symlink_loop_and_dangling_link_warned_run_goes_on(project: Path) -> None:
    write(project, "test_a.py", ENGINE.format(s="hi").encode())
    os.symlink(".", project / "tests" / "loop")
    os.symlink("missing.py", project / "tests" / "test_dangling.py")
    result = run("tests")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "warning: tests/loop: symlink loop",
        "warning: tests/test_dangling.py: dangling symlink",
    ]
    assert result.stdout.splitlines()[0] == f"tests/test_a.py:5:11: {GPU001}"


def test_dangling_link_named_on_the_command_line(project: Path) -> None:
    os.symlink("missing.py", project / "tests" / "test_dangling.py")
    result = run("tests/test_dangling.py")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: tests/test_dangling.py: path is a dangling symlink\n"


def test_missing_path_exit_2_one_line(project: Path) -> None:
    result = run("nope.py")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: nope.py: path does not exist\n"


def _deny(monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
    """Make ``target`` unreadable without chmod (root reads anything): reading a file or
    listing a directory at that path raises EACCES, as ``chmod 000`` would for a user."""
    real_read, real_scandir = Path.read_bytes, os.scandir

    def read_bytes(self: Path) -> bytes:
        if os.path.abspath(self) == str(target):
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self)

    def scandir(path: str | os.PathLike[str] = ".") -> object:
        if os.path.abspath(path) == str(target):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr("lint_gpu_tests.running.discovery.os.scandir", scandir)


def _make_unreadable(project: Path, monkeypatch: pytest.MonkeyPatch, chmod: bool
                     ) -> tuple[Path, Path]:
    locked_file = write(project, "test_locked.py", ENGINE.format(s="hi").encode())
    locked_dir = project / "tests" / "private"
    locked_dir.mkdir()
    (locked_dir / "test_hidden.py").write_bytes(ENGINE.format(s="hi").encode())
    write(project, "test_z.py", ENGINE.format(s="hi").encode())
    if chmod:
        locked_file.chmod(0)
        locked_dir.chmod(0)
    else:
        _deny(monkeypatch, locked_file)
        _deny(monkeypatch, locked_dir)
    return locked_file, locked_dir


def _assert_unreadable_reported(result: Result, project: Path) -> None:
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: tests/private: cannot read directory: Permission denied",
        "error: failed to check tests/test_locked.py: cannot read file: Permission denied",
    ]  # an I/O error has no traceback: no --verbose hint
    assert result.stdout.splitlines() == ["Found 1 violation (1 fixed, 0 remaining)."]
    assert (project / "tests" / "test_z.py").read_bytes() == FIXED.format(s="hi").encode()


def test_unreadable_file_and_directory_simulated(project: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Runs everywhere, root included: the denial is injected at the read.
    _make_unreadable(project, monkeypatch, chmod=False)
    _assert_unreadable_reported(run("--fix", "tests"), project)


@pytest.mark.skipif(IS_ROOT, reason="root reads files and directories whatever their mode")
def test_unreadable_file_and_directory_chmod_000(project: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    locked_file, locked_dir = _make_unreadable(project, monkeypatch, chmod=True)
    try:
        _assert_unreadable_reported(run("--fix", "tests"), project)
    finally:
        locked_file.chmod(0o644)
        locked_dir.chmod(0o755)


def test_very_large_file_checked(project: Path) -> None:
    # 5 MB of lines: checking is quick (the prefilter and ``ast`` only); nothing is written.
    filler = "".join(f"# {i:06d} {'x' * 90}\n" for i in range(52_000))
    data = (HEAD + '    llm.generate("hi")\n\n\n' + filler).encode()
    assert len(data) > 5_000_000
    path = write(project, "test_big.py", data)
    result = run("tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"tests/test_big.py:5:11: {GPU001}"
    assert path.read_bytes() == data


def test_very_large_file_fixed(project: Path) -> None:
    # 5 MB in one literal keeps LibCST's tree small, so --fix stays fast in CI.
    blob = '\n\nBLOB = """\n' + ("y" * 99 + "\n") * 51_000 + '"""\n'
    data = (ENGINE.format(s="hi") + blob).encode()
    assert len(data) > 5_000_000
    path = write(project, "test_big.py", data)
    assert run("--fix", "tests").exit_code == 0
    assert path.read_bytes() == (FIXED.format(s="hi") + blob).encode()


def test_implicit_concatenation_of_mixed_quotes_is_counted(project: Path) -> None:
    # The check skips the strings of a module with too few quote characters for 3,001 parts
    # (each takes two): parts in single quotes, double quotes and f-strings all count.
    parts = " ".join(f"'p{i}'" if i % 3 == 0 else f'"q{i}"' if i % 3 == 1 else f"f'r{i}'"
                     for i in range(3_001))
    data = (ENGINE.format(s="hi").replace('"', "'") + f"\n\nPROMPT = ({parts})\n").encode()
    assert data.count(b"'") + data.count(b'"') == 2 * 3_001 + 4
    write(project, "test_prompt.py", data)
    (found,) = json.loads(run("--output-format", "json", "tests").stdout)
    assert (found["code"], found["location"], found["fix"]) == \
        ("GPU001", {"row": 5, "column": 11}, None)
    assert found["no_fix_reason"] == ("an implicit string concatenation of 3001 parts (line "
                                      "9; the fixer's parser takes at most 3000)")


def test_concatenation_one_part_short_of_the_quote_bound_is_fixable(project: Path) -> None:
    # 3,000 parts and the engine's two strings: 6,004 quotes, above the bound, and still
    # within what LibCST parses: fixable.
    parts = " ".join(f"'p{i}'" for i in range(3_000))
    data = (ENGINE.format(s="hi") + f"\n\nPROMPT = ({parts})\n").encode()
    write(project, "test_prompt.py", data)
    assert run("tests").stdout.splitlines()[0] == f"tests/test_prompt.py:5:11: {GPU001}"


@pytest.mark.parametrize(("parts", "thread"), [(40, "MainThread"), (400, "gpu-test-lint-deep")])
def test_shallow_modules_are_fixed_in_the_calling_thread(parts: int, thread: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A module within SHALLOW_FIX_DEPTH levels is fixed where the call is made, under the
    deep thread's recursion limit (restored afterwards); a deeper one in the deep thread.
    Both give the same fix."""
    import sys
    import threading

    from lint_gpu_tests.config import Config
    from lint_gpu_tests.fixing import fixloop
    from lint_gpu_tests.parsing.source import DEEP_RECURSION_LIMIT

    seen: list[tuple[str, int]] = []
    real = fixloop._fix_loop

    def spy(*args: object) -> fixloop.FixOutcome:
        seen.append((threading.current_thread().name, sys.getrecursionlimit()))
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(fixloop, "_fix_loop", spy)
    limit = sys.getrecursionlimit()
    tail = _concatenation(parts)
    source = (ENGINE.format(s="hi") + tail).encode()
    outcome = fixloop.fix_source(source, "tests/test_prompt.py", Config())
    assert outcome.new_source == (FIXED.format(s="hi") + tail).encode()
    assert seen == [(thread, DEEP_RECURSION_LIMIT)]
    assert sys.getrecursionlimit() == limit

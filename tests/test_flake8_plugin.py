"""The flake8 plugin reports the same (file, line, code) set as ``gpu-test-lint check``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lint_gpu_tests.interfaces.flake8_plugin import GpuTestLintPlugin
from lint_gpu_tests.rules import ALL_RULES

REALSUITES = Path("/work/realsuites")
SAMPLE = 'from vllm import LLM\n\ndef test_x():\n    llm = LLM("m")\n    llm.generate("hi")\n'

Triple = tuple[str, int, str]


def write_sample_tree(root: Path) -> None:
    """Every rule's INVALID and VALID examples (those without config overrides) as test files,
    plus noqa cases and a syntax error."""
    tests = root / "tests"
    tests.mkdir()
    (tests / "test_sample.py").write_text(SAMPLE)
    (tests / "test_noqa.py").write_text(
        SAMPLE.replace('LLM("m")', 'LLM("m")  # noqa: GPU001')
        + '\ndef test_y():\n    llm = LLM("m")  # noqa\n    llm.generate("x")\n'
        + '\ndef test_z():\n    llm = LLM("m")  # noqa: GPU002\n    llm.generate("x")\n')
    (tests / "test_broken.py").write_text("def f(:\n    LLM()\n")  # analysed: names LLM
    for rule in ALL_RULES:
        for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID)):
            for index, example in enumerate(examples):
                if example.config:
                    continue
                name = f"test_{rule.code.lower()}_{kind}_{index}.py"
                (tests / name).write_text(example.source)


def _run(root: Path, argv: list[str]) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", *argv], cwd=root, capture_output=True,
                          text=True, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.splitlines()


def cli_triples(root: Path, paths: list[str]) -> set[Triple]:
    out: set[Triple] = set()
    for line in _run(root, ["lint_gpu_tests.interfaces.cli", "check", "--no-cache", "-q", *paths]):
        location, rest = line.split(": ", 1)
        path, row, _col = location.rsplit(":", 2)
        out.add((os.path.normpath(path), int(row), rest.split()[0]))
    return out


def flake8_triples(root: Path, paths: list[str]) -> set[Triple]:
    lines = _run(root, ["flake8", "--select", "GPU", "--isolated",
                        "--format", "%(path)s|%(row)d|%(code)s", *paths])
    return {(os.path.normpath(p), int(r), c) for p, r, c in (ln.split("|") for ln in lines)}


def test_same_reports_as_cli_on_sample_tree(tmp_path: Path) -> None:
    write_sample_tree(tmp_path)
    cli = cli_triples(tmp_path, ["tests"])
    assert ("tests/test_sample.py", 4, "GPU001") in cli
    assert ("tests/test_broken.py", 1, "GPU900") in cli
    assert ("tests/test_noqa.py", 12, "GPU001") in cli
    assert not {t for t in cli if t[0] == "tests/test_noqa.py" and t[1] in (4, 8)}
    expected = {t for t in cli if t[2] != "GPU900"}  # flake8 reports E999 instead
    assert flake8_triples(tmp_path, ["tests"]) == expected


def test_plugin_columns_messages_and_no_gpu900(tmp_path: Path) -> None:
    path = tmp_path / "test_x.py"
    path.write_text(SAMPLE)
    plugin = GpuTestLintPlugin(ast.parse(SAMPLE), str(path), SAMPLE.splitlines(keepends=True))
    results = list(plugin.run())
    assert [(r[0], r[1], r[2].split()[0], r[3]) for r in results] == [
        (4, 10, "GPU001", GpuTestLintPlugin)]
    assert GpuTestLintPlugin.name == "gpu-test-lint"
    assert GpuTestLintPlugin.version == "0.1.0"


@pytest.mark.parametrize("filename", ["stdin", "-"])
def test_plugin_checks_standard_input_as_a_test_module(
        filename: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flake8's standard input (``stdin`` or ``-``, without ``--stdin-display-name``) gets
    what a test module of the current directory gets, as ``gpu-test-lint check -`` does: a
    module that defines no test is checked too."""
    monkeypatch.chdir(tmp_path)
    source = 'from vllm import LLM\n\nllm = LLM("m")\n'
    plugin = GpuTestLintPlugin(ast.parse(source), filename, source.splitlines(keepends=True))
    assert [(r[0], r[1], r[2]) for r in plugin.run()] == [
        (3, 6, "GPU001 Engine `LLM(...)` built outside `with vllm_runner(...)`")]


def test_plugin_reads_project_config(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.gpu-test-lint]\nignore = ["GPU001"]\n')
    path = tmp_path / "test_x.py"
    path.write_text(SAMPLE)
    plugin = GpuTestLintPlugin(ast.parse(SAMPLE), str(path), SAMPLE.splitlines(keepends=True))
    assert list(plugin.run()) == []


def test_plugin_config_error_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / ".gpu-test-lint.toml").write_text('bogus = 1\n')
    path = tmp_path / "test_x.py"
    path.write_text(SAMPLE)
    plugin = GpuTestLintPlugin(ast.parse(SAMPLE), str(path), SAMPLE.splitlines(keepends=True))
    [(line, col, message, _)] = list(plugin.run())
    assert (line, col) == (1, 0)
    assert message.startswith("GPU999 configuration error: ")
    assert "unknown key `bogus`" in message
    # once, not once per file: a second file under the same broken config reports nothing
    other = tmp_path / "test_y.py"
    other.write_text(SAMPLE)
    again = GpuTestLintPlugin(ast.parse(SAMPLE), str(other), SAMPLE.splitlines(keepends=True))
    assert list(again.run()) == []


def test_flake8_reports_a_config_error_once(tmp_path: Path) -> None:
    (tmp_path / ".gpu-test-lint.toml").write_text('bogus = 1\n')
    for name in ("test_a.py", "test_b.py", "test_c.py"):
        (tmp_path / name).write_text(SAMPLE)
    proc = subprocess.run([sys.executable, "-m", "flake8", "-j", "1", "--select", "GPU", "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and "GPU999 configuration error:" in lines[0], lines


@pytest.mark.skipif(not (REALSUITES / "gaudi" / "tests").is_dir(),
                    reason="real vllm-gaudi tree not extracted on this machine")
@pytest.mark.parametrize("suite", ["gaudi", "spyre"])
def test_same_reports_as_cli_on_real_tree(suite: str) -> None:  # pragma: no cover - local
    root = REALSUITES / suite
    cli = {t for t in cli_triples(root, ["tests"]) if t[2] != "GPU900"}
    assert flake8_triples(root, ["tests"]) == cli


# --------------------------------------------------------------------------- noqa parity
# One noqa implementation (engine.parse_noqa) for both front ends, checked against flake8's
# own: with the plugin's noqa off, flake8 itself decides on the same inputs.

HEAD = "from vllm import LLM\n"
FLAKE8_SEMANTICS = [  # (comment or statement, suppressed by flake8 itself)
    ('llm = LLM("m")  # noqa', True),
    ('llm = LLM("m")  # NOQA', True),
    ('llm = LLM("m")  # NoQa: GPU001', True),
    ('llm = LLM("m")  # noqa: GPU001', True),
    ('llm = LLM("m")  # noqa:GPU001', True),
    ('llm = LLM("m")  # noqa: GPU00', True),
    ('llm = LLM("m")  # noqa: GPU', True),
    ('llm = LLM("m")  # noqa: GPU002', False),
    ('llm = LLM("m")  # noqa: GPU002,GPU001', True),
    ('llm = LLM("m")  # noqa: GPU002, GPU001', True),
    ('llm = LLM("m")  # noqa: GPU002 GPU001', True),
    ('llm = LLM("m")  # noqa: E501 because', False),
    ('llm = LLM("m")  # noqa : GPU002', True),  # no codes after "noqa": blanket
    ('llm = LLM("m")  # noqa:', True),
    ('llm = LLM("m")  # type: ignore # noqa: GPU001', True),
    ('llm = LLM("m")  # keep the engine', False),
    ('llm = LLM("""\nm\n""")  # noqa: GPU001', True),  # after a multi-line string
    ('llm = LLM("""\nm\n""")  # noqa: GPU002', False),
    ('llm = LLM(\n        "m")  # noqa: GPU001', False),  # a bracket's line break splits
    ('llm = LLM("m") if True else \\\n        None  # noqa', True),  # a continuation joins
    ('llm = LLM("m"); note = "# noqa"', True),  # flake8 searches the raw line
]
EXTENSIONS = [  # suppressed by gpu-test-lint (as by ruff), not by flake8 itself
    'llm = LLM("m")  #noqa:GPU001',
    'llm = LLM("m")  #noqa',
    'llm = LLM("m")  # NOQA: gpu001',
    'llm = LLM("m")  # noqa: gpu00',
]


def _noqa_module(statements: list[str]) -> str:
    body = "".join(f'\n\ndef test_{i}():\n    {statement}\n    llm.generate("x")\n'
                   for i, statement in enumerate(statements))
    return HEAD + body


def _engine_lines(source: str) -> list[int]:
    return [number for number, line in enumerate(source.splitlines(), 1)
            if "llm = LLM(" in line]


def flake8_in_process(root: Path, paths: list[str], capsys: pytest.CaptureFixture[str],
                      *extra: str) -> set[Triple]:
    from flake8.main.application import Application

    assert Path.cwd() == root
    capsys.readouterr()
    Application().run(["--isolated", "--select", "GPU", "--jobs", "1",
                       "--format", "%(path)s|%(row)d|%(code)s", *extra, *paths])
    out = capsys.readouterr().out
    return {(os.path.normpath(p), int(r), c)
            for p, r, c in (line.split("|") for line in out.splitlines())}


def cli_in_process(paths: list[str]) -> set[Triple]:
    from click.testing import CliRunner

    from lint_gpu_tests.interfaces import cli

    result = CliRunner().invoke(cli.cli, ["check", "--no-cache", "-q", *paths])
    assert result.exit_code in (0, 1), result.output
    out: set[Triple] = set()
    for line in result.stdout.splitlines():
        location, rest = line.split(": ", 1)
        path, row, _col = location.rsplit(":", 2)
        out.add((os.path.normpath(path), int(row), rest.split()[0]))
    return out


@pytest.fixture
def noqa_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(GpuTestLintPlugin, "disable_noqa", False)  # restored after the test
    (tmp_path / "test_semantics.py").write_text(
        _noqa_module([statement for statement, _ in FLAKE8_SEMANTICS]))
    (tmp_path / "test_extensions.py").write_text(_noqa_module(EXTENSIONS))
    return tmp_path


def test_noqa_decisions_are_flake8s(noqa_tree: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    lines = _engine_lines((noqa_tree / "test_semantics.py").read_text())
    expected = {("test_semantics.py", line, "GPU001")
                for line, (_, suppressed) in zip(lines, FLAKE8_SEMANTICS, strict=True)
                if not suppressed}
    monkeypatch.setattr(GpuTestLintPlugin, "apply_noqa", False)  # flake8's own noqa only
    assert flake8_in_process(noqa_tree, ["test_semantics.py"], capsys) == expected
    monkeypatch.setattr(GpuTestLintPlugin, "apply_noqa", True)
    assert flake8_in_process(noqa_tree, ["test_semantics.py"], capsys) == expected
    assert cli_in_process(["test_semantics.py"]) == expected


def test_noqa_extensions_hold_in_both_front_ends(noqa_tree: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    every = {("test_extensions.py", line, "GPU001")
             for line in _engine_lines((noqa_tree / "test_extensions.py").read_text())}
    monkeypatch.setattr(GpuTestLintPlugin, "apply_noqa", False)
    assert flake8_in_process(noqa_tree, ["test_extensions.py"], capsys) == every
    monkeypatch.setattr(GpuTestLintPlugin, "apply_noqa", True)
    assert flake8_in_process(noqa_tree, ["test_extensions.py"], capsys) == set()
    assert cli_in_process(["test_extensions.py"]) == set()
    # flake8's --disable-noqa turns the plugin's noqa off too
    assert flake8_in_process(noqa_tree, ["test_extensions.py"], capsys,
                             "--disable-noqa") == every


ENGINE_AND_CLEANUP = ('import gc\n\nfrom vllm import LLM\n\n\ndef test_x():\n'
                      '    llm = LLM("m")\n    llm.generate("hi")\n    gc.collect()\n')


@pytest.mark.parametrize(("directive", "left"), [
    ("# flake8: noqa", set()),
    ("# flake8:noqa: GPU004", set()),  # flake8 skips the whole file whatever follows
    ("# gpu-test-lint: noqa", set()),
    ("# GPU-TEST-LINT: NOQA: GPU004", {7}),
    ("# gpu-test-lint: noqa: GPU00", set()),
    ("x = 1  # flake8: noqa", {7, 9}),  # not on a line of its own: no file-level effect
], ids=["flake8", "flake8-codes", "bare", "codes", "prefix", "code-line"])
def test_file_level_noqa_same_in_both_front_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str],
                                                 directive: str, left: set[int]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "test_x.py").write_text(directive + "\n" + ENGINE_AND_CLEANUP)
    expected = {("test_x.py", line + 1, code) for line, code in ((7, "GPU001"), (9, "GPU004"))
                if line in left}
    assert cli_in_process(["test_x.py"]) == expected
    assert flake8_in_process(tmp_path, ["test_x.py"], capsys) == expected


def test_plugin_honours_exclude_and_extend_exclude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # The vllm-gaudi tree's extend-exclude held for the CLI only.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gpu-test-lint]\nextend-exclude = ["tests/unit_tests/lora/"]\n')
    for folder in ("tests/unit_tests/lora", "tests/unit_tests/ops", "build"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "test_x.py").write_text(SAMPLE)
    expected = {("tests/unit_tests/ops/test_x.py", 4, "GPU001")}
    assert cli_in_process(["."]) == expected
    assert flake8_in_process(tmp_path, ["."], capsys) == expected

"""The flake8 plugin reports the same (file, line, code) set as ``gpu-test-lint check``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lint_gpu_tests.flake8_plugin import GpuTestLintPlugin
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
    (tests / "test_broken.py").write_text("def f(:\n")
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
    for line in _run(root, ["lint_gpu_tests.cli", "check", "--no-cache", "-q", *paths]):
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


@pytest.mark.skipif(not (REALSUITES / "gaudi" / "tests").is_dir(),
                    reason="real vllm-gaudi tree not extracted on this machine")
@pytest.mark.parametrize("suite", ["gaudi", "spyre"])
def test_same_reports_as_cli_on_real_tree(suite: str) -> None:  # pragma: no cover - local
    root = REALSUITES / suite
    cli = {t for t in cli_triples(root, ["tests"]) if t[2] != "GPU900"}
    assert flake8_triples(root, ["tests"]) == cli

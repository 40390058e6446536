"""The README's command-line, configuration, flake8 and pre-commit examples, run: every
``gpu-test-lint`` command line in its console blocks works on a sample project, the Usage
example prints exactly what the README shows, the TOML, ini and YAML blocks are accepted by
what reads them, and the install and docs references are real."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lint_gpu_tests import __version__
from lint_gpu_tests.config import config_from_table
from lint_gpu_tests.interfaces import cli
from lint_gpu_tests.report.output import rule_url
from lint_gpu_tests.rules import package_rules

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCK_RE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK_RE.findall(README) if lang == language]


def commands(program: str) -> list[str]:
    return [line[2:] for body in blocks("console") for line in body.splitlines()
            if line.startswith(f"$ {program} ")]


# tests/models/test_chat.py as the Usage example reports it: GPU001 at 14:11, GPU004 at 22:5
CHAT = ("import gc\n\nimport pytest\n\nfrom vllm import LLM, SamplingParams\n\nPROMPTS = "
        '["Hello"]\n\n\n@pytest.mark.parametrize("n", [1])\ndef test_chat(n):\n'
        '    params = SamplingParams(max_tokens=n)\n    prompts = PROMPTS * n\n'
        '    llm = LLM("facebook/opt-125m")\n    outputs = llm.generate(prompts, params)\n'
        "    assert outputs\n    for output in outputs:\n        assert output.outputs\n"
        '    llm.chat([{"role": "user", "content": "hi"}])\n    del output\n    del outputs\n'
        "    gc.collect()\n")


@pytest.fixture
def sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    (tmp_path / "tests" / "models").mkdir(parents=True)
    (tmp_path / "tests" / "models" / "test_chat.py").write_text(CHAT)
    (tmp_path / "buffer.py").write_text(CHAT)
    # what `pytest --gpu-leak-report-file leaks.json` writes: test_chat leaked its engine
    (tmp_path / "leaks.json").write_text(json.dumps({
        "schema": "gpu-test-lint-leak-report", "version": 1, "rootdir": str(tmp_path),
        "tests_measured": 1, "leaks": [{
            "kind": "engine-processes", "nodeid": "tests/models/test_chat.py::test_chat[1]",
            "path": str(tmp_path / "tests/models/test_chat.py"),
            "relpath": "tests/models/test_chat.py", "line": 10, "function": "test_chat",
            "fixtures": [], "held_by": "the test failed", "bytes": 1 << 30}]}))
    return tmp_path


def test_usage_example_output_is_real(sample: Path) -> None:
    usage = next(body for body in blocks("console") if body.startswith("$ gpu-test-lint tests/"))
    shown = usage.split("\n$ ")[0].splitlines()[1:]
    result = CliRunner().invoke(cli.cli, ["tests/"])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == shown


def test_the_leak_report_line_confirms_what_leaked(sample: Path) -> None:
    (line,) = [line for line in commands("gpu-test-lint") if "--leak-report" in line]
    words = shlex.split(line, comments=True)
    result = CliRunner().invoke(cli.cli, [*words[1:], "--no-cache"])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "tests/models/test_chat.py:14:11: GPU001 [*] [leak confirmed] Engine `LLM(...)` built "
        "outside `with vllm_runner(...)`",
        "tests/models/test_chat.py:22:5: GPU004 [*] [leak confirmed] Manual cleanup "
        "`gc.collect()` in a function that owns an engine",
        "Found 2 violations.",
        "[*] 2 fixable with the `--fix` option.",
        "[leak confirmed] 2 violations confirmed by the leak report leaks.json.",
    ]


def test_every_readme_command_line_runs(sample: Path) -> None:
    lines = commands("gpu-test-lint")
    assert len(lines) >= 10
    for line in lines:
        words = shlex.split(line, comments=True)
        stdin = None
        if "<" in words:
            at = words.index("<")
            stdin = (sample / words[at + 1]).read_bytes()
            words = words[:at] + words[at + 2:]
        if ">" in words:
            words = words[:words.index(">")]
        (sample / "tests" / "models" / "test_chat.py").write_text(CHAT)  # before --fix too
        extra = [] if words[1] in ("rule", "rules") else ["--no-cache"]
        result = CliRunner().invoke(cli.cli, [*words[1:], *extra], input=stdin)
        assert result.exit_code in (0, 1), (line, result.output)
    module = [line for body in blocks("console") for line in body.splitlines()
              if line.startswith("$ python -m lint_gpu_tests ")]
    assert module == ["$ python -m lint_gpu_tests -V          # the same command, as a module"]
    assert (REPO / "lint_gpu_tests" / "__main__.py").is_file()


def test_configuration_blocks_are_accepted() -> None:
    runner, toml = blocks("toml")
    table = tomllib.loads(toml)["tool"]["gpu-test-lint"]
    config = config_from_table(table, "README.md")
    assert config.extend_exclude == ("tests/generated/",)
    assert config.per_file_ignores == (("tests/legacy/*", ("GPU004",)),)
    own = config_from_table(tomllib.loads(runner)["tool"]["gpu-test-lint"], "README.md")
    assert (own.runner_module, own.runner_yields, own.runner_classes) == (
        ("tests.utils", "managed_llm"), "engine", ("managed_llm", "VllmRunner"))


def test_flake8_block_selects_the_plugin_code() -> None:
    (ini,) = blocks("ini")
    assert "extend-select = GPU" in ini.splitlines()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["flake8.extension"] == {
        "GPU": "lint_gpu_tests.interfaces.flake8_plugin:GpuTestLintPlugin"}


def test_precommit_block_names_real_hooks_and_a_commit_sha() -> None:
    config = next(yaml.safe_load(body) for body in blocks("yaml") if "repos:" in body)
    (repo,) = config["repos"]
    assert re.fullmatch(r"[0-9a-f]{40}", repo["rev"])
    hook_ids = {hook["id"] for hook in yaml.safe_load(
        (REPO / ".pre-commit-hooks.yaml").read_text())}
    assert {hook["id"] for hook in repo["hooks"]} <= hook_ids
    assert "gpu-test-lint-fix" in README


def test_install_instructions_name_the_wheel_a_build_makes() -> None:
    assert f"pip install dist/gpu_test_lint-{__version__}-py3-none-any.whl" in README
    assert "pip install gpu-test-lint\n" not in README  # not on a package index


def test_rule_urls_point_to_anchors_in_the_docs_that_ship() -> None:
    docs = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    for code in [rule.code for rule in package_rules()] + ["GPU900"]:
        path, anchor = rule_url(code).split("#")
        assert (REPO / path).is_file()
        assert f'<a id="{anchor}"></a>' in docs
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (REPO / link).is_file(), link


def test_libcst_tool_list_prints_what_the_readme_shows(tmp_path: Path) -> None:
    """``python -m libcst.tool list`` in a project whose ``.libcst.codemod.yaml`` names
    ``lint_gpu_tests.codemods`` prints the README's lines, and no base class."""
    import subprocess

    block = next(body for body in blocks("console") if "$ python -m libcst.tool list" in body)
    shown = block.split("$ python -m libcst.tool list\n", 1)[1].split("$ ", 1)[0]
    (tmp_path / ".libcst.codemod.yaml").write_text(
        'generated_code_marker: "@generated"\nformatter: []\nblacklist_patterns: []\n'
        "modules:\n- lint_gpu_tests.codemods\nrepo_root: .\n")
    listed = subprocess.run([sys.executable, "-m", "libcst.tool", "list"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout
    assert listed == shown

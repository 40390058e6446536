"""The second fix strategy: ``fix-strategy = "isolate"`` and
``--fix-strategy``. Rewrites themselves are pinned byte for byte by the ``isolate_*`` cases in
``tests/fixtures/fix/``; these tests pin the option, its precedence, its validation, the
settings it shows and the reasons it gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, ConfigError, config_from_table
from lint_gpu_tests.interfaces import cli

ENGINE = ('import gc\n\nfrom vllm import LLM\n\n\ndef test_x():\n    llm = LLM("m")\n'
          '    llm.generate("hi")\n    gc.collect()\n')
ISOLATED = ('from lint_gpu_tests.runtime import create_new_process_for_each_test\n'
            'from vllm import LLM\n\n\n@create_new_process_for_each_test("spawn")\n'
            'def test_x():\n    llm = LLM("m")\n    llm.generate("hi")\n')
WRAPPED = ('import weakref\n\n\ndef test_x(vllm_runner):\n    with vllm_runner("m") as runner:\n'
           '        llm = weakref.proxy(runner.llm)\n        llm.generate("hi")\n')
KEPT = ('from vllm import LLM\n\nENGINES = []\n\n\ndef test_kept():\n'
        '    ENGINES.append(LLM("m"))\n    assert ENGINES[-1].generate(["hi"])\n')


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(ENGINE)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, list(args), catch_exceptions=False)


def test_config_isolate_fixes_by_isolating(project: Path) -> None:
    (project / ".gpu-test-lint.toml").write_text('fix-strategy = "isolate"\n')
    result = run("check", "--fix", "--no-cache", "tests")
    assert (result.exit_code, result.stdout) == (0, "Found 2 violations (2 fixed, 0 remaining).\n")
    assert (project / "tests" / "test_x.py").read_text() == ISOLATED


def test_the_flag_overrides_the_config(project: Path) -> None:
    (project / ".gpu-test-lint.toml").write_text('fix-strategy = "isolate"\n')
    assert run("check", "--fix", "--no-cache", "--fix-strategy", "runner", "tests").exit_code == 0
    assert (project / "tests" / "test_x.py").read_text() == WRAPPED
    (project / "tests" / "test_x.py").write_text(ENGINE)
    (project / ".gpu-test-lint.toml").write_text('fix-strategy = "runner"\n')
    assert run("check", "--fix", "--no-cache", "--fix-strategy", "isolate", "tests").exit_code == 0
    assert (project / "tests" / "test_x.py").read_text() == ISOLATED


def test_default_is_runner(project: Path) -> None:
    assert Config().fix_strategy == "runner"
    assert run("check", "--fix", "--no-cache", "tests").exit_code == 0
    assert (project / "tests" / "test_x.py").read_text() == WRAPPED


def test_bad_value_in_config_is_a_config_error(project: Path) -> None:
    (project / ".gpu-test-lint.toml").write_text('fix-strategy = "fork"\n')
    result = run("check", "tests")
    assert (result.exit_code, result.stderr) == (
        2, f"error: {project}/.gpu-test-lint.toml: `fix-strategy` must be one of runner, "
           "isolate, got 'fork'\n")
    with pytest.raises(ConfigError, match="`fix-strategy` must be a string"):
        config_from_table({"fix-strategy": 1}, "x.toml")


def test_bad_value_on_the_command_line_is_a_usage_error(project: Path) -> None:
    result = run("check", "--fix-strategy", "fork", "tests")
    assert result.exit_code == 2
    assert "Invalid value for '--fix-strategy': 'fork' is not one of 'runner', 'isolate'." \
        in result.stderr


def test_show_settings_prints_the_strategy(project: Path) -> None:
    (project / ".gpu-test-lint.toml").write_text('fix-strategy = "isolate"\n')
    lines = run("check", "--show-settings", "tests").stdout.splitlines()
    assert [line for line in lines if line.startswith("fix-strategy")] == [
        'fix-strategy = "isolate"']
    lines = run("check", "--show-settings", "--fix-strategy", "runner", "tests"
                ).stdout.splitlines()
    assert [line for line in lines if line.startswith("fix-strategy")] == [
        'fix-strategy = "runner"']


def test_runner_no_fix_says_isolate_would_fix_it(project: Path) -> None:
    (project / "tests" / "test_x.py").write_text(KEPT)
    result = run("check", "--no-cache", "--output-format", "json", "tests")
    [violation] = json.loads(result.stdout)
    assert violation["fix"] is None
    assert violation["no_fix_reason"] == (
        "the engine is stored in `ENGINES`, which outlives the block; `--fix-strategy "
        "isolate` would fix it safely")
    assert run("check", "--fix", "--no-cache", "--fix-strategy", "isolate", "tests"
               ).exit_code == 0
    assert (project / "tests" / "test_x.py").read_text() == (
        'from lint_gpu_tests.runtime import create_new_process_for_each_test\n'
        + KEPT[:KEPT.index("def test_kept")]
        + '@create_new_process_for_each_test("spawn")\n' + KEPT[KEPT.index("def test_kept"):])


def _fixes(source: str, **config: str) -> list[tuple[str, int, str, str, str]]:
    found = check_source(source.encode(), "tests/test_case.py",
                         Config(fix_strategy="isolate", **config))
    return [(v.code, v.location.row, v.fix.applicability.value, v.fix.title, v.fix.reason)
            for v in found if v.fix is not None]


def test_a_fixture_falls_back_to_the_runner_and_says_so() -> None:
    source = ('import pytest\nfrom vllm import LLM\n\n\n@pytest.fixture\ndef llm():\n'
              '    engine = LLM("m")\n    yield engine\n')
    assert _fixes(source)[0] == (
        "GPU001", 7, "safe",
        "Wrap in `with vllm_runner(...)` (not isolated: a fixture's value cannot cross to a "
        "child process)", "")


def test_an_engine_fixture_argument_keeps_the_test_out_of_a_child() -> None:
    source = ('import pytest\nfrom vllm import LLM\n\n\n@pytest.fixture\ndef llm():\n'
              '    engine = LLM("m")\n    yield engine\n\n\ndef test_two(llm):\n'
              '    other = LLM("n")\n    assert other.generate(["x"]) and llm.generate(["y"])\n')
    assert _fixes(source)[-1] == (
        "GPU001", 12, "safe",
        "Wrap in `with vllm_runner(...)` (not isolated: `llm` is an engine fixture: an engine "
        "cannot be sent to a child process)", "")


def test_without_the_decorator_in_isolation_decorators_there_is_no_isolation() -> None:
    found = check_source(ENGINE.encode(), "tests/test_case.py", Config(
        fix_strategy="isolate", isolation_decorators=("spawn_new_process_for_each_test",)))
    assert found[0].fix is not None and found[0].fix.title == (
        "Wrap in `with vllm_runner(...)` (not isolated: `create_new_process_for_each_test` is "
        "not in `isolation-decorators`)")


def test_the_codemod_alone_isolates() -> None:
    """Run as LibCST's tool runs it (no configuration): the strategy is ``isolate``."""
    import libcst as cst
    from libcst.codemod import CodemodContext

    from lint_gpu_tests.codemods.isolate_test_process import IsolateTestProcess

    command = IsolateTestProcess(CodemodContext(filename="tests/test_x.py"))
    assert command.transform_module(cst.parse_module(ENGINE)).code == ISOLATED

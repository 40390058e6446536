"""Config resolved per file: the nearest ``pyproject.toml`` with a
``[tool.gpu-test-lint]`` table or ``.gpu-test-lint.toml`` walking up from each file, as ruff
and flake8 resolve theirs; ``--config`` overrides all; relative patterns anchored at their own
config file; the cache follows each file's config. Real rules, through the CLI in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests.config import ConfigResolver
from lint_gpu_tests.interfaces import cli

ENGINE = ('import gc\n\nfrom vllm import LLM\n\n\ndef test_x():\n    llm = LLM("m")\n'
          '    llm.generate("hi")\n    gc.collect()\n')
GPU001 = "7:11: GPU001 [*] Engine `LLM(...)` built outside `with vllm_runner(...)`"
GPU004 = "9:5: GPU004 [*] Manual cleanup `gc.collect()` in a function that owns an engine"
# with GPU001 ignored, GPU004's fix (part of GPU001's rewrite) is not offered
GPU004_ALONE = GPU004.replace(" [*]", "")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, ["check", *args], catch_exceptions=False)


def violations(result: Result) -> list[str]:
    return [line for line in result.stdout.splitlines() if ": GPU" in line]


@pytest.fixture
def monorepo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``a/`` ignores GPU004 in its pyproject; ``b/`` has no config (defaults)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    for sub in ("a", "b"):
        (tmp_path / sub / "tests").mkdir(parents=True)
        (tmp_path / sub / "tests" / "test_x.py").write_text(ENGINE)
    (tmp_path / "a" / "pyproject.toml").write_text(
        '[project]\nname = "a"\n\n[tool.gpu-test-lint]\nignore = ["GPU004"]\n')
    return tmp_path


EXPECTED = [f"a/tests/test_x.py:{GPU001}", f"b/tests/test_x.py:{GPU001}",
            f"b/tests/test_x.py:{GPU004}"]


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
def test_each_file_gets_its_nearest_config_whatever_the_order(monorepo: Path,
                                                              order: tuple[str, str]) -> None:
    result = run("--no-cache", *(f"{sub}/tests/test_x.py" for sub in order))
    assert result.exit_code == 1
    assert violations(result) == EXPECTED


def test_walking_from_the_root_resolves_per_directory(monorepo: Path) -> None:
    assert violations(run("--no-cache", ".")) == EXPECTED


def test_config_option_overrides_every_file(monorepo: Path) -> None:
    result = run("--no-cache", "--config", "a/pyproject.toml", "b", "a")
    assert violations(result) == [f"a/tests/test_x.py:{GPU001}", f"b/tests/test_x.py:{GPU001}"]


def test_command_line_selection_applies_on_top_of_each_config(monorepo: Path) -> None:
    # --ignore replaces each config's own ignore (a's GPU004 shows again)
    assert violations(run("--no-cache", "--extend-select", "GPU001", "--ignore", "GPU001",
                          ".")) == [f"a/tests/test_x.py:{GPU004_ALONE}",
                                    f"b/tests/test_x.py:{GPU004_ALONE}"]


def test_pyproject_without_the_table_is_skipped(monorepo: Path) -> None:
    # b/pyproject.toml has no [tool.gpu-test-lint]: the walk goes on to the root's config.
    (monorepo / "b" / "pyproject.toml").write_text('[project]\nname = "gpu-test-lint-b"\n')
    (monorepo / ".gpu-test-lint.toml").write_text('ignore = ["GPU001"]\n')
    assert violations(run("--no-cache", ".")) == [f"a/tests/test_x.py:{GPU001}",
                                                  f"b/tests/test_x.py:{GPU004_ALONE}"]


def test_dedicated_file_wins_over_pyproject_in_the_same_directory(monorepo: Path) -> None:
    (monorepo / "a" / ".gpu-test-lint.toml").write_text('ignore = ["GPU001"]\n')
    assert violations(run("--no-cache", "a")) == [f"a/tests/test_x.py:{GPU004_ALONE}"]


def test_relative_patterns_are_anchored_at_their_own_config(monorepo: Path) -> None:
    (monorepo / "a" / "pyproject.toml").write_text(
        '[tool.gpu-test-lint]\nper-file-ignores = { "tests/legacy/*" = ["GPU001"] }\n'
        'extend-exclude = ["generated/"]\n')
    for sub in ("a", "b"):
        for folder in ("tests/legacy", "generated"):
            (monorepo / sub / folder).mkdir(parents=True, exist_ok=True)
            (monorepo / sub / folder / "test_y.py").write_text(ENGINE)
    assert violations(run("--no-cache", ".")) == [
        f"a/tests/legacy/test_y.py:{GPU004_ALONE}",
        f"a/tests/test_x.py:{GPU001}", f"a/tests/test_x.py:{GPU004}",
        f"b/generated/test_y.py:{GPU001}", f"b/generated/test_y.py:{GPU004}",
        f"b/tests/legacy/test_y.py:{GPU001}", f"b/tests/legacy/test_y.py:{GPU004}",
        *EXPECTED[1:],
    ]
    # the same from inside the sub-project, and for pre-commit's named files
    result = run("--no-cache", "--force-exclude", "a/generated/test_y.py",
                 "a/tests/legacy/test_y.py")
    assert violations(result) == [f"a/tests/legacy/test_y.py:{GPU004_ALONE}"]


def test_cache_lives_with_each_config_and_follows_its_changes(monorepo: Path) -> None:
    assert violations(run(".")) == EXPECTED
    assert (monorepo / "a" / ".gpu-test-lint-cache").is_dir()
    assert (monorepo / ".gpu-test-lint-cache").is_dir()  # the defaults' root: the cwd
    assert not (monorepo / "b" / ".gpu-test-lint-cache").exists()
    assert violations(run(".")) == EXPECTED  # served from the caches
    (monorepo / "a" / "pyproject.toml").write_text('[tool.gpu-test-lint]\nignore = ["GPU001"]\n')
    assert violations(run(".")) == [f"a/tests/test_x.py:{GPU004_ALONE}", *EXPECTED[1:]]


def test_invalid_nested_config_is_exit_2_naming_it(monorepo: Path) -> None:
    (monorepo / "b" / ".gpu-test-lint.toml").write_text('selct = ["GPU001"]\n')
    result = run("--no-cache", ".")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (f"error: {monorepo}/b/.gpu-test-lint.toml: unknown key `selct` at "
                             "the top level (did you mean `select`?)\n")


def test_resolver_api(monorepo: Path) -> None:
    resolver = ConfigResolver()
    a = resolver.for_file("a/tests/test_x.py")
    assert (a.ignore, a.root) == (("GPU004",), str(monorepo / "a"))
    b = resolver.for_file("b/tests/test_x.py")
    assert (b.ignore, b.root) == ((), str(monorepo))
    assert resolver.for_directory("a/tests") is a
    assert [c.root for c in resolver.configs()] == [str(monorepo / "a"), str(monorepo)]

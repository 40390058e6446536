"""The project's line length (issue 26): where it comes from, and fixes that keep to it.

``line-length`` of ``[tool.gpu-test-lint]``, else ruff's, else black's, else 88, resolved per
file; a signature the added fixture makes too long is wrapped as ruff format wraps it; and
fixed files pass ``ruff check --select E501`` and ``ruff format --check`` under line lengths
79, 88, 100 and 120 when their input did.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lint_gpu_tests import fixloop
from lint_gpu_tests.cli import cli
from lint_gpu_tests.config import Config, ConfigError, ConfigResolver, config_as_toml

FIX_DIR = Path(__file__).parent / "fixtures" / "fix"
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
LONG_SIGNATURE = (
    "from vllm import LLM\n\n\n"
    "def test_generates_with_a_long_name(model_name_parameter, prompts_for_it, number_n):\n"
    "    llm = LLM(model=model_name_parameter)\n"
    "    llm.generate(prompts_for_it * number_n)\n"
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _resolved(tmp_path: Path, relative: str = "tests/test_a.py") -> Config:
    return ConfigResolver(cwd=str(tmp_path)).for_file(str(tmp_path / relative))


def test_default_is_88(tmp_path: Path) -> None:
    config = _resolved(tmp_path)
    assert (config.line_length, config.line_length_source) == (88, "")


def test_ruff_setting_is_taken(tmp_path: Path) -> None:
    pyproject = _write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    config = _resolved(tmp_path)
    assert config.line_length == 100
    assert config.line_length_source == f"{pyproject} [tool.ruff]"


def test_black_setting_is_taken_when_ruff_sets_none(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml",
           "[tool.ruff.lint]\nselect = ['E']\n[tool.black]\nline-length = 79\n")
    assert _resolved(tmp_path).line_length == 79


def test_ruff_wins_over_black(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml",
           "[tool.black]\nline-length = 79\n[tool.ruff]\nline-length = 120\n")
    assert _resolved(tmp_path).line_length == 120


def test_own_setting_wins_over_ruff(tmp_path: Path) -> None:
    pyproject = _write(tmp_path / "pyproject.toml",
                       "[tool.ruff]\nline-length = 100\n[tool.gpu-test-lint]\nline-length = 79\n")
    config = _resolved(tmp_path)
    assert config.line_length == 79
    assert config.line_length_source == f"{pyproject} [tool.gpu-test-lint]"


def test_nearest_ruff_toml_wins(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml",
           "[tool.ruff]\nline-length = 100\n[tool.gpu-test-lint]\nselect = ['GPU']\n")
    ruff_toml = _write(tmp_path / "tests" / "ruff.toml", "line-length = 120\n")
    dotted = _write(tmp_path / "other" / ".ruff.toml", "line-length = 79\n")
    resolver = ConfigResolver(cwd=str(tmp_path))
    inner = resolver.for_file(str(tmp_path / "tests" / "test_a.py"))
    assert (inner.line_length, inner.line_length_source) == (120, str(ruff_toml))
    assert resolver.for_file(str(tmp_path / "other" / "test_b.py")).line_length_source == \
        str(dotted)
    assert resolver.for_file(str(tmp_path / "test_c.py")).line_length == 100
    # the rest of the settings are the same config file's
    assert inner.source == str(tmp_path / "pyproject.toml")


def test_a_ready_config_is_taken_as_it_is(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    resolver = ConfigResolver(fixed=Config(), cwd=str(tmp_path))
    assert resolver.for_file(str(tmp_path / "test_a.py")).line_length == 88


@pytest.mark.parametrize("value", ['"100"', "0", "true", "321"])
def test_bad_line_length_is_an_error(tmp_path: Path, value: str) -> None:
    _write(tmp_path / "pyproject.toml", f"[tool.gpu-test-lint]\nline-length = {value}\n")
    with pytest.raises(ConfigError, match="line-length"):
        _resolved(tmp_path)


def test_show_settings_names_the_source(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pyproject = _write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    _write(tmp_path / "tests" / "test_a.py", "def test_a():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["check", "--show-settings", "tests"],
                                prog_name="gpu-test-lint")
    assert result.exit_code == 0, result.output
    assert f"line-length = 100  # from {pyproject} [tool.ruff]\n" in result.output
    assert "line-length = 88  # from the default\n" in config_as_toml(Config())


def _fixed(source: str, width: int) -> str:
    outcome = fixloop.fix_source(source.encode(), "tests/test_a.py",
                                 Config(line_length=width), unsafe=True)
    assert outcome.new_source is not None
    return outcome.new_source.decode()


def test_signature_that_fits_stays_on_one_line() -> None:
    fixed = _fixed(LONG_SIGNATURE, 120)
    assert "def test_generates_with_a_long_name(model_name_parameter, prompts_for_it, " \
        "number_n, vllm_runner):\n" in fixed
    assert "with vllm_runner(model_name_parameter) as runner:\n" in fixed


def test_signature_hugs_its_parameters_when_they_fit() -> None:
    assert "def test_generates_with_a_long_name(\n" \
        "    model_name_parameter, prompts_for_it, number_n, vllm_runner\n):\n" in \
        _fixed(LONG_SIGNATURE, 88)


def test_signature_one_parameter_a_line_otherwise() -> None:
    source = LONG_SIGNATURE.replace("test_generates_with_a_long_name", "test_x")
    assert "def test_x(\n    model_name_parameter,\n" \
        "    prompts_for_it,\n    number_n,\n    vllm_runner,\n):\n" in _fixed(source, 62)


def test_signature_already_too_long_is_left_alone() -> None:
    """The user's own over-long line is theirs: the fix appends, as ruff's E501 was
    already reported on it."""
    assert "def test_generates_with_a_long_name(model_name_parameter, prompts_for_it, " \
        "number_n, vllm_runner):\n" in _fixed(LONG_SIGNATURE, 70)


def test_monkeypatch_parameter_wraps_too() -> None:
    source = ("import os\n\n\n"
              "def test_sets_the_environment_for_a_model(model_name_parameter, n):\n"
              "    os.environ['VLLM_USE_V1'] = '1'\n")
    assert "def test_sets_the_environment_for_a_model(\n" \
        "    model_name_parameter, n, monkeypatch\n):\n" in _fixed(source, 79)


#: Fix fixtures whose fix adds a fixture parameter or writes a with-header, and the new case.
#: (Not yet ``mapping_*``: the docstring of the ``_runner_kwargs`` helper a mapping fix adds
#: is 90 characters wide.)
STYLE_CASES = ("signature_wrapped", "multiline_params_trailing_comma", "argument_mapping",
               "target_vllm_defaults", "env_setitem_test", "two_engines_nested",
               "fixture_yield_engine", "env_update_setdefault")


def _ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert RUFF is not None
    return subprocess.run([RUFF, *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
@pytest.mark.parametrize("width", [79, 88, 100, 120])
@pytest.mark.parametrize("case", STYLE_CASES)
def test_fixed_file_keeps_to_ruff(tmp_path: Path, case: str, width: int) -> None:
    """The case's input formatted by ruff at ``width``, fixed at ``width``, is still
    formatted and has no line over ``width``."""
    config_file = FIX_DIR / case / "config.toml"
    target = "vllm" if config_file.is_file() and "vllm" in config_file.read_text() else \
        "bundled"
    flags = ("--isolated", "--line-length", str(width), "--no-cache")
    before = _write(tmp_path / "test_case.py", (FIX_DIR / case / "before.py").read_text())
    _ruff("format", *flags, before.name, cwd=tmp_path)
    formatted = before.read_text()
    outcome = fixloop.fix_source(
        formatted.encode(), "tests/test_case.py",
        Config(line_length=width, target=target), unsafe=True)
    assert outcome.new_source is not None, "the fixture's fix no longer applies"
    before.write_bytes(outcome.new_source)
    long_lines = _ruff("check", *flags, "--select", "E501", before.name, cwd=tmp_path)
    assert long_lines.returncode == 0, long_lines.stdout
    formatted_after = _ruff("format", *flags, "--diff", before.name, cwd=tmp_path)
    assert formatted_after.returncode == 0, formatted_after.stdout

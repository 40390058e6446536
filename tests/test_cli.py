"""End-to-end tests of ``gpu-test-lint`` (click, in-process) against fake rules, so the
expected output does not move when the real rules change."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import fake_rules
import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests import codes
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.fixing.fixloop import FixOutcome
from lint_gpu_tests.interfaces import cli, cli_options
from lint_gpu_tests.report import present as present_module
from lint_gpu_tests.running import run as run_module

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project in tmp_path with one sample test file; cwd is the project."""
    fake_rules.install(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(fake_rules.SAMPLE)
    (tmp_path / "tests" / "test_clean.py").write_text("def test_ok():\n    assert True\n")
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, list(args), catch_exceptions=False)


CONCISE = [
    'tests/test_a.py:4:11: GPU091 [*] `LLM(...)` built by hand',
    'tests/test_a.py:5:13: GPU092 `unsafe_llm(...)` built by hand',
    'tests/test_a.py:6:13: GPU093 `nofix_llm(...)` built by hand',
]


def test_check_concise_lines_summary_and_exit_1(tree: Path) -> None:
    result = run("check", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        *CONCISE,
        "Found 3 violations.",
        "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the "
        "`--unsafe-fixes` option).",
    ]
    assert result.stderr == ""


def test_check_is_the_default_command_and_dot_the_default_path(tree: Path) -> None:
    assert run("tests").stdout == run("check", "tests").stdout
    default = run()
    assert default.exit_code == 1
    assert default.stdout.splitlines()[:3] == CONCISE


def test_unsafe_fixes_marks_unsafe_fixes_fixable(tree: Path) -> None:
    result = run("check", "--unsafe-fixes", "tests")
    assert result.stdout.splitlines() == [
        'tests/test_a.py:4:11: GPU091 [*] `LLM(...)` built by hand',
        'tests/test_a.py:5:13: GPU092 [*] `unsafe_llm(...)` built by hand',
        'tests/test_a.py:6:13: GPU093 `nofix_llm(...)` built by hand',
        "Found 3 violations.",
        "[*] 2 fixable with the `--fix` option.",
    ]


def test_only_hidden_fixes(tree: Path) -> None:
    result = run("check", "--select", "GPU092", "tests")
    assert result.stdout.splitlines()[1:] == [
        "Found 1 violation.",
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]


def test_clean_tree_passes_and_quiet_silences(tree: Path) -> None:
    result = run("check", "tests/test_clean.py")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")
    quiet = run("check", "-q", "tests/test_clean.py")
    assert (quiet.exit_code, quiet.stdout) == (0, "")
    quiet_violations = run("check", "-q", "tests")
    assert quiet_violations.stdout.splitlines() == CONCISE


@pytest.mark.parametrize(
    ("args", "codes"),
    [
        (("--select", "GPU091"), ["GPU091"]),
        (("--select", "GPU091,GPU093"), ["GPU091", "GPU093"]),
        (("--ignore", "GPU09"), []),
        (("--ignore", "GPU091", "--ignore", "GPU093"), ["GPU092"]),
        (("--select", "GPU091", "--extend-select", "GPU092"), ["GPU091", "GPU092"]),
        (("--select", "GPU09", "--ignore", "GPU092"), ["GPU091", "GPU093"]),
    ],
)
def test_selection_flags(tree: Path, args: tuple[str, ...], codes: list[str]) -> None:
    result = run("check", "-q", *args, "tests")
    assert [line.split()[1] for line in result.stdout.splitlines()] == codes
    assert result.exit_code == (1 if codes else 0)


def test_cli_selection_overrides_config(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.gpu-test-lint]\nselect = ["GPU093"]\n')
    assert [ln.split()[1] for ln in run("-q", "tests").stdout.splitlines()] == ["GPU093"]
    over = run("-q", "--select", "GPU091", "tests")
    assert [ln.split()[1] for ln in over.stdout.splitlines()] == ["GPU091"]
    extend = run("-q", "--extend-select", "GPU092", "tests")
    assert [ln.split()[1] for ln in extend.stdout.splitlines()] == ["GPU092", "GPU093"]


def test_invalid_code_is_a_usage_error(tree: Path) -> None:
    result = run("check", "--select", "gpu-001", "tests")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: invalid value for `--select`: `GPU-001` is not a rule code or prefix\n"
    )


def test_exit_zero(tree: Path) -> None:
    result = run("check", "--exit-zero", "tests")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[:3] == CONCISE


def test_missing_path_is_one_line_error_exit_2(tree: Path) -> None:
    result = run("check", "tests", "nope.py")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == "error: nope.py: path does not exist\n"


def test_unknown_config_key_is_one_line_error_exit_2(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.gpu-test-lint]\nselekt = ["GPU"]\n')
    result = run("check", "tests")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: ")
    assert "unknown key `selekt`" in result.stderr
    assert "Traceback" not in result.output


def test_missing_config_file_exit_2(tree: Path) -> None:
    result = run("check", "--config", "missing.toml", "tests")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: cannot read missing.toml")


def test_usage_error_exit_2(tree: Path) -> None:
    assert run("check", "--output-format", "xml").exit_code == 2
    assert run("check", "--jobs", "0").exit_code == 2


def test_syntax_error_is_gpu900_and_run_goes_on(tree: Path) -> None:
    (tree / "tests" / "test_bad.py").write_text("def f(:\n    LLM()\n")
    result = run("check", "-q", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        *CONCISE,
        "tests/test_bad.py:1:7: GPU900 SyntaxError: invalid syntax",
    ]


class Boom(fake_rules.FakeSafe):
    code = "GPU094"
    name = "boom"

    def check(self, module: object):  # type: ignore[no-untyped-def, override]
        if "boom" in module.path:  # type: ignore[attr-defined]
            raise ValueError("kaput")
        return iter(())


def test_internal_error_reported_per_file_exit_2(tree: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import lint_gpu_tests.rules as rules

    monkeypatch.setattr(rules, "ALL_RULES", [*fake_rules.FAKE_RULES, Boom])
    monkeypatch.setattr(codes, "RULE_CODES", {r.code: r.name for r in rules.ALL_RULES})
    (tree / "tests" / "test_boom.py").write_text("LLM()\n")
    result = run("check", "-q", "tests")
    assert result.exit_code == 2
    assert result.stdout.splitlines() == CONCISE
    assert result.stderr.splitlines() == [
        "error: failed to check tests/test_boom.py: GPU094 (boom): ValueError: kaput",
        "hint: run with --verbose to see the traceback",
    ]
    verbose = run("check", "-q", "--verbose", "--no-cache", "tests")
    assert verbose.exit_code == 2
    assert "Traceback (most recent call last)" in verbose.stderr
    assert 'raise ValueError("kaput")' in verbose.stderr


def test_internal_error_wins_over_exit_zero(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lint_gpu_tests.rules as rules

    monkeypatch.setattr(rules, "ALL_RULES", [Boom])
    monkeypatch.setattr(codes, "RULE_CODES", {Boom.code: Boom.name})
    (tree / "tests" / "test_boom.py").write_text("LLM()\n")
    assert run("check", "--exit-zero", "tests").exit_code == 2


# ------------------------------------------------------------------ fixing (fake fixer)

FIXED_SAMPLE = fake_rules.SAMPLE.replace('llm = LLM("m")', 'llm = runner_llm("m")')


def fake_fix_source(source: bytes, path: str, config, *, unsafe: bool = False,  # type: ignore[no-untyped-def]
                    violations: list | None = None, analysis: object = None,
                    conftests: object = None) -> FixOutcome:
    before = violations if violations is not None else check_source(source, path, config)
    new = source.replace(b'llm = LLM("m")', b'llm = runner_llm("m")')
    if new == source:
        return FixOutcome(None, [], before)
    after = check_source(new, path, config)
    fixed = [v for v in before if v.code == "GPU091"]
    return FixOutcome(new, fixed, after)


@pytest.fixture
def fixer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_module, "fix_source", fake_fix_source)


def test_fix_writes_file_and_reports(tree: Path, fixer: None) -> None:
    target = tree / "tests" / "test_a.py"
    os.chmod(target, 0o640)
    result = run("check", "--fix", "tests")
    assert result.exit_code == 1
    assert target.read_text() == FIXED_SAMPLE
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)
    assert result.stdout.splitlines() == [
        CONCISE[1],
        CONCISE[2],
        "Found 3 violations (1 fixed, 2 remaining).",
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]
    again = run("check", "--fix", "tests")
    assert again.stdout.splitlines()[-2] == "Found 2 violations."


def test_fix_all_fixed_exit_0_or_1_with_exit_non_zero_on_fix(tree: Path, fixer: None) -> None:
    args = ("check", "--select", "GPU091", "--show-fixes")
    result = run(*args, "--exit-non-zero-on-fix", "--fix", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "Fixed 1 violation:",
        "- tests/test_a.py:",
        "    1 × GPU091 (fake-safe)",
        "Found 1 violation (1 fixed, 0 remaining).",
    ]
    (tree / "tests" / "test_a.py").write_text(fake_rules.SAMPLE)
    assert run(*args, "--fix", "tests").exit_code == 0


def test_diff_prints_and_writes_nothing(tree: Path, fixer: None) -> None:
    target = tree / "tests" / "test_a.py"
    result = run("check", "--diff", "tests")
    assert result.exit_code == 1
    assert target.read_text() == fake_rules.SAMPLE
    assert result.stdout.split("\n") == [
        "--- tests/test_a.py",
        "+++ tests/test_a.py",
        "@@ -1,6 +1,6 @@",
        " from vllm import LLM",
        " ",
        " def test_x():",
        '-    llm = LLM("m")',
        '+    llm = runner_llm("m")',
        '     other = unsafe_llm("m")',
        '     third = nofix_llm("m")',
        "",
    ]
    assert result.stderr == "Would fix 1 violation.\n"
    clean = run("check", "--diff", "tests/test_clean.py")
    assert (clean.exit_code, clean.stdout) == (0, "")


def test_statistics(tree: Path) -> None:
    (tree / "tests" / "test_b.py").write_text('from vllm import LLM\nLLM()\nLLM()\n')
    result = run("check", "--statistics", "tests")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "3\tGPU091\t[*] fake-safe",
        "1\tGPU092\t[ ] fake-unsafe",
        "1\tGPU093\t[ ] fake-nofix",
        "[*] 3 fixable with the `--fix` option (1 hidden fix can be enabled with the "
        "`--unsafe-fixes` option).",
    ]
    unsafe = run("check", "--statistics", "--unsafe-fixes", "tests")
    assert unsafe.stdout.splitlines() == [
        "3\tGPU091\t[*] fake-safe",
        "1\tGPU092\t[*] fake-unsafe",
        "1\tGPU093\t[ ] fake-nofix",
        "[*] 4 fixable with the `--fix` option.",
    ]
    quiet = run("check", "--statistics", "--quiet", "tests")
    assert len(quiet.stdout.splitlines()) == 3


def test_cache_created_at_config_root_and_no_cache(tree: Path) -> None:
    run("check", "--no-cache", "tests")
    assert not (tree / ".gpu-test-lint-cache").exists()
    first = run("check", "tests")
    assert (tree / ".gpu-test-lint-cache" / "CACHEDIR.TAG").is_file()
    assert (tree / ".gpu-test-lint-cache" / ".gitignore").read_text().endswith("*\n")
    second = run("check", "tests")
    assert first.stdout == second.stdout
    run("check", "--cache-dir", "elsewhere", "tests")
    assert (tree / "elsewhere" / "CACHEDIR.TAG").is_file()


def test_rule_command_prints_sections_without_markers(tree: Path) -> None:
    result = run("rule", "gpu091")
    assert result.exit_code == 0
    assert result.stdout == textwrap.dedent("""\
        # fake-safe (GPU091)

        Fix is available: Wrap in `with vllm_runner(...)`.

        ## What it does
        Checks for `LLM(...)` calls.

        ## Why is this bad?
        The engine leaks.

        ## Example
        Bad

        ```python
        from vllm import LLM
        llm = LLM("m")
        ```

        ## Use instead
        ```python
        def test(vllm_runner):
            with vllm_runner("m") as r:
                pass
        ```

        ## Fix safety
        Safe.

        ## Options
        - `runner-fixture`

        ## References
        - [vLLM](https://docs.vllm.ai)
        """)


def test_rule_command_unknown_code(tree: Path) -> None:
    result = run("rule", "GPU990")
    assert (result.exit_code, result.stderr) == (
        2, "error: unknown rule code `GPU990` (see `gpu-test-lint rules`)\n")


def test_rules_table(tree: Path) -> None:
    result = run("rules")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "Code    Name            Fix  Summary",
        "GPU091  fake-safe       yes  Engine built by hand",
        "GPU092  fake-unsafe     yes  Unsafe engine",
        "GPU093  fake-nofix      no   Engine without fix",
        "GPU900  syntax-error    no   A file that does not parse (reported for analysed files, "
        "never rewritten)",
        "GPU999  internal-error  no   The flake8 plugin's report of invalid settings or of a "
        "rule that failed on a file",
    ]


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == "gpu-test-lint, version 0.1.0\n"


def test_color_only_on_tty_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli_options._use_color() is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli_options._use_color() is False
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli_options._use_color() is False


def test_progress_bar_appears_once_the_run_has_lasted_two_seconds() -> None:
    now = [0.0]
    out = io.StringIO()  # not a terminal: click prints the bar's label alone
    progress = present_module.ProgressBar(True, file=out, clock=lambda: now[0])
    progress.start(4)
    now[0] = present_module.PROGRESS_AFTER_S - 0.5
    progress.advance(1)
    assert out.getvalue() == ""
    now[0] = present_module.PROGRESS_AFTER_S + 0.5
    progress.advance(1)
    progress.advance(1)
    assert out.getvalue().startswith("Checking")
    assert progress.bar is not None and progress.bar.pos == 3
    progress.finish()
    assert progress.bar is None


def test_progress_bar_never_when_nothing_is_left_or_disabled() -> None:
    out = io.StringIO()
    finished = present_module.ProgressBar(True, file=out, clock=lambda: 100.0)
    finished.start(1)
    finished.advance(1)  # the last file: no bar for a run that is over
    disabled = present_module.ProgressBar(False, file=out, clock=lambda: 100.0)
    disabled.start(2)
    disabled.advance(1)
    assert (out.getvalue(), finished.bar, disabled.bar) == ("", None, None)


def test_progress_bar_on_stderr_only_on_a_terminal(tree: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(present_module, "PROGRESS_AFTER_S", 0.0)  # every run is a long one
    plain = run("check", "--no-cache", "tests")
    assert plain.stderr == ""  # a pipe, a file, a test: no bar
    monkeypatch.setattr(cli, "_stderr_is_terminal", lambda: True)
    drawn = run("check", "--no-cache", "tests")
    assert drawn.stderr.startswith("Checking")
    assert (drawn.exit_code, drawn.stdout) == (plain.exit_code, plain.stdout)
    assert run("check", "--no-cache", "--quiet", "tests").stderr == ""


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests"), str(REPO)])
    env.pop("GPU_TEST_LINT_CACHE_DIR", None)
    return env


def test_libcst_not_imported_when_nothing_to_fix(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(fake_rules.SAMPLE)
    code = textwrap.dedent("""\
        import sys
        import fake_rules
        import lint_gpu_tests.rules as rules
        rules.ALL_RULES[:] = [fake_rules.FakeNoFix, fake_rules.FakeUnsafe]
        from lint_gpu_tests.interfaces.cli import main
        try:
            main(["check", "--fix", "--no-cache", "-q", "."])
        except SystemExit as exc:
            print("exit", exc.code)
        print("libcst loaded:", any(m.split(".")[0] == "libcst" for m in sys.modules))
        """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_subprocess_env(),
                          capture_output=True, text=True, check=False)
    assert proc.stdout.splitlines()[-2:] == ["exit 1", "libcst loaded: False"], proc.stderr


def test_a_warm_run_imports_only_what_the_cache_answer_needs(tmp_path: Path) -> None:
    """A ``check`` the result cache answers whole imports neither the checker nor the
    modules a plain check does not use (baselines, leak reports, edits, the parser's
    helpers, the other commands), and reports what the cold run did. The tree's engine helper
    summaries are read: the cache key counts them."""
    (tmp_path / "test_a.py").write_text("from vllm import LLM\n\n\ndef test_a():\n"
                                        "    llm = LLM('m')\n    llm.generate([])\n")
    code = textwrap.dedent("""\
        import sys
        from lint_gpu_tests.interfaces.cli import main
        try:
            main(["check", "--cache-dir", "cache", "."])
        except SystemExit as exc:
            print("exit", exc.code)
        print(sorted(m for m in sys.modules if m.startswith("lint_gpu_tests.")))
        """)
    runs = [subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_subprocess_env(),
                           capture_output=True, text=True, check=False) for _ in range(2)]
    assert runs[0].stdout.splitlines()[:-1] == runs[1].stdout.splitlines()[:-1] == [
        "test_a.py:5:11: GPU001 [*] Engine `LLM(...)` built outside `with vllm_runner(...)`",
        "Found 1 violation.", "[*] 1 fixable with the `--fix` option.", "exit 1"], runs[1].stderr
    assert "lint_gpu_tests.checking.checker" in runs[0].stdout.splitlines()[-1]
    assert runs[1].stdout.splitlines()[-1] == str(sorted([
        "lint_gpu_tests.api",
        "lint_gpu_tests.running.cache",
        "lint_gpu_tests.interfaces.cli",
        "lint_gpu_tests.interfaces.cli_options",
        "lint_gpu_tests.config",
        "lint_gpu_tests.checking.conftest_index",
        "lint_gpu_tests.running.discovery",
        "lint_gpu_tests.ftypes",
        "lint_gpu_tests.checking.helper_index",
        "lint_gpu_tests.report.output",
        "lint_gpu_tests.report.present",
        "lint_gpu_tests.running.run",
        "lint_gpu_tests.running.answers",
        # the packages of those modules
        "lint_gpu_tests.checking",
        "lint_gpu_tests.interfaces",
        "lint_gpu_tests.report",
        "lint_gpu_tests.running",
    ]))


def test_console_script_runs(tmp_path: Path) -> None:
    """The installed entry point: exit codes as ruff's through a real process."""
    exe = Path(sys.executable).with_name("gpu-test-lint")
    if not exe.exists():
        pytest.skip("console script not installed next to this interpreter")
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    ok = subprocess.run([str(exe), "--no-cache", "test_ok.py"], cwd=tmp_path,
                        capture_output=True, text=True, check=False)
    assert (ok.returncode, ok.stdout) == (0, "All checks passed!\n")
    missing = subprocess.run([str(exe), "nope"], cwd=tmp_path, capture_output=True, text=True,
                             check=False)
    assert (missing.returncode, missing.stderr) == (2, "error: nope: path does not exist\n")

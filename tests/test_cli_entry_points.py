"""Editor and CI entry points: ``--stdin-filename`` (through a real
subprocess with the source on stdin), ``--add-noqa``, ``--show-files``, ``--show-settings``,
``python -m lint_gpu_tests``, ``-V`` and ``rule GPU900``/``GPU999``. Real rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest
from click.testing import CliRunner, Result

from lint_gpu_tests import __version__
from lint_gpu_tests.interfaces import cli

REPO = Path(__file__).resolve().parents[1]
ENGINE = ('import gc\n\nfrom vllm import LLM\n\n\ndef test_x():\n    llm = LLM("m")\n'
          '    llm.generate("hi")\n    gc.collect()\n')
FIXED = ('import weakref\n\n\ndef test_x(vllm_runner):\n    with vllm_runner("m") as runner:\n'
         '        llm = weakref.proxy(runner.llm)\n        llm.generate("hi")\n')
GPU001 = "7:11: GPU001 [*] Engine `LLM(...)` built outside `with vllm_runner(...)`"
GPU004 = "9:5: GPU004 [*] Manual cleanup `gc.collect()` in a function that owns an engine"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    (tmp_path / "tests").mkdir()
    return tmp_path


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli.cli, list(args), input=input, catch_exceptions=False)


def module_run(cwd: Path, *args: str, stdin: bytes = b"", stdout: IO[bytes] | None = None
               ) -> subprocess.CompletedProcess[bytes]:
    """``python -m lint_gpu_tests ARGS`` in a real process (this checkout first on the path);
    stdout and stderr captured, or stdout into ``stdout``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("GPU_TEST_LINT_CACHE_DIR", None)
    env.pop("PYTHONUNBUFFERED", None)  # as a user's shell has it: stdout buffered in a pipe
    return subprocess.run([sys.executable, "-m", "lint_gpu_tests", *args], cwd=cwd, env=env,
                          input=stdin, stdout=stdout or subprocess.PIPE,
                          stderr=subprocess.PIPE, check=False, timeout=120)


# --------------------------------------------------------------------------- --stdin-filename


def test_stdin_check_prints_reports_for_the_named_path(project: Path) -> None:
    proc = module_run(project, "check", "--no-cache", "--stdin-filename", "tests/test_x.py",
                      stdin=ENGINE.encode())
    assert (proc.returncode, proc.stderr) == (1, b"")
    assert proc.stdout.decode().splitlines() == [
        f"tests/test_x.py:{GPU001}", f"tests/test_x.py:{GPU004}", "Found 2 violations.",
        "[*] 2 fixable with the `--fix` option."]
    assert not (project / "tests" / "test_x.py").exists()  # nothing written


def test_stdin_fix_prints_the_fixed_source(project: Path) -> None:
    proc = module_run(project, "--fix", "--stdin-filename", "tests/test_x.py",
                      stdin=ENGINE.replace("\n", "\r\n").encode())
    assert proc.returncode == 0
    assert proc.stdout == FIXED.replace("\n", "\r\n").encode()
    assert proc.stderr == b"Found 2 violations (2 fixed, 0 remaining).\n"
    assert not (project / "tests" / "test_x.py").exists()


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_stdin_json_and_sarif_carry_the_same_edits_as_the_file(project: Path, fmt: str) -> None:
    """JSON/SARIF of a buffer on stdin hold the fix edits the same file on disk gets (found by
    a first-time user: every stdin fix had ``edits: []``)."""
    (project / "tests" / "test_x.py").write_text(ENGINE)
    on_disk = run("check", "--no-cache", "--output-format", fmt, "tests/test_x.py").output
    proc = module_run(project, "check", "--no-cache", "--output-format", fmt,
                      "--stdin-filename", "tests/test_x.py", stdin=ENGINE.encode())
    assert proc.returncode == 1
    assert proc.stdout.decode() == on_disk
    assert on_disk.count('"content"' if fmt == "json" else '"insertedContent"') >= 1


def test_stdin_fix_without_changes_echoes_the_source(project: Path) -> None:
    clean = b"def test_ok():\n    assert True\n"
    proc = module_run(project, "--fix", "--stdin-filename", "tests/test_ok.py", stdin=clean)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, clean, b"All checks passed!\n")


def test_stdin_diff(project: Path) -> None:
    proc = module_run(project, "--diff", "--stdin-filename", "tests/test_x.py",
                      stdin=ENGINE.encode())
    assert proc.returncode == 1
    assert proc.stdout.decode().splitlines()[:3] == [
        "--- tests/test_x.py", "+++ tests/test_x.py", "@@ -1,9 +1,7 @@"]


def test_a_dash_path_reads_standard_input(project: Path) -> None:
    """``check -`` (ruff's convention) checks the source on stdin, reported as ``-``; with
    ``--stdin-filename`` the name is that one."""
    proc = module_run(project, "check", "--no-cache", "-", stdin=ENGINE.encode())
    assert (proc.returncode, proc.stderr) == (1, b"")
    assert proc.stdout.decode().splitlines()[:2] == [f"-:{GPU001}", f"-:{GPU004}"]
    named = module_run(project, "check", "--no-cache", "--stdin-filename", "tests/test_x.py",
                       "-", stdin=ENGINE.encode())
    assert (named.returncode, named.stderr) == (1, b"")
    assert named.stdout.decode().splitlines()[0] == f"tests/test_x.py:{GPU001}"
    fixed = module_run(project, "check", "--fix", "-", stdin=ENGINE.encode())
    assert (fixed.returncode, fixed.stdout) == (0, FIXED.encode())


NAMELESS = ('import gc\nimport multiprocessing\n\nfrom vllm import LLM\n\n\n'
            'def make_llm():\n    return LLM("m")\n\n\n'
            'def test_generate():\n    llm = make_llm()\n    llm.generate(["x"])\n    del llm\n'
            '    gc.collect()\n\n\n'
            'def test_worker():\n    engine = LLM("m")\n    engine.generate(["x"])\n'
            '    del engine\n\n\n'
            'def test_spawn():\n    p = multiprocessing.Process(target=test_worker)\n'
            '    p.start()\n    p.join()\n')
NAMELESS_FIXED = ('import contextlib\nimport multiprocessing\nimport weakref\n\n'
                  'from lint_gpu_tests.runtime import VllmRunner\n\n\n'
                  '@contextlib.contextmanager\ndef make_llm():\n'
                  '    with VllmRunner("m") as runner:\n'
                  '        yield weakref.proxy(runner.llm)\n\n\n'
                  'def test_generate():\n    with make_llm() as llm:\n'
                  '        llm.generate(["x"])\n\n\n'
                  'def test_worker(vllm_runner):\n    with vllm_runner("m") as runner:\n'
                  '        engine = weakref.proxy(runner.llm)\n        engine.generate(["x"])\n'
                  '\n\ndef test_spawn():\n    p = multiprocessing.Process(target=test_worker)\n'
                  '    p.start()\n    p.join()\n')
NAMELESS_REPORT = [
    "8:12: GPU001 [*] Engine `LLM(...)` built outside `with vllm_runner(...)`",
    "14:5: GPU004 [*] Manual cleanup `del llm` in a function that owns an engine",
    "15:5: GPU004 [*] Manual cleanup `gc.collect()` in a function that owns an engine",
    "19:14: GPU001 [*] Engine `LLM(...)` built outside `with vllm_runner(...)`",
    "21:5: GPU004 [*] Manual cleanup `del engine` in a function that owns an engine"]
HELPERS_ONLY = 'from vllm import LLM\n\nllm = LLM("m")\n\n\ndef setup_engine():\n' \
    '    return LLM("m")\n'


def test_a_nameless_stdin_is_checked_as_a_test_module(project: Path) -> None:
    """``check -`` without ``--stdin-filename`` reports what the same source in a test module
    gets (codes, positions, fixes): a test that is also a process's target is still collected
    by pytest, a public factory helper is fixed with its callers, and a module that defines
    no test is still checked."""
    (project / "test_x.py").write_text(NAMELESS)
    on_disk = run("check", "--no-cache", "--unsafe-fixes", "test_x.py")
    on_stdin = run("check", "--no-cache", "--unsafe-fixes", "-", input=NAMELESS)
    assert on_disk.output.splitlines()[:-2] == [f"test_x.py:{line}" for line in NAMELESS_REPORT]
    assert on_stdin.output.splitlines() == [f"-:{line}" for line in NAMELESS_REPORT] + [
        "Found 5 violations.", "[*] 5 fixable with the `--fix` option."]
    assert on_stdin.exit_code == on_disk.exit_code == 1
    fixed = run("check", "--no-cache", "--fix", "--unsafe-fixes", "-", input=NAMELESS)
    assert (fixed.exit_code, fixed.stdout) == (0, NAMELESS_FIXED)
    assert fixed.stderr == "Found 5 violations (5 fixed, 0 remaining).\n"
    diff = run("check", "--no-cache", "--diff", "--unsafe-fixes", "-", input=NAMELESS)
    on_disk_diff = run("check", "--no-cache", "--diff", "--unsafe-fixes", "test_x.py")
    assert diff.exit_code == on_disk_diff.exit_code == 1
    assert diff.stdout == on_disk_diff.stdout.replace("test_x.py", "-")
    assert diff.stdout.splitlines()[:3] == ["--- -", "+++ -", "@@ -1,24 +1,25 @@"]
    helpers = run("check", "--no-cache", "-", input=HELPERS_ONLY)
    assert (helpers.exit_code, helpers.output.splitlines()) == (1, [
        "-:3:7: GPU001 Engine `LLM(...)` built outside `with vllm_runner(...)`",
        "-:7:12: GPU001 Engine `LLM(...)` built outside `with vllm_runner(...)`",
        "Found 2 violations."])


def test_a_nameless_stdin_gets_the_conftests_of_the_current_directory(project: Path) -> None:
    """``check -`` is a module of the current directory: the engine fixtures of the
    conftests pytest would load for a test module there count, as for the file."""
    (project / "conftest.py").write_text('import pytest\nfrom vllm import LLM\n\n\n'
                                         '@pytest.fixture\ndef llm():\n'
                                         '    engine = LLM("m")\n    yield engine\n')
    source = 'import gc\n\n\ndef test_a(llm):\n    llm.generate(["x"])\n    gc.collect()\n'
    (project / "test_x.py").write_text(source)
    report = "6:5: GPU004 Manual cleanup `gc.collect()` in a function that owns an engine"
    assert run("check", "--no-cache", "-q", "test_x.py").output == f"test_x.py:{report}\n"
    assert run("check", "--no-cache", "-q", "-", input=source).output == f"-:{report}\n"


def test_no_python_file_found_warns_and_passes(project: Path) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "notes.txt").write_text("no python here\n")
    proc = module_run(project, "check", "--no-cache", "docs")
    assert proc.returncode == 0
    assert proc.stderr.decode() == "warning: No Python files found under docs\n"


def test_stdin_uses_the_config_of_the_named_path(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / ".gpu-test-lint.toml").write_text('ignore = ["GPU004"]\n')
    proc = module_run(project, "--no-cache", "--stdin-filename", "sub/tests/test_x.py",
                      stdin=ENGINE.encode())
    assert proc.returncode == 1
    assert proc.stdout.decode().splitlines()[0] == f"sub/tests/test_x.py:{GPU001}"
    assert "GPU004" not in proc.stdout.decode()


def test_stdin_force_exclude_leaves_an_excluded_path_alone(project: Path) -> None:
    (project / ".gpu-test-lint.toml").write_text('extend-exclude = ["tests/generated/"]\n')
    proc = module_run(project, "--fix", "--force-exclude", "--stdin-filename",
                      "tests/generated/test_x.py", stdin=ENGINE.encode())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, ENGINE.encode(), b"")


# --------------------------------------------------------------------------- --add-noqa


def test_add_noqa_suppresses_every_violation(project: Path) -> None:
    source = ('import gc\n\nfrom vllm import LLM\n\n\ndef test_x():\n    llm = LLM("""\nm\n""")'
              '  # the model\n    llm.generate("hi")\n    gc.collect()  # noqa: GPU006\n')
    path = project / "tests" / "test_x.py"
    path.write_bytes(source.replace("\n", "\r\n").encode())
    result = run("check", "--no-cache", "--add-noqa", "tests")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "",
                                                                "Added 2 noqa directives.\n")
    assert path.read_bytes() == source.replace(
        '  # the model', '  # the model  # noqa: GPU001').replace(
        "# noqa: GPU006", "# noqa: GPU004, GPU006").replace("\n", "\r\n").encode()
    again = run("check", "--no-cache", "tests")
    assert (again.exit_code, again.stdout) == (0, "All checks passed!\n")
    assert run("check", "--no-cache", "--add-noqa", "tests").stderr == \
        "Added 0 noqa directives.\n"


def test_add_noqa_refuses_fix(project: Path) -> None:
    result = run("check", "--add-noqa", "--fix", "tests")
    assert (result.exit_code, result.stderr) == (
        2, "error: --add-noqa cannot be combined with --fix, --diff or --stdin-filename\n")


# --------------------------------------------------------------------------- --show-*


def test_show_files_lists_what_is_checked_and_what_the_rules_skip(project: Path) -> None:
    (project / "tests" / "test_x.py").write_text(ENGINE)
    (project / "tests" / "helpers.py").write_text("def build():\n    return 1\n")
    (project / "tests" / "engine_helpers.py").write_text(
        "from vllm import LLM\n\ndef build():\n    return LLM('m')\n")
    (project / "tests" / "test_bad.py").write_text("from vllm import LLM\n\ndef f(:\n")
    (project / "tests" / "test_bad_plain.py").write_text("def f(:\n")
    (project / "build").mkdir()
    (project / "build" / "test_y.py").write_text(ENGINE)
    result = run("check", "--show-files", ".")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "tests/engine_helpers.py (not a test module: no rule applies)",
        "tests/helpers.py (not analysed: names nothing the rules look for)",
        "tests/test_bad.py (does not parse: GPU900)",
        "tests/test_bad_plain.py (not analysed: names nothing the rules look for)",
        "tests/test_x.py",
    ]
    # What a check run reports agrees: GPU900 for the analysed file only.
    check = run("check", "--no-cache", "--select", "GPU900", ".")
    assert [line.split(":")[0] for line in check.stdout.splitlines() if "GPU900" in line] \
        == ["tests/test_bad.py"]


def test_show_settings_per_config_file(project: Path) -> None:
    (project / "tests" / "test_x.py").write_text(ENGINE)
    (project / "sub").mkdir()
    (project / "sub" / "test_y.py").write_text(ENGINE)
    (project / "sub" / "test_z.py").write_text(ENGINE)
    (project / "sub" / "pyproject.toml").write_text(
        '[tool.gpu-test-lint]\nignore = ["GPU004"]\ntarget = "vllm"\n')
    result = run("check", "--show-settings", "--select", "GPU00", ".")
    assert result.exit_code == 0
    table = ["line-length = 88  # from the default",
             'select = ["GPU00"]', "ignore = {ignore}", "extend-select = []",
             "per-file-ignores = {{}}", "exclude = []", "extend-exclude = []",
             'engine-classes = ["vllm.LLM"]', 'runner-classes = ["VllmRunner"]',
             'isolation-decorators = ["create_new_process_for_each_test", '
             '"fork_new_process_for_each_test", "spawn_new_process_for_each_test", "forked"]',
             'process-launchers = ["multiprocessing.Process", "multiprocessing.Pool", '
             '"multiprocessing.get_context", "multiprocessing.pool.Pool", '
             '"torch.multiprocessing.Process", "torch.multiprocessing.Pool", '
             '"torch.multiprocessing.get_context", "torch.multiprocessing.spawn", '
             '"torch.multiprocessing.start_processes", "concurrent.futures.ProcessPoolExecutor", '
             '"concurrent.futures.process.ProcessPoolExecutor"]',
             "cleanup-functions = []", "test-roots = []",
             'environment-variables = ["VLLM_*", "CUDA_*", "HF_*", "TRANSFORMERS_*", '
             '"TOKENIZERS_*", "TORCH_*", "PYTORCH_*", "NCCL_*", "OMP_*", "HIP_VISIBLE_DEVICES", '
             '"ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "ONEAPI_DEVICE_SELECTOR", "TPU_*", '
             '"NEURON_RT_VISIBLE_CORES", "HABANA_VISIBLE_*", "HCCL_*", '
             '"ASCEND_RT_VISIBLE_DEVICES"]',
             "extend-environment-variables = []",
             'target = "{target}"', 'fix-strategy = "runner"', 'runner-fixture = "vllm_runner"',
             'runner-attribute = "llm"',
             "engine-memory-share = 0.92", 'baseline = ""']
    assert result.stdout.splitlines() == [
        "Resolved settings for: sub/test_y.py (and 1 more)",
        f"Settings path: {project}/sub/pyproject.toml",
        f"Root: {project}/sub",
        "[tool.gpu-test-lint]",
        *(line.format(ignore='["GPU004"]', target="vllm") for line in table),
        "",
        "Resolved settings for: tests/test_x.py",
        "Settings path: (none: defaults)",
        f"Root: {project}",
        "[tool.gpu-test-lint]",
        *(line.format(ignore="[]", target="bundled") for line in table),
    ]


# --------------------------------------------------------------------------- -m, -V, rule


def test_python_dash_m_and_version(project: Path) -> None:
    proc = module_run(project, "-V")
    assert (proc.returncode, proc.stdout) == (0, f"gpu-test-lint, version {__version__}\n".encode())
    assert run("--version").stdout == run("-V").stdout == \
        f"gpu-test-lint, version {__version__}\n"
    (project / "tests" / "test_x.py").write_text(ENGINE)
    proc = module_run(project, "--no-cache", "tests")
    assert proc.returncode == 1
    assert proc.stdout.decode().splitlines()[0] == f"tests/test_x.py:{GPU001}"


@pytest.mark.parametrize(("code", "first"), [("GPU900", "# syntax-error (GPU900)"),
                                             ("gpu999", "# internal-error (GPU999)")])
def test_rule_explains_the_codes_that_are_not_rules(code: str, first: str) -> None:
    result = run("rule", code)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == first
    assert result.stdout.count("\n") == 3


def test_rule_unknown_code_still_refused() -> None:
    result = run("rule", "GPU998")
    assert (result.exit_code, result.stderr) == (
        2, "error: unknown rule code `GPU998` (see `gpu-test-lint rules`)\n")


# --------------------------------------------------------------------------- the fast exit


def test_the_console_script_is_run() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"gpu-test-lint": "lint_gpu_tests.interfaces.entry:run"}


class _Exited(Exception):
    pass


def _run_with(monkeypatch: pytest.MonkeyPatch, raised: BaseException) -> int:
    """``cli.run()`` with ``main`` raising ``raised``; the status ``os._exit`` was given."""
    def main() -> None:
        raise raised

    def exit_(code: int) -> None:
        raise _Exited(code)

    monkeypatch.setattr(cli, "main", main)
    monkeypatch.setattr(os, "_exit", exit_)
    with pytest.raises(_Exited) as exited:
        cli.run()
    status: int = exited.value.args[0]
    return status


@pytest.mark.parametrize(("raised", "status", "stderr"), [
    (SystemExit(None), 0, ""), (SystemExit(2), 2, ""), (SystemExit("bad"), 1, "bad\n"),
    # --version, --help and rules write through click, outside the check command's own
    # error handling (found by a first-time user: a traceback and status 1).
    (BrokenPipeError(32, "Broken pipe"), 1, ""),
    (OSError(28, "No space left on device"),
     2, "error: cannot write the output: [Errno 28] No space left on device\n")])
def test_run_exits_with_the_status_the_interpreter_or_check_would(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        raised: BaseException, status: int, stderr: str) -> None:
    assert (_run_with(monkeypatch, raised), capsys.readouterr().err) == (status, stderr)


def test_run_exits_1_when_the_reader_went_away(monkeypatch: pytest.MonkeyPatch) -> None:
    class Closed:
        def flush(self) -> None:
            raise BrokenPipeError

    monkeypatch.setattr(sys, "stdout", Closed())
    assert _run_with(monkeypatch, SystemExit(0)) == 1


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["-V"], ["--help"], ["rules"], ["rule", "GPU001"]])
def test_output_into_a_full_disk_is_one_error_line(project: Path, args: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        proc = module_run(project, *args, stdout=full)
    assert (proc.returncode, proc.stderr) == (
        2, b"error: cannot write the output: [Errno 28] No space left on device\n")

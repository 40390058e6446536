"""The library surface: parallel runs, per-file errors, fix writes (the prefilter is in
test_prefilter.py)."""

from __future__ import annotations

import os
from pathlib import Path

import fake_rules
import pytest

from lint_gpu_tests import api
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source

SAMPLE = 'from vllm import LLM\n\ndef test_x():\n    llm = LLM("m")\n    llm.generate("hi")\n'


def _tree(root: Path, count: int) -> None:
    (root / "tests").mkdir()
    for index in range(count):
        body = SAMPLE if index % 3 == 0 else "def test_ok():\n    pass\n"
        (root / "tests" / f"test_{index:03d}.py").write_text(body)
    (root / "tests" / "test_broken.py").write_text("def f(:\n    LLM()\n")


def test_parallel_run_equals_serial_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, 40)
    config = Config(root=str(tmp_path))
    serial = api.check_paths(["tests"], config, jobs=1, cache=False)
    parallel = api.check_paths(["tests"], config, jobs=2, cache=False, parallel_threshold=4)
    assert serial.violations == parallel.violations
    assert [r.path for r in serial.files] == [r.path for r in parallel.files]
    assert [(v.code, v.path) for v in serial.violations][:2] == [
        ("GPU001", "tests/test_000.py"), ("GPU001", "tests/test_003.py")]
    assert len([v for v in serial.violations if v.code == "GPU001"]) == 14
    assert serial.violations[-1].code == "GPU900"


def test_internal_error_in_worker_is_per_file(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, 10)
    fake_rules.install(monkeypatch)

    class Boom(fake_rules.FakeSafe):
        def check(self, module):  # type: ignore[no-untyped-def, override]
            if module.path.endswith("test_003.py"):
                raise RuntimeError("bad")
            yield from super().check(module)

    import lint_gpu_tests.rules as rules

    monkeypatch.setattr(rules, "ALL_RULES", [Boom])
    result = api.check_paths(["tests"], Config(root=str(tmp_path)), jobs=2, cache=False,
                             parallel_threshold=2)
    assert result.errors == [("tests/test_003.py", "GPU091 (fake-safe): RuntimeError: bad")]
    assert result.has_fatal_problem
    assert {v.path for v in result.violations} == {
        "tests/test_000.py", "tests/test_006.py", "tests/test_009.py", "tests/test_broken.py"}


def test_unreadable_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("test_a.py").write_text(SAMPLE)
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "test_a.py":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    result = api.check_paths(["test_a.py"], Config(root=str(tmp_path)), cache=False)
    assert result.errors == [("test_a.py", "cannot read file: Permission denied")]


@pytest.mark.parametrize("prefix, newline", [(b"", b"\n"), (b"\xef\xbb\xbf", b"\r\n")])
def test_fix_writes_exactly_what_fix_source_returns(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    prefix: bytes, newline: bytes) -> None:
    monkeypatch.chdir(tmp_path)
    source = prefix + SAMPLE.encode().replace(b"\n", newline)
    target = tmp_path / "test_a.py"
    target.write_bytes(source)
    os.chmod(target, 0o600)
    expected = fix_source(source, "test_a.py", Config(root=str(tmp_path)))
    if expected.new_source is None:
        pytest.skip("no fix for the sample yet")
    result = api.check_paths(["test_a.py"], Config(root=str(tmp_path)), fix=True)
    assert target.read_bytes() == expected.new_source
    assert target.read_bytes().startswith(prefix)
    assert target.stat().st_mode & 0o777 == 0o600
    assert [v.code for v in result.fixed] == [v.code for v in expected.fixed]
    assert result.violations == expected.remaining
    again = api.check_paths(["test_a.py"], Config(root=str(tmp_path)), fix=True)
    assert again.fixed == []
    assert target.read_bytes() == expected.new_source


def test_diff_mode_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("test_a.py").write_text(SAMPLE)
    result = api.check_paths(["test_a.py"], Config(root=str(tmp_path)), diff=True)
    assert Path("test_a.py").read_text() == SAMPLE
    if result.diffs:
        diff = result.diffs["test_a.py"]
        assert diff.startswith("--- test_a.py\n+++ test_a.py\n@@ ")
        assert '-    llm = LLM("m")\n' in diff


def test_check_file() -> None:
    result = api.check_file(str(Path(__file__).parent / "fake_rules.py"), Config())
    assert result.error is None


# --------------------------------------------------------------------------- typing
# The package ships py.typed; every module is `mypy --strict` clean and user
# code calling the API type-checks against them.

PACKAGE = Path(__file__).resolve().parents[1] / "lint_gpu_tests"
UNTYPED: set[str] = set()
TYPED = sorted(name for path in PACKAGE.rglob("*.py")
               if (name := path.relative_to(PACKAGE).as_posix()) not in UNTYPED)


def _mypy(tmp_path: Path, *args: str) -> tuple[int, list[str]]:
    api = pytest.importorskip("mypy.api")
    out, err, status = api.run(["--strict", "--follow-imports=silent", "--no-error-summary",
                                "--cache-dir", str(tmp_path / "cache"), *args])
    return status, (out + err).splitlines()


def test_package_is_mypy_strict_clean(tmp_path: Path) -> None:
    assert (PACKAGE / "py.typed").is_file()
    assert {"api.py", "fixplan/planner.py", "codemods/_wrap.py", "rules/_common.py"} <= set(TYPED)
    status, lines = _mypy(tmp_path, *(str(PACKAGE / name) for name in TYPED))
    assert (status, lines) == (0, [])


def test_user_code_type_checks_against_the_api(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "use_api.py"
    user.write_text(
        "from lint_gpu_tests.api import ConfigResolver, RunResult, check_paths\n\n\n"
        "def count(paths: list[str]) -> int:\n"
        "    result: RunResult = check_paths(paths, ConfigResolver())\n"
        "    return len(result.violations)\n\n\n"
        'wrong: str = check_paths(["tests"], ConfigResolver())\n')
    monkeypatch.setenv("MYPYPATH", str(PACKAGE.parent))
    status, lines = _mypy(tmp_path, str(user))
    assert status == 1
    assert lines == [f'{user}:9: error: Incompatible types in assignment (expression has type '
                     '"RunResult", variable has type "str")  [assignment]']


def test_run_options_and_their_keyword_form_run_alike(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("test_a.py").write_text(SAMPLE)
    config = Config(root=str(tmp_path))
    options = api.RunOptions(diff=True, unsafe_fixes=True, cache=False, jobs=1)
    by_value = api.check_paths(["test_a.py"], config, options)
    by_keyword = api.check_paths(["test_a.py"], config, diff=True, unsafe_fixes=True,
                                 cache=False, jobs=1)
    assert (by_value.diffs, by_value.fixed) == (by_keyword.diffs, by_keyword.fixed)
    # A keyword changes that field of the options given.
    assert api.check_paths(["test_a.py"], config, options, diff=False).diffs == {}
    assert Path("test_a.py").read_text() == SAMPLE
    with pytest.raises(TypeError):
        api.check_paths(["test_a.py"], config, no_such_option=True)


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def start(self, total: int) -> None:
        self.calls.append(("start", total))

    def advance(self, count: int) -> None:
        self.calls.append(("advance", count))


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_hears_every_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        jobs: int) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPU_TEST_LINT_CACHE_DIR", raising=False)
    _tree(tmp_path, 9)  # 10 files: some analysed, some settled by the prefilter
    config = Config(root=str(tmp_path))
    for _ in range(2):  # the second run is answered by the cache
        recorder = _Recorder()
        api.check_paths(["tests"], config, api.RunOptions(jobs=jobs, parallel_threshold=2),
                        progress=recorder)
        assert recorder.calls[0] == ("start", 10)
        assert recorder.calls[1:] == [("advance", 1)] * 10


def test_every_name_the_api_exported_before_the_split_is_there() -> None:
    before = ["Config", "ConfigError", "ConfigResolver", "FileResult", "InternalError",
              "PathNotFoundError", "Problem", "RunResult", "Violation", "add_noqa_to_files",
              "check_file", "check_paths", "check_source", "check_stdin", "discover_files",
              "fix_edits", "stdin_edits", "fix_source", "may_hold_violation", "resolve_config"]
    assert set(before) <= set(api.__all__)
    assert all(callable(getattr(api, name)) for name in before)

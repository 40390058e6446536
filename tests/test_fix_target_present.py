"""A fix that imports or requests something checks that it is there: with
``target = "vllm"`` the isolate strategy imports the decorator from ``tests.utils`` (the
project's ``tests/utils.py``) and the runner fix requests vLLM's ``vllm_runner`` fixture (a
conftest.py pytest loads for the module). Where either is missing there is no fix, and the
reason names it (before: the import failed at collection, and a module-scoped fixture got
the bundled function-scoped fixture, a scope error). Also: the cleanup the isolate strategy
keeps is reported as kept, not as removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.config import config_from_table

TEST = ('import gc\n\nimport pytest\nfrom vllm import LLM\n\n\n'
        '@pytest.fixture(scope="module")\ndef llm():\n    engine = LLM("m")\n    yield engine\n\n\n'
        'def test_a():\n    first = LLM("m")\n    assert first.generate(["x"])\n    del first\n'
        '    gc.collect()\n    second = LLM("m")\n    assert second.generate(["x"])\n')
NO_FIXTURE = ('`target = "vllm"` requests vLLM\'s `vllm_runner` fixture, and no conftest.py '
              "pytest loads for this module defines it")
NO_UTILS = ('`target = "vllm"` imports the decorator from `tests.utils`, and the project has '
            "no `tests/utils.py`")
KEPT = ('Keep it (the test runs in a new process, `@create_new_process_for_each_test("spawn")`, '
        "where manual cleanup is not reported)")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(TEST)
    return tmp_path


def fixes(project: Path, strategy: str) -> list[tuple[int, str, str, str]]:
    """``(row, code, applicability, title or reason)`` of every violation in the project."""
    config = config_from_table({"target": "vllm", "fix-strategy": strategy}, "",
                               root=str(project))
    result = check_paths([str(project / "tests")], config, cache=False, jobs=1)
    out = []
    for file in result.files:
        for v in file.violations:
            assert v.fix is not None
            out.append((v.location.row, v.code, v.fix.applicability.value,
                        v.fix.reason if v.fix.applicability.value == "none" else v.fix.title))
    return sorted(out)


def test_without_the_runner_fixture_and_tests_utils_there_is_no_fix(project: Path) -> None:
    assert fixes(project, "runner") == [
        (9, "GPU001", "none", NO_FIXTURE), (10, "GPU002", "none", NO_FIXTURE),
        (14, "GPU001", "none", NO_FIXTURE), (16, "GPU004", "none", NO_FIXTURE),
        (17, "GPU004", "none", NO_FIXTURE), (18, "GPU001", "none", NO_FIXTURE)]
    isolated = fixes(project, "isolate")
    assert isolated[2] == (14, "GPU001", "none", f"{NO_FIXTURE}; not isolated either: {NO_UTILS}")


def test_with_both_there_the_fixes_come_back(project: Path) -> None:
    (project / "tests" / "utils.py").write_text("")
    (project / "tests" / "conftest.py").write_text(
        'import pytest\n\n\n@pytest.fixture(scope="session")\ndef vllm_runner():\n'
        "    return object\n")
    assert [f[:3] for f in fixes(project, "runner")] == [
        (9, "GPU001", "unsafe"), (10, "GPU002", "unsafe"), (14, "GPU001", "safe"),
        (16, "GPU004", "safe"), (17, "GPU004", "safe"), (18, "GPU001", "safe")]
    isolated = fixes(project, "isolate")
    assert isolated[2:] == [
        (14, "GPU001", "safe", 'Run the test in a new process: '
                               '`@create_new_process_for_each_test("spawn")`'),
        (16, "GPU004", "safe", KEPT), (17, "GPU004", "safe", KEPT),
        (18, "GPU001", "safe", 'Run the test in a new process: '
                               '`@create_new_process_for_each_test("spawn")`')]


def test_a_module_checked_as_text_keeps_its_fix() -> None:
    from lint_gpu_tests.checking.checker import check_source

    config = config_from_table({"target": "vllm"}, "", root=".")
    found = [(v.location.row, v.fix.applicability.value) for v in check_source(
        TEST.encode(), "tests/not_on_disk/test_x.py", config) if v.code == "GPU001"
        and v.fix is not None]
    assert found == [(9, "unsafe"), (14, "safe"), (18, "safe")]

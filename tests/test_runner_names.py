"""Messages and fix titles name the runner the configuration's fixes use: the runner fixture
(``runner-fixture``, ``target = "vllm"``), a project fixture (``runner = "conftest:NAME"``)
or a project class (``runner = "pkg.module:name"``); the default configuration's wording is
``vllm_runner``'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.config import config_from_table

TEST = ('import gc\n\nimport pytest\nfrom vllm import LLM\n\n\n'
        '@pytest.fixture\ndef llm(request):\n    engine = LLM("m")\n'
        '    request.addfinalizer(engine.shutdown)\n    return engine\n\n\n'
        'def _make():\n    return LLM("m")\n\n\n'
        'def test_one():\n    llm = LLM("m")\n    try:\n        assert llm.generate(["a"])\n'
        '    finally:\n        llm.shutdown()\n\n\n'
        'def test_two():\n    eng = _make()\n    assert eng.generate(["x"])\n    del eng\n'
        '    gc.collect()\n')
RUNNER_CLASS = ('class ProjRunner:\n    def __init__(self, model, **kwargs):\n'
                '        self.llm = None\n\n    def __enter__(self):\n        return self\n\n'
                '    def __exit__(self, *exc_info):\n        pass\n')
RUNNER_FIXTURE = ('import pytest\n\n\n@pytest.fixture\ndef proj_runner():\n'
                  '    return None\n')
VLLM_CONFTEST = ('import pytest\n\n\nclass VllmRunner:\n    pass\n\n\n@pytest.fixture\n'
                 'def my_runner():\n    return VllmRunner\n')
FACTORY = "Make `_make()` a `contextlib.contextmanager` over `{}` and call it in `with` " \
    "statements"


def names(project: Path, table: dict[str, object]) -> list[tuple[int, str, str, str]]:
    """``(row, code, message, fix title)`` of every violation in tests/test_x.py."""
    config = config_from_table(table, "", root=str(project))
    result = check_paths([str(project / "tests")], config, cache=False, jobs=1)
    return sorted((v.location.row, v.code, v.message, v.fix.title if v.fix else "")
                  for v in result.violations)


def expected(runner: str, factory: str) -> list[tuple[int, str, str, str]]:
    built = f"Engine `LLM(...)` built outside `with {runner}(...)`"
    finalizer = "Remove the finalizer (part of the GPU001 rewrite)"
    return [
        (9, "GPU001", built, f"Wrap in `with {runner}(...)`"),
        (10, "GPU003", f"Engine shut down by `request.addfinalizer(...)`; let `with {runner}(...)` "
         "tear it down", finalizer),
        (11, "GPU002", "Fixture `llm` hands out the engine itself; yield `weakref.proxy(...)` "
         "of it", f"Yield a weak proxy of the engine of `with {runner}(...)`"),
        (15, "GPU001", built, FACTORY.format(factory)),
        (19, "GPU001", built, f"Wrap in `with {runner}(...)`"),
        (20, "GPU003", f"Engine shut down by `try/finally`; let `with {runner}(...)` tear it "
         "down", finalizer),
        (29, "GPU004", "Manual cleanup `del eng` in a function that owns an engine",
         "Remove the manual cleanup"),
        (30, "GPU004", "Manual cleanup `gc.collect()` in a function that owns an engine",
         "Remove the manual cleanup"),
    ]


@pytest.mark.parametrize(("table", "files", "runner", "factory"), [
    ({}, {}, "vllm_runner", "VllmRunner"),
    ({"target": "vllm", "runner-fixture": "my_runner"}, {"conftest.py": VLLM_CONFTEST},
     "my_runner", "my_runner"),
    ({"runner": "conftest:proj_runner"}, {"conftest.py": RUNNER_FIXTURE}, "proj_runner",
     "proj_runner"),
    ({"runner": "tests.runners:ProjRunner"}, {"runners.py": RUNNER_CLASS}, "ProjRunner",
     "ProjRunner"),
], ids=["default", "target-vllm", "conftest-runner", "module-runner"])
def test_messages_and_titles_name_the_configured_runner(
        tmp_path: Path, table: dict[str, object], files: dict[str, str], runner: str,
        factory: str) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(TEST)
    for name, text in files.items():
        (tmp_path / "tests" / name).write_text(text)
    assert names(tmp_path, table) == expected(runner, factory)


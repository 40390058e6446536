"""Uses of an engine that a `weakref.proxy` cannot stand in for, and cleanup that does more
than the runner's teardown (found by a first-time user; each was a safe fix that broke or
changed the test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config
from lint_gpu_tests.interfaces import cli

HEAD = "import gc\nimport weakref\n\nfrom vllm import LLM\n\n\n"


def gpu001(body: str) -> tuple[str, str]:
    """(applicability, reason) of the one GPU001 in a test module made of ``body``."""
    (found,) = [v for v in check_source((HEAD + body).encode(), "tests/test_x.py", Config())
                if v.code == "GPU001"]
    assert found.fix is not None
    return found.fix.applicability.value, found.fix.reason


def test_a_weak_reference_watching_the_engine_makes_the_fix_unsafe() -> None:
    assert gpu001("def test_freed():\n    llm = LLM('m')\n    ref = weakref.ref(llm)\n"
                  "    assert llm.generate(['hi'])\n    del llm\n    gc.collect()\n"
                  "    assert ref() is None\n") == (
        "unsafe", "`weakref.ref()` of the engine observes when it is freed, which the runner "
                  "moves to the end of its block")


@pytest.mark.parametrize(("body", "reason"), [
    ("def test_key():\n    llm = LLM('m')\n    d = {llm: 1}\n    assert d\n",
     "the engine is a dict key or set member, and the `weakref.proxy` the fix binds is "
     "unhashable"),
    ("def test_set():\n    llm = LLM('m')\n    seen = set()\n    seen.add(llm)\n"
     "    assert seen\n",
     "`add()` hashes the engine, and the `weakref.proxy` the fix binds is unhashable"),
], ids=["dict-key", "set-add"])
def test_an_engine_that_is_hashed_has_no_fix(body: str, reason: str) -> None:
    applicability, found = gpu001(body)
    assert applicability == "none"
    assert found.startswith(reason)


def test_cleanup_with_arguments_the_runner_does_not_pass_makes_the_fix_unsafe() -> None:
    body = ("from vllm.distributed import cleanup_dist_env_and_memory\n\n\n"
            "def test_ray():\n    llm = LLM('m')\n    assert llm.generate(['hi'])\n"
            "    del llm\n    cleanup_dist_env_and_memory(shutdown_ray=True)\n")
    assert gpu001(body) == (
        "unsafe", "`cleanup_dist_env_and_memory(shutdown_ray=True)` does more than the "
                  "runner's teardown, which calls `cleanup_dist_env_and_memory()` without "
                  "arguments")


@pytest.mark.parametrize(("handler", "expected"), [
    ("                if 'no device' not in str(e):\n                    raise\n",
     ("unsafe", "`cleanup_dist_env_and_memory()` fails into the `except` of line 18, which "
                "may raise; the runner's teardown reports a failing step as a warning, so "
                "what that handler raises no longer fails the test")),
    ("                pass\n", ("safe", "")),
    ("                print('cleanup failed', e)\n", ("safe", "")),
], ids=["re-raising", "passing", "printing"])
def test_cleanup_whose_failure_a_handler_judges_makes_the_fix_unsafe(
        handler: str, expected: tuple[str, str]) -> None:
    """A cleanup in a ``try`` whose ``except`` re-raises what it does not expect: the runner
    only warns when its cleanup fails, so those errors no longer fail the test; one whose
    handler swallows every failure (passes, or prints it) stays safe."""
    body = ("from vllm.distributed import cleanup_dist_env_and_memory\n\n\n"
            "def test_guarded():\n    llm = LLM('m')\n    try:\n"
            "        assert llm.generate(['hi'])\n    finally:\n        del llm\n"
            "        try:\n            cleanup_dist_env_and_memory()\n"
            "        except RuntimeError as e:\n" + handler)
    assert gpu001(body) == expected


def test_plain_use_and_plain_cleanup_stay_safe() -> None:
    body = ("from vllm.distributed import cleanup_dist_env_and_memory\n\n\n"
            "def test_plain():\n    llm = LLM('m')\n    assert llm.generate(['hi'])\n"
            "    del llm\n    cleanup_dist_env_and_memory()\n")
    assert gpu001(body) == ("safe", "")


OWN_RUNNER = ('import pytest\n\n\nclass VllmRunner:\n    def __init__(self, model_name, '
              'max_model_len=1024):\n        pass\n\n\n@pytest.fixture\ndef vllm_runner():\n'
              '    return VllmRunner\n')
TEST = ('from vllm import LLM\n\n\ndef test_a():\n    llm = LLM("m")\n'
        '    assert llm.generate(["hi"])\n')


def _gpu001_fixes(root: Path) -> list[tuple[str, str]]:
    result = CliRunner().invoke(cli.cli, ["check", "--output-format", "json", str(root)],
                                catch_exceptions=False)
    return [(v["fix"]["applicability"], v["fix"]["message"]) for v in json.loads(result.output)
            if v["code"] == "GPU001"]


def test_a_project_runner_fixture_makes_the_bundled_fix_unsafe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default target, a ``vllm_runner`` fixture of the project's own (a copy of
    vLLM's conftest) replaces the bundled one, so its defaults would apply silently (found by
    a first-time user); the cache follows the conftest."""
    monkeypatch.setenv("GPU_TEST_LINT_CACHE_DIR", str(tmp_path / "cache"))
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text(TEST)
    (tests / "conftest.py").write_text(OWN_RUNNER)
    reason = ("the project defines its own `vllm_runner` fixture (in a conftest.py), which "
              "replaces the bundled one whose defaults are `LLM`'s, and its defaults may differ "
              "(set `target = \"vllm\"` if it is vLLM's `VllmRunner`)")
    wrap = "Wrap in `with vllm_runner(...)`"
    assert _gpu001_fixes(tmp_path) == [("unsafe", wrap)]
    full = CliRunner().invoke(cli.cli, ["check", "--output-format", "full", str(tmp_path)],
                              catch_exceptions=False).output
    assert f"help: {wrap} (unsafe fix: {reason})" in full  # this run read the cache
    (tests / "conftest.py").unlink()
    assert _gpu001_fixes(tmp_path) == [("safe", wrap)]


def test_a_project_runner_taking_the_model_under_another_name(tmp_path: Path) -> None:
    """The project's own runner fixture hands out a class whose ``__init__`` takes the model
    first as ``model_name``: a call giving the model by keyword (or in a ``**mapping``)
    would make the runner's call raise ``TypeError``, so its unsafe fix enters the bundled
    ``VllmRunner`` (which takes ``LLM``'s arguments); one giving it positionally keeps the
    project's fixture."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(OWN_RUNNER)
    test = tests / "test_a.py"
    test.write_text(
        'from vllm import LLM\n\n\ndef test_keyword():\n    llm = LLM(model="m")\n'
        '    assert llm.generate(["hi"])\n\n\ndef test_mapping():\n'
        '    kwargs = dict(model="m")\n    llm = LLM(**kwargs)\n'
        '    assert llm.generate(["hi"])\n\n\ndef test_positional():\n'
        '    llm = LLM("m")\n    assert llm.generate(["hi"])\n')
    result = CliRunner().invoke(cli.cli, ["check", "--output-format", "json", str(tmp_path)],
                                catch_exceptions=False)
    bundled = ("the project's own `vllm_runner` fixture (in a conftest.py) hands out a runner "
               "whose `__init__` takes the model as `model_name`, and this call gives it by "
               "keyword (the runner's call would raise `TypeError`): the fix enters the bundled "
               "`VllmRunner` (`lint_gpu_tests.runtime`), whose teardown is not the project's "
               "runner's")
    own = ("the project defines its own `vllm_runner` fixture (in a conftest.py), which "
           "replaces the bundled one whose defaults are `LLM`'s, and its defaults may differ "
           "(set `target = \"vllm\"` if it is vLLM's `VllmRunner`)")
    assert [(v["location"]["row"], v["fix"]["applicability"], v["fix"]["message"],
             v["fix"]["reason"]) for v in json.loads(result.output) if v["code"] == "GPU001"] \
        == [(5, "unsafe", "Wrap in `with VllmRunner(...)`", bundled),
            (11, "unsafe", "Wrap in `with VllmRunner(...)`", bundled),
            (16, "unsafe", "Wrap in `with vllm_runner(...)`", own)]
    CliRunner().invoke(cli.cli, ["check", "--fix", "--unsafe-fixes", str(tmp_path)],
                       catch_exceptions=False)
    assert test.read_text() == (
        'import weakref\n\nfrom lint_gpu_tests.runtime import VllmRunner\n\n\n'
        'def test_keyword():\n    with VllmRunner(model="m") as runner:\n'
        '        llm = weakref.proxy(runner.llm)\n        assert llm.generate(["hi"])\n\n\n'
        'def test_mapping():\n    kwargs = dict(model="m")\n'
        '    with VllmRunner(**kwargs) as runner:\n        llm = weakref.proxy(runner.llm)\n'
        '        assert llm.generate(["hi"])\n\n\n'
        'def test_positional(vllm_runner):\n    with vllm_runner("m") as runner:\n'
        '        llm = weakref.proxy(runner.llm)\n        assert llm.generate(["hi"])\n')


INSTANCE_RUNNER = """\
import pytest

from tests.models import ModelCache

CACHE = ModelCache()


@pytest.fixture
def vllm_runner(request):
    marker = request.node.get_closest_marker("model")
    try:
        runner = CACHE.get_or_create(marker.kwargs)
    except Exception:
        raise
    yield runner
"""


@pytest.mark.parametrize(("target", "expected"), [
    ("bundled", ("unsafe", "Wrap in `with VllmRunner(...)`",
                 "the project's own `vllm_runner` fixture (in a conftest.py) hands out one "
                 "runner it builds, not a factory a test can call: the fix enters the bundled "
                 "`VllmRunner` (`lint_gpu_tests.runtime`), whose teardown is not the "
                 "project's runner's")),
    ("vllm", (None, None,
              "the project's own `vllm_runner` fixture (in a conftest.py) hands out one "
              "runner it builds, not vLLM's factory, so `target = \"vllm\"` cannot call it "
              "(name the project's runner class with `runner = \"module:Class\"`)")),
])
def test_a_project_runner_fixture_handing_out_one_runner_is_not_called(
        tmp_path: Path, target: str, expected: tuple[str | None, str | None, str]) -> None:
    """The project's own ``vllm_runner`` fixture yields one runner it builds (from a cache,
    by a marker), not a factory: a fix calling ``vllm_runner(...)`` would call that runner
    (vllm-ascend's e2e conftest). The bundled target enters the bundled class instead; the
    vLLM target, whose fixes call the fixture, has no fix."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tmp_path / "pyproject.toml").write_text(f'[tool.gpu-test-lint]\ntarget = "{target}"\n')
    (tests / "conftest.py").write_text(INSTANCE_RUNNER)
    (tests / "test_a.py").write_text(
        'from vllm import LLM\n\n\ndef test_keyword():\n    llm = LLM(model="m")\n'
        '    assert llm.generate(["hi"])\n')
    result = CliRunner().invoke(cli.cli, ["check", "--output-format", "json", str(tmp_path)],
                                catch_exceptions=False)
    assert [(v["fix"]["applicability"], v["fix"]["message"], v["fix"]["reason"]) if v["fix"]
            else (None, None, v["no_fix_reason"])
            for v in json.loads(result.output) if v["code"] == "GPU001"] == [expected]


@pytest.mark.parametrize(("body", "expected"), [
    ("import functools\n\n\n@functools.cache\ndef tok(engine):\n    return 1\n\n\n"
     "def test_t():\n    llm = LLM('m')\n    assert tok(engine=llm)\n",
     ("unsafe", "`tok()` receives the engine and caches its results by their arguments "
                "(`@functools.cache`): it hashes the engine, and the `weakref.proxy` the fix "
                "binds is unhashable")),
    ("def key(*engines):\n    return hash(engines)\n\n\n"
     "def test_t():\n    llm = LLM('m')\n    assert key(1, llm)\n",
     ("unsafe", "in `key()`, which receives the engine: `hash()` hashes the engine, and "
                "the `weakref.proxy` the fix binds is unhashable")),
    ("def key(engine):\n    other = engine\n    return {other: 1}\n\n\n"
     "def test_t():\n    llm = LLM('m')\n    assert key(llm)\n",
     ("unsafe", "in `key()`, which receives the engine: the engine is a dict key or set "
                "member, and the `weakref.proxy` the fix binds is unhashable")),
    ("def kind(engine):\n    return isinstance(engine, LLM)\n\n\n"
     "def test_t():\n    llm = LLM('m')\n    assert kind(llm)\n",
     ("safe", "")),
    ("from helpers import key\n\n\n"
     "def test_t():\n    llm = LLM('m')\n    assert key(llm)\n",
     ("safe", "")),
], ids=["cache-keyword", "vararg", "alias-in-helper",
        "isinstance-in-helper", "imported-helper"])
def test_a_helper_given_the_engine_is_followed(body: str, expected: tuple[str, str]) -> None:
    """A module function handed the engine (by keyword, through an alias in it) that hashes
    it, caches on it or reads its identity makes the fix unsafe; `isinstance()` sees
    through the proxy; a function imported from elsewhere is not followed (the fix stays
    as safe as before)."""
    assert gpu001(body) == expected

"""``runner`` names the project's own runner, which fixes target instead of the bundled one:
``pkg.module:name`` (a context manager imported from the project) or ``conftest:name`` (a
fixture, requested). At fix time the runner is looked up in the tree: where it is missing, is
no context manager, its signature does not take the call's arguments, or a fixture's scope is
too narrow, there is no fix and the reason names what; a default of the runner's own the call
does not set makes the fix unsafe."""

from __future__ import annotations

from pathlib import Path

import pytest

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.config import ConfigError, config_as_toml, config_from_table
from lint_gpu_tests.fixing import fixloop

TEST = ('import gc\n\nimport pytest\nfrom vllm import LLM\n\n\n'
        '@pytest.fixture(scope="module")\ndef llm():\n    engine = LLM("m")\n    yield engine\n\n\n'
        'def test_a():\n    first = LLM("m", seed=1)\n    assert first.generate(["x"])\n'
        '    del first\n    gc.collect()\n')
MODULE_FIXED = ('import weakref\n\nimport pytest\n\nfrom tests.utils import managed_llm\n\n\n'
                '@pytest.fixture(scope="module")\ndef llm():\n'
                '    with managed_llm("m") as runner:\n        yield weakref.proxy(runner.llm)\n'
                '\n\ndef test_a():\n    with managed_llm("m", seed=1) as runner:\n'
                '        first = weakref.proxy(runner.llm)\n'
                '        assert first.generate(["x"])\n')
CLASS_RUNNER = ('from vllm import LLM\n\n\nclass Base:\n    def __enter__(self):\n'
                '        return self\n\n    def __exit__(self, *exc_info):\n'
                '        self.llm.llm_engine.engine_core.shutdown()\n\n\n'
                'class managed_llm(Base):\n    def __init__(self, model, **kwargs):\n'
                '        self.llm = LLM(model, **kwargs)\n')
CM_RUNNER = ('import contextlib\n\nfrom vllm import LLM\n\n\n@contextlib.contextmanager\n'
             'def managed_llm({params}):\n    llm = LLM(model, **kwargs)\n    try:\n'
             '        yield llm\n    finally:\n        llm.llm_engine.engine_core.shutdown()\n')
FLAT_RUNNER = ('from vllm import LLM\n\n\nclass managed_llm:\n'
               '    def __init__(self, model, **kwargs):\n'
               '        self.llm = LLM(model, **kwargs)\n\n'
               '    def __enter__(self):\n        return self\n\n'
               '    def __exit__(self, *exc_info):\n'
               '        self.llm.llm_engine.engine_core.shutdown()\n')
ISOLATE = "; `--fix-strategy isolate` would fix it safely"
WIDE = "a module-scoped fixture: the engine's lifetime follows the fixture's scope and the " \
    "runner must allow it"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(TEST)
    return tmp_path


def fixes(project: Path, **table: str) -> list[tuple[int, str, str, str]]:
    """``(row, code, applicability, title or reason)`` of every GPU001 in the project."""
    config = config_from_table({k.replace("_", "-"): v for k, v in table.items()}, "",
                               root=str(project))
    result = check_paths([str(project / "tests")], config, cache=False, jobs=1)
    return sorted((v.location.row, v.code, v.fix.applicability.value,
                   v.fix.title if v.fix.applicability.value == "safe" else v.fix.reason)
                  for file in result.files for v in file.violations
                  if v.code == "GPU001" and v.fix is not None)


def test_a_context_manager_class_of_the_project_is_imported_and_entered(project: Path) -> None:
    (project / "tests" / "utils.py").write_text(CLASS_RUNNER)
    assert fixes(project, runner="tests.utils:managed_llm") == [
        (9, "GPU001", "safe", "Wrap in `with managed_llm(...)`"),
        (14, "GPU001", "safe", "Wrap in `with managed_llm(...)`")]
    config = config_from_table({"runner": "tests.utils:managed_llm"}, "", root=str(project))
    result = check_paths([str(project / "tests")], config, cache=False, jobs=1)
    assert [v.message for v in result.violations if v.code == "GPU001"] == [
        "Engine `LLM(...)` built outside `with managed_llm(...)`"] * 2
    path = project / "tests" / "test_x.py"
    outcome = fixloop.fix_source(TEST.encode(), str(path), config, unsafe=True)
    assert outcome.error is None
    assert outcome.new_source == MODULE_FIXED.encode()


def test_a_generator_context_manager_that_yields_the_engine(project: Path) -> None:
    (project / "tests" / "utils.py").write_text(CM_RUNNER.format(params="model, **kwargs"))
    config = config_from_table({"runner": "tests.utils:managed_llm", "runner-yields": "engine"},
                               "", root=str(project))
    outcome = fixloop.fix_source(TEST.encode(), str(project / "tests" / "test_x.py"), config,
                                 unsafe=True)
    assert outcome.new_source == MODULE_FIXED.replace(
        'm") as runner:\n        yield weakref.proxy(runner.llm)',
        'm") as engine2:\n        yield weakref.proxy(engine2)').replace(
        "runner.llm", "engine").replace("as runner", "as engine").encode()


@pytest.mark.parametrize(("utils", "runner", "reason"), [
    (None, "tests.utils:managed_llm",
     '`runner = "tests.utils:managed_llm"` imports from `tests.utils`, and the project has no '
     "`tests/utils.py`"),
    ("", "tests.utils:managed_llm",
     '`runner = "tests.utils:managed_llm"`: `tests/utils.py` defines no `managed_llm` (a '
     "function or class at its top level)"),
    ("def managed_llm(model, **kwargs):\n    pass\n", "tests.utils:managed_llm",
     "`managed_llm` in tests/utils.py is not a context manager (a function decorated with "
     "`@contextlib.contextmanager`, or a class with `__enter__` and `__exit__`)"),
    ("import contextlib\n\n\n@contextlib.asynccontextmanager\nasync def managed_llm(model):\n"
     "    yield\n", "tests.utils:managed_llm",
     "`managed_llm` in tests/utils.py is an `async def`: a `with` statement cannot enter it"),
    ("from x import Base\n\n\nclass managed_llm(Base):\n    pass\n", "tests.utils:managed_llm",
     "`managed_llm` in tests/utils.py derives from a class its module does not define, whose "
     "methods the fix cannot see"),
    (CM_RUNNER.format(params="model_name"), "tests.utils:managed_llm",
     "`managed_llm(model_name)` in tests/utils.py takes no `seed=` keyword (and no "
     "`**kwargs`)"),
    (CM_RUNNER.format(params="monkeypatch, env=None, **kwargs"), "tests.utils:managed_llm",
     "`managed_llm(monkeypatch, env=None, **kwargs)` in tests/utils.py takes `monkeypatch` "
     "first, where the fix passes the model"),
    (CM_RUNNER.format(params="*, model, **kwargs"), "tests.utils:managed_llm",
     "`managed_llm(*, model, **kwargs)` in tests/utils.py takes no positional argument, and "
     "the fix passes the model by position"),
    (CM_RUNNER.format(params="model, tokenizer, **kwargs"), "tests.utils:managed_llm",
     "`managed_llm(model, tokenizer, **kwargs)` in tests/utils.py requires `tokenizer`, which "
     "the call does not pass"),
])
def test_no_fix_names_what_is_missing(project: Path, utils: str | None, runner: str,
                                      reason: str) -> None:
    if utils is not None:
        (project / "tests" / "utils.py").write_text(utils)
    assert fixes(project, runner=runner)[1] == (14, "GPU001", "none", reason + ISOLATE)
    # The missing fix is titled after the project's runner, as the message names it.
    config = config_from_table({"runner": runner}, "", root=str(project))
    result = check_paths([str(project / "tests")], config, cache=False, jobs=1)
    assert {v.fix.title for v in result.violations if v.code == "GPU001" and v.fix} == {
        "Wrap in `with managed_llm(...)`"}


def test_a_default_of_the_runner_s_own_makes_the_fix_unsafe(project: Path) -> None:
    (project / "tests" / "utils.py").write_text(
        CM_RUNNER.format(params="model, seed=0, max_model_len=1024, **kwargs"))
    assert fixes(project, runner="tests.utils:managed_llm")[1] == (
        14, "GPU001", "unsafe", "`managed_llm(model, seed=0, max_model_len=1024, **kwargs)` in "
        "tests/utils.py sets its own default for `max_model_len`, which the call does not set "
        "and which may differ from `LLM`'s")


CONFTEST = ('import pytest\n\nfrom tests.utils import managed_llm\n\n\n'
            '@pytest.fixture(scope="{scope}")\ndef llm_runner():\n    return {returned}\n')


@pytest.mark.parametrize(("scope", "returned", "expected"), [
    ("session", "managed_llm", [(9, "GPU001", "unsafe", WIDE),
                                (14, "GPU001", "safe", "Wrap in `with llm_runner(...)`")]),
    ("function", "managed_llm", [
        (9, "GPU001", "none", "a module-scoped fixture cannot request the function-scoped "
                              "`llm_runner` fixture (tests/conftest.py)"),
        (14, "GPU001", "safe", "Wrap in `with llm_runner(...)`")]),
    ("session", "object", [
        (9, "GPU001", "unsafe", f"{WIDE}; what the `llm_runner` fixture gives is not followed "
                                "(a class or function of its own file, returned): the "
                                "engine's arguments are not checked against it"),
        (14, "GPU001", "unsafe", "what the `llm_runner` fixture gives is not followed (a class "
                                 "or function of its own file, returned): the engine's "
                                 "arguments are not checked against it")]),
])
def test_a_conftest_fixture_is_requested(project: Path, scope: str, returned: str,
                                         expected: list[tuple[int, str, str, str]]) -> None:
    conftest = CONFTEST.format(scope=scope, returned=returned)
    if returned == "managed_llm":  # defined in the conftest itself, so its signature is read
        conftest = conftest.replace("from tests.utils import managed_llm\n", FLAT_RUNNER)
    (project / "tests" / "conftest.py").write_text(conftest)
    assert fixes(project, runner="conftest:llm_runner") == expected


def test_without_the_fixture_there_is_no_fix(project: Path) -> None:
    assert fixes(project, runner="conftest:llm_runner")[1] == (
        14, "GPU001", "none", '`runner = "conftest:llm_runner"` requests the `llm_runner` '
        "fixture, and no conftest.py pytest loads for this module defines it" + ISOLATE)


@pytest.mark.parametrize(("table", "message"), [
    ({"runner": "tests/utils.py"}, "t: `runner` must be `package.module:name` (a context manager "
     "of the project) or `conftest:name` (a fixture), got 'tests/utils.py'"),
    ({"runner": "tests.utils:"}, "t: `runner` must be `package.module:name` (a context manager "
     "of the project) or `conftest:name` (a fixture), got 'tests.utils:'"),
    ({"runner": "tests.utils:r", "target": "vllm"}, "t: `runner` names the project's own runner, "
     "and `target` names another: set one of them"),
    ({"runner-yields": "llm"}, "t: `runner-yields` must be one of runner, engine, got 'llm'"),
])
def test_bad_settings_are_config_errors(table: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_table(table, "t")
    assert str(info.value) == message


def test_settings_name_the_runner_first_and_hash_its_module(project: Path) -> None:
    module = config_from_table({"runner": "tests.utils:m", "runner-classes": ["A", "m"]}, "",
                               root=str(project))
    assert (module.runner_classes, module.runner_module, module.runner_is_fixture) == (
        ("m", "A"), ("tests.utils", "m"), False)
    fixture = config_from_table({"runner": "conftest:f"}, "", root=str(project))
    assert (fixture.runner_fixture, fixture.runner_module, fixture.runner_is_fixture) == (
        "f", None, True)
    assert 'runner = "conftest:f"\nrunner-yields = "runner"\n' in config_as_toml(fixture)
    default = config_as_toml(config_from_table({}, ""))
    assert "\nrunner = " not in default and "runner-yields" not in default
    before = module.fingerprint()
    (project / "tests" / "utils.py").write_text("def m(model):\n    pass\n")
    assert module.fingerprint() != before


def test_a_runner_defined_in_the_module_a_fix_rewrites_is_not_imported_into_it(
        project: Path) -> None:
    """A ``conftest.py`` that defines the runner the config names: its own engine is the
    runner's, and no fix imports the runner into the module that defines it."""
    (project / "tests" / "__init__.py").write_text("")
    (project / "tests" / "conftest.py").write_text(
        CM_RUNNER.format(params="model, **kwargs"))
    reason = ('`runner = "tests.conftest:managed_llm"` is defined in this module: a fix would '
              "import the runner into the module that defines it (and an engine its body "
              "builds is the runner's own)")
    assert fixes(project, runner="tests.conftest:managed_llm", runner_yields="engine")[0] == (
        8, "GPU001", "none", reason)


def test_a_factory_helper_of_another_module_is_not_rewritten_over_the_projects_runner(
        project: Path) -> None:
    """The factory unit targets the bundled runner (or vLLM's): with the project's own, its
    callers keep their cleanup, with the reason."""
    (project / "tests" / "__init__.py").write_text("")
    (project / "tests" / "utils.py").write_text(
        CM_RUNNER.format(params="model, **kwargs")
        + '\n\ndef make_llm(model):\n    return LLM(model=model)\n')
    (project / "tests" / "test_x.py").write_text(
        'import gc\n\nfrom tests.utils import make_llm\n\n\ndef test_a():\n'
        '    llm = make_llm("m")\n    llm.generate(["x"])\n    del llm\n    gc.collect()\n')
    config = config_from_table({"runner": "tests.utils:managed_llm", "runner-yields": "engine"},
                               "", root=str(project))
    result = check_paths([str(project / "tests")], config, cache=False, jobs=1)
    found = [(v.code, v.location.row, v.fix.applicability.value if v.fix else None)
             for v in result.violations]
    assert found == [("GPU001", 7, "none"), ("GPU004", 9, "none"), ("GPU004", 10, "none")]
    assert all("the project's runner (`runner = \"tests.utils:managed_llm\"`) is not one a "
               "factory helper is rewritten over" in v.fix.reason
               for v in result.violations if v.fix is not None)

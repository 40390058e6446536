"""GPU004 in a test that receives an engine from a conftest fixture (GPU004 reports the
manual cleanup in a function that "receives ... an engine fixture defined in the module or
in a ``conftest.py`` pytest loads for it", docs/rules.md), through the library, the CLI's
cache and the flake8 plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lint_gpu_tests.analysis.analysis import ENGINE_HELPER
from lint_gpu_tests.api import check_paths
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.checking.conftest_index import conftest_engine_fixtures, conftest_files
from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import PRIVATE_TEST_MODULE

CONFTEST = """\
import pytest
from vllm import LLM


@pytest.fixture(scope="module")
def llm():
    engine = LLM("facebook/opt-125m")
    yield engine
"""

TEST = """\
import gc


def test_generate(llm):
    assert llm.generate(["hi"])
    gc.collect()


def test_no_engine(tmp_path):
    gc.collect()
"""


def make_project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    tests = tmp_path / "tests" / "unit"
    tests.mkdir(parents=True)
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST)
    (tests / "test_gen.py").write_text(TEST)
    return tests / "test_gen.py"


def codes(path: Path, config: Config) -> list[tuple[int, int, str]]:
    return [(v.location.row, v.location.column, v.code)
            for v in check_source(path.read_bytes(), str(path), config)]


def test_conftest_engine_fixture_makes_the_test_own_an_engine(tmp_path: Path) -> None:
    test = make_project(tmp_path)
    assert conftest_files(str(test)) == [str(tmp_path / "tests" / "conftest.py")]
    # no file of the tree imports the test module: its entries mark it private
    assert conftest_engine_fixtures(str(test), Config()) == frozenset({"llm",
                                                                      PRIVATE_TEST_MODULE})
    assert codes(test, Config()) == [(6, 5, "GPU004")]


def test_the_del_of_a_fixture_parameter_is_left_alone(tmp_path: Path) -> None:
    """``del llm`` of the fixture's parameter frees nothing (pytest holds the value): only
    the ``gc.collect()`` after it is manual cleanup (GPU004's docs say so)."""
    test = make_project(tmp_path)
    test.write_text("import gc\n\n\ndef test_generate(llm):\n    assert llm.generate(['hi'])\n"
                    "    del llm\n    gc.collect()\n")
    assert codes(test, Config()) == [(7, 5, "GPU004")]


def test_a_local_fixture_of_the_same_name_overrides_the_conftest(tmp_path: Path) -> None:
    test = make_project(tmp_path)
    test.write_text("import gc\n\nimport pytest\n\n\n@pytest.fixture\ndef llm():\n"
                    "    return object()\n\n\n" + TEST.split("\n\n\n", 1)[1])
    assert codes(test, Config()) == []


def test_search_stops_at_the_project_root(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    (project / "test_gen.py").write_text(TEST)
    assert conftest_files(str(project / "test_gen.py")) == []
    assert codes(project / "test_gen.py", Config()) == []


def test_cached_results_follow_a_conftest_change(tmp_path: Path) -> None:
    test = make_project(tmp_path)
    first = check_paths([str(test.parent)], Config(root=str(tmp_path)), jobs=1)
    assert [v.code for f in first.files for v in f.violations] == ["GPU004"]
    conftest = tmp_path / "tests" / "conftest.py"
    conftest.write_text(CONFTEST.replace("def llm():", "def other():"))
    second = check_paths([str(test.parent)], Config(root=str(tmp_path)), jobs=1)
    assert second.cache_hits == 0
    assert [v.code for f in second.files for v in f.violations] == []


def test_a_conftests_pytest_plugins_hand_on_their_engine_fixtures(tmp_path: Path) -> None:
    """A conftest naming a module in ``pytest_plugins`` (pytest registers that module's
    fixtures for the session) hands on its engine fixtures, and those of the modules its own
    ``pytest_plugins`` names; a cached run follows a change of the plugin module."""
    test = make_project(tmp_path)
    (tmp_path / "tests" / "conftest.py").write_text(  # a string is split at its commas
        'pytest_plugins = "tests.fixtures.absent, tests.fixtures.engines"\n')
    fixtures = tmp_path / "tests" / "fixtures"
    fixtures.mkdir()
    (fixtures / "engines.py").write_text('pytest_plugins = ("tests.fixtures.more",)\n')
    (fixtures / "more.py").write_text(CONFTEST)
    # (with the engine-helper entries of the fixture module, which a module may import)
    assert {n for n in conftest_engine_fixtures(str(test), Config())
            if not n.startswith(ENGINE_HELPER)} == {
        "llm", "pytest-plugin:tests.fixtures.absent", "pytest-plugin:tests.fixtures.engines",
        "pytest-plugin:tests.fixtures.more", PRIVATE_TEST_MODULE}
    assert codes(test, Config()) == [(6, 5, "GPU004")]
    first = check_paths([str(test.parent)], Config(root=str(tmp_path)), jobs=1)
    assert [(v.path, v.location.row, v.code) for f in first.files for v in f.violations] == [
        (str(test), 6, "GPU004")]
    (fixtures / "more.py").write_text(CONFTEST.replace("def llm():", "def other():"))
    second = check_paths([str(test.parent)], Config(root=str(tmp_path)), jobs=1)
    assert second.cache_hits == 0
    assert [v.code for f in second.files for v in f.violations] == []


def test_conftests_naming_each_other_in_pytest_plugins(tmp_path: Path) -> None:
    """tests/conftest.py names tests/sub/conftest.py (which defines the engine fixture) as
    a plugin, and that one names it back: a test of either directory receives the engine."""
    (tmp_path / "pyproject.toml").write_text("")
    sub = tmp_path / "tests" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "tests" / "conftest.py").write_text('pytest_plugins = ["tests.sub.conftest"]\n')
    (sub / "conftest.py").write_text('pytest_plugins = ["tests.conftest"]\n' + CONFTEST)
    (tmp_path / "tests" / "test_top.py").write_text(TEST)
    (sub / "test_sub.py").write_text(TEST)
    result = check_paths([str(tmp_path / "tests")], Config(root=str(tmp_path)), jobs=1,
                         cache=False)
    assert [(Path(v.path).name, v.location.row, v.code) for f in result.files
            for v in f.violations] == [("conftest.py", 8, "GPU001"), ("conftest.py", 9, "GPU002"),
                                       ("test_sub.py", 6, "GPU004"), ("test_top.py", 6, "GPU004")]


def test_an_engine_fixture_imported_by_name_from_another_module(tmp_path: Path) -> None:
    """``from tests.fixtures.engines import llm`` (absolute or relative, or ``import *``)
    makes the fixture the test module's, as pytest does: a test receiving it owns its
    engine; a module that defines its own fixture of the name keeps its own."""
    (tmp_path / "pyproject.toml").write_text("")
    fixtures = tmp_path / "tests" / "fixtures"
    fixtures.mkdir(parents=True)
    (tmp_path / "tests" / "__init__.py").write_text("")
    (fixtures / "__init__.py").write_text("")
    (fixtures / "engines.py").write_text(CONFTEST)
    tests = tmp_path / "tests"
    (tests / "test_abs.py").write_text("from tests.fixtures.engines import llm  # noqa: F401\n"
                                       + TEST)
    (tests / "test_rel.py").write_text("from .fixtures.engines import llm  # noqa: F401\n"
                                       + TEST)
    (tests / "test_star.py").write_text("from tests.fixtures.engines import *  # noqa: F403\n"
                                        + TEST)
    (tests / "test_own.py").write_text(
        "import gc\n\nimport pytest\n\nfrom tests.fixtures.engines import other\n\n\n"
        "@pytest.fixture\ndef llm():\n    return other\n\n\n" + TEST.split("\n\n\n", 1)[1])
    result = check_paths([str(tests)], Config(root=str(tmp_path)), jobs=1, cache=False)
    assert [(Path(v.path).name, v.location.row, v.code) for f in result.files
            for v in f.violations] == [
        ("engines.py", 7, "GPU001"), ("engines.py", 8, "GPU002"),
        ("test_abs.py", 7, "GPU004"), ("test_rel.py", 7, "GPU004"),
        ("test_star.py", 7, "GPU004")]


NAMED = CONFTEST.replace('@pytest.fixture(scope="module")\ndef llm():',
                         '@pytest.fixture(scope="module", name="llm")\ndef llm_fixture():')


def test_a_fixture_named_by_its_decorator_is_requested_by_that_name(tmp_path: Path) -> None:
    """``@pytest.fixture(name="llm")`` registers the fixture as ``llm`` whatever its function
    is called: in a conftest, in the test module, imported from another module of the tree
    (by its function's name, as pytest reads the decorator's name) and in the conftest's
    names that hide one above it."""
    test = make_project(tmp_path)
    (tmp_path / "tests" / "conftest.py").write_text(NAMED)
    assert codes(test, Config()) == [(6, 5, "GPU004")]
    test.write_text('import pytest\nfrom vllm import LLM\n\n\n@pytest.fixture(name="engine")\n'
                    'def _engine():\n    return LLM("m")\n\n\n' + TEST.replace("llm", "engine"))
    assert codes(test, Config()) == [(7, 12, "GPU001"), (7, 12, "GPU002"), (15, 5, "GPU004")]
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "conftest.py").write_text("")
    (tmp_path / "tests" / "engines.py").write_text(NAMED)
    test.write_text("from tests.engines import llm_fixture  # noqa: F401\n" + TEST)
    result = check_paths([str(tmp_path / "tests")], Config(root=str(tmp_path)), jobs=1,
                         cache=False)
    assert [(Path(v.path).name, v.location.row, v.code) for f in result.files
            for v in f.violations] == [
        ("engines.py", 7, "GPU001"), ("engines.py", 8, "GPU002"), ("test_gen.py", 7, "GPU004")]
    test.write_text("from tests.engines import llm_fixture as llm  # noqa: F401\n"
                    + TEST.replace("llm", "engine"))
    result = check_paths([str(test)], Config(root=str(tmp_path)), jobs=1, cache=False)
    assert [v.code for f in result.files for v in f.violations] == []
    (tmp_path / "tests" / "engines.py").unlink()
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST)
    (test.parent / "conftest.py").write_text(
        'import pytest\n\n\n@pytest.fixture(name="llm")\ndef fake():\n    return "fake"\n')
    test.write_text(TEST)
    assert codes(test, Config()) == []


def test_the_fixture_nearest_the_test_wins(tmp_path: Path) -> None:
    """pytest hands a test the fixture defined nearest to it: a deeper conftest's fixture
    that provides no engine hides the engine fixture (or factory fixture) of that name in
    a conftest above, and a conftest's own fixture hides its ``pytest_plugins`` module's."""
    test = make_project(tmp_path)
    factory = ("\n\n@pytest.fixture\ndef make_llm():\n    def _make(**kw):\n"
               "        return LLM('m', **kw)\n    return _make\n")
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST + factory)
    test.write_text(TEST + "\n\ndef test_made(make_llm):\n    llm = make_llm()\n"
                    "    del llm\n    gc.collect()\n")
    assert codes(test, Config()) == [(6, 5, "GPU004"), (15, 5, "GPU004"), (16, 5, "GPU004")]
    (test.parent / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef llm():\n    return 'fake'\n\n\n"
        "@pytest.fixture\ndef make_llm():\n    return lambda **kw: object()\n")
    assert codes(test, Config()) == []
    (test.parent / "conftest.py").unlink()
    (tmp_path / "tests" / "conftest.py").write_text(
        'import pytest\n\npytest_plugins = ["tests.engines"]\n\n\n'
        "@pytest.fixture\ndef llm():\n    return {'name': 'not an engine'}\n")
    (tmp_path / "tests" / "engines.py").write_text(CONFTEST)
    test.write_text(TEST)
    assert codes(test, Config()) == []


def test_a_conftest_added_or_removed_between_two_checks_in_one_process_counts(
        tmp_path: Path) -> None:
    """An editor or a test suite checks again in the same process: the conftest search
    sees a ``conftest.py`` (or a project root marker) added or removed since."""
    test = make_project(tmp_path)
    conftest = tmp_path / "tests" / "conftest.py"
    conftest.unlink()
    assert conftest_files(str(test)) == []
    assert codes(test, Config()) == []
    conftest.write_text(CONFTEST)
    assert conftest_files(str(test)) == [str(conftest)]
    assert codes(test, Config()) == [(6, 5, "GPU004")]
    (tmp_path / "tests" / "unit" / "setup.cfg").write_text("")  # a root below the conftest
    assert conftest_files(str(test)) == []
    assert codes(test, Config()) == []
    (tmp_path / "tests" / "unit" / "setup.cfg").unlink()
    conftest.unlink()
    assert conftest_files(str(test)) == []
    assert codes(test, Config()) == []


def test_a_directory_not_modified_lately_is_answered_from_what_was_kept(
        tmp_path: Path) -> None:
    """The conftest search keeps a directory's answer while its modification time stays
    the same, and only for a directory modified more than ``RACY_NS`` ago; adding a
    conftest there changes the time, so the next search finds it."""
    import os

    from lint_gpu_tests.checking import conftest_index

    test = make_project(tmp_path)
    conftest = tmp_path / "tests" / "conftest.py"
    conftest.unlink()
    unit = test.parent
    hour_ago = os.stat(unit).st_mtime_ns - 3600 * 10**9
    os.utime(unit, ns=(hour_ago, hour_ago))
    assert conftest_files(str(test)) == []
    assert conftest_index._LEVELS[str(unit)] == (hour_ago, False, False)
    assert str(unit.parent) not in conftest_index._LEVELS  # modified just now: not kept
    (unit / "conftest.py").write_text(CONFTEST)
    assert conftest_files(str(test)) == [str(unit / "conftest.py")]
    assert codes(test, Config()) == [(6, 5, "GPU004")]


def test_flake8_reports_the_same(tmp_path: Path) -> None:
    test = make_project(tmp_path)
    out = subprocess.run([sys.executable, "-m", "flake8", "--select", "GPU", str(test)],
                         capture_output=True, text=True, cwd=tmp_path, check=False)
    message = "Manual cleanup `gc.collect()` in a function that owns an engine"
    assert out.stdout.splitlines() == [f"{test}:6:5: GPU004 {message}"]


def test_a_fixture_named_by_a_module_constant(tmp_path: Path) -> None:
    """``@pytest.fixture(name=ENGINE)`` with ``ENGINE = "engine"`` at module level: tests
    request it as ``engine``."""
    test = make_project(tmp_path)
    (tmp_path / "tests" / "conftest.py").write_text(NAMED.replace(
        'name="llm"', "name=ENGINE").replace("import pytest\n",
                                             'import pytest\n\nENGINE = "llm"\n'))
    assert codes(test, Config()) == [(6, 5, "GPU004")]

"""GPU008 environment-mutated-without-isolation: engine configuration set in ``os.environ``
by hand leaks into later tests.

Its own INVALID/VALID examples
(``lint_gpu_tests/rules/gpu008_environment_mutated_without_isolation.py``), what counts as a
change of a configured variable, what is exempt, and the fix each context gets (the rewrites
themselves are byte-exact in ``tests/fixtures/fix/env_*``; which files the prefilter lets
through to it is in ``tests/test_prefilter.py``)."""

from __future__ import annotations

import textwrap

import pytest
from rule_testing import example_tests, reports, rule_class

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, ConfigError, config_from_table
from lint_gpu_tests.fixing.fixloop import fix_source

RULE = rule_class("GPU008")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


def gpu008(source: str, config: Config | None = None,
           path: str = "tests/test_x.py") -> list[tuple[int, int, str, str]]:
    """``(row, column, applicability, reason)`` of every GPU008 report."""
    found = check_source(textwrap.dedent(source).encode(), path, config or Config())
    return [(v.location.row, v.location.column, v.fix.applicability.value, v.fix.reason)
            for v in found if v.code == "GPU008" and v.fix is not None]


def fixed(source: str, *, unsafe: bool = False, path: str = "tests/test_x.py") -> str:
    src = textwrap.dedent(source).encode()
    outcome = fix_source(src, path, Config(), unsafe=unsafe)
    assert outcome.error is None
    return (outcome.new_source or src).decode()


def test_message_names_the_variables_and_the_monkeypatch_call() -> None:
    found = check_source(textwrap.dedent("""\
        import os


        def test_x():
            os.environ.update({"VLLM_A": "1", "VLLM_B": "2"})
            os.environ.pop("VLLM_C")
        """).encode(), "tests/test_x.py", Config())
    assert [(v.location.row, v.message) for v in found] == [
        (5, "`VLLM_A`, `VLLM_B` set in `os.environ` by hand leaks into every later test; use "
            "`monkeypatch.setenv`"),
        (6, "`VLLM_C` removed from `os.environ` by hand leaks into every later test; use "
            "`monkeypatch.delenv`"),
    ]


def test_message_of_putenv_names_the_environment_not_os_environ() -> None:
    """``os.putenv``/``os.unsetenv`` change the process environment (what engine processes
    inherit), not ``os.environ``: the message says which."""
    found = check_source(textwrap.dedent("""\
        import os
        from os import unsetenv as unset


        def test_x():
            os.putenv("VLLM_D", "1")
            unset("VLLM_E")
        """).encode(), "tests/test_x.py", Config())
    assert [(v.location.row, v.message) for v in found] == [
        (6, "`VLLM_D` set in the environment (`os.putenv`) by hand leaks into every later "
            "test; use `monkeypatch.setenv`"),
        (7, "`VLLM_E` removed from the environment (`os.unsetenv`) by hand leaks into every "
            "later test; use `monkeypatch.delenv`"),
    ]


MONKEYPATCH_INSTANCES = """\
    import os

    import pytest
    from _pytest.monkeypatch import MonkeyPatch


    def test_never_undone():
        mp = pytest.MonkeyPatch()
        mp.setenv("VLLM_A", "1")
        mp.delenv(name="VLLM_B", raising=False)
        mp.setattr(os, "sep", "/")


    def test_chained():
        MonkeyPatch().setenv("VLLM_C", "1")


    def test_undone():
        mp = pytest.MonkeyPatch()
        mp.setenv("VLLM_D", "1")
        mp.undo()


    @pytest.fixture
    def handed_on(request):
        mp = pytest.MonkeyPatch()
        request.addfinalizer(mp.undo)
        mp.setenv("VLLM_E", "1")


    @pytest.fixture
    def yielded():
        mp = pytest.MonkeyPatch()
        mp.setenv("VLLM_F", "1")
        yield mp


    def test_the_fixture(monkeypatch):
        mp = monkeypatch
        mp.setenv("VLLM_G", "1")
    """


def test_a_monkeypatch_instance_that_nothing_undoes() -> None:
    """``pytest.MonkeyPatch()`` restores nothing when dropped: its changes leak as hand-made
    ones do, unless something undoes it (``undo()``, ``mp.undo`` handed on, the instance
    yielded or returned), and they get no fix."""
    found = check_source(textwrap.dedent(MONKEYPATCH_INSTANCES).encode(), "tests/test_x.py",
                         Config())
    why = "`{0}` is a `pytest.MonkeyPatch()` that nothing undoes: {1}"
    call = ("call `mp.undo()` where the fixture's teardown ends, or use the `monkeypatch` "
            "fixture in a test or a function-scoped fixture")
    assert [(v.location.row, v.location.column, v.message, v.fix and v.fix.applicability.value,
             v.fix and v.fix.reason) for v in found] == [
        (9, 5, "`VLLM_A` set in the environment by `mp`, a `pytest.MonkeyPatch()` never "
               "undone, leaks into every later test; undo it (`mp.undo()`)", "none",
         why.format("mp", call)),
        (10, 5, "`VLLM_B` removed from the environment by `mp`, a `pytest.MonkeyPatch()` never "
                "undone, leaks into every later test; undo it (`mp.undo()`)", "none",
         why.format("mp", call)),
        (15, 5, "`VLLM_C` set in the environment by `MonkeyPatch()`, a `pytest.MonkeyPatch()` "
                "never undone, leaks into every later test; use the `monkeypatch` fixture",
         "none", why.format("MonkeyPatch()", "use the `monkeypatch` fixture")),
    ]


UNDONE_AT_TEARDOWN = """\
    import pytest


    @pytest.fixture(scope="session", autouse=True)
    def session_env():
        mp = pytest.MonkeyPatch()
        mp.setenv("VLLM_A", "1")
        mp.setenv("VLLM_B", "1")


    @pytest.fixture(scope="module")
    def module_env():
        mp = pytest.MonkeyPatch()
        mp.setenv("VLLM_C", "1")
        yield "c"


    @pytest.fixture
    def function_env():
        mp = pytest.MonkeyPatch()
        mp.delenv("VLLM_D", raising=False)
        yield


    @pytest.fixture(scope="session")
    def in_a_block(flag):
        if flag:
            mp = pytest.MonkeyPatch()
            mp.setenv("VLLM_E", "1")


    @pytest.fixture(scope="session")
    def bare_return():
        mp = pytest.MonkeyPatch()
        mp.setenv("VLLM_F", "1")
        return
    """


def test_a_fixtures_monkeypatch_instance_is_undone_at_its_teardown() -> None:
    """``mp.undo()`` at the end of the fixture (after a ``yield`` added where it returns):
    safe where every test sees the same (session scope; function scope, as a hand-made
    change there), unsafe where the modules after it no longer see the change, none where
    ``mp`` may be unbound at the end."""
    found = check_source(textwrap.dedent(UNDONE_AT_TEARDOWN).encode(), "tests/conftest.py",
                         Config())
    assert [(v.location.row, v.fix and v.fix.applicability.value, v.fix and v.fix.title,
             v.fix and v.fix.reason) for v in found] == [
        (7, "safe", "Undo `mp` when the fixture ends", ""),
        (8, "safe", "Undo `mp` when the fixture ends", ""),
        (14, "unsafe", "Undo `mp` when the fixture ends",
         "a module-scoped fixture: `mp.undo()` restores the variables when it ends, where "
         "before they stayed set for the rest of the session"),
        (21, "safe", "Undo `mp` when the fixture ends", ""),
        (29, "none", "Undo `mp` when the fixture ends",
         "`mp` is a `pytest.MonkeyPatch()` that nothing undoes: call `mp.undo()` where the "
         "fixture's teardown ends, or use the `monkeypatch` fixture in a test or a "
         "function-scoped fixture; the fixture binds `mp` more than once or inside a block, "
         "so `mp.undo()` at its end might not run"),
        (35, "safe", "Undo `mp` when the fixture ends", ""),
    ]
    assert fixed(UNDONE_AT_TEARDOWN, unsafe=True, path="tests/conftest.py") == \
        textwrap.dedent("""\
        import pytest


        @pytest.fixture(scope="session", autouse=True)
        def session_env():
            mp = pytest.MonkeyPatch()
            mp.setenv("VLLM_A", "1")
            mp.setenv("VLLM_B", "1")
            yield
            mp.undo()


        @pytest.fixture(scope="module")
        def module_env():
            mp = pytest.MonkeyPatch()
            mp.setenv("VLLM_C", "1")
            yield "c"
            mp.undo()


        @pytest.fixture
        def function_env():
            mp = pytest.MonkeyPatch()
            mp.delenv("VLLM_D", raising=False)
            yield
            mp.undo()


        @pytest.fixture(scope="session")
        def in_a_block(flag):
            if flag:
                mp = pytest.MonkeyPatch()
                mp.setenv("VLLM_E", "1")


        @pytest.fixture(scope="session")
        def bare_return():
            mp = pytest.MonkeyPatch()
            mp.setenv("VLLM_F", "1")
            yield
            mp.undo()
            return
        """)


def test_only_configured_variables_with_known_names() -> None:
    source = """\
        import os

        PREFIX = "VLLM_"


        def test_x(name):
            os.environ["PATH"] = "/bin"
            os.environ[name] = "1"
            os.environ[PREFIX + "X"] = "1"
            os.environ.update(name_map)
            os.environ.get("VLLM_X")
        """
    assert gpu008(source) == []


@pytest.mark.parametrize("name", [
    "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "NCCL_P2P_DISABLE", "HCCL_BUFFSIZE",
    "CUDA_LAUNCH_BLOCKING", "HF_HOME", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
    "TORCH_COMPILE_DISABLE", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
    "ONEAPI_DEVICE_SELECTOR", "TPU_VISIBLE_CHIPS", "HABANA_VISIBLE_MODULES",
    "ASCEND_RT_VISIBLE_DEVICES", "VLLM_USE_V1", "NEURON_RT_VISIBLE_CORES", "TPU_HOST_BOUNDS",
    "HABANA_VISIBLE_DEVICES", "NCCL_DEBUG", "OMP_PROC_BIND", "CUDA_VISIBLE_DEVICES",
])
def test_the_default_families_an_engine_torch_or_a_collective_reads(name: str) -> None:
    source = f"""\
        import os


        def test_x():
            os.environ["{name}"] = "1"
        """
    assert [(row, col) for row, col, *_ in gpu008(source)] == [(5, 5)]


def test_other_variables_are_not_engine_configuration_by_default() -> None:
    source = """\
        import os


        def test_x():
            os.environ["MYAPP_DEBUG"] = "1"
            os.environ["PATH"] = "/bin"
            os.environ["HIP_PLATFORM"] = "amd"
        """
    assert gpu008(source) == []


def test_extend_environment_variables_adds_to_the_defaults() -> None:
    source = """\
        import os


        def test_x():
            os.environ["MYAPP_DEBUG"] = "1"
            os.environ["VLLM_USE_V1"] = "1"
        """
    config = config_from_table({"extend-environment-variables": ["MYAPP_*"]}, "t")
    assert [row for row, *_ in gpu008(source, config)] == [5, 6]
    both = config_from_table({"environment-variables": ["OMP_*"],
                              "extend-environment-variables": ["MYAPP_*"]}, "t")
    assert [row for row, *_ in gpu008(source, both)] == [5]


def test_environment_variables_option_replaces_the_defaults() -> None:
    source = """\
        import os


        def test_x():
            os.environ["MYAPP_DEBUG"] = "1"
            os.environ["VLLM_USE_V1"] = "1"
        """
    config = config_from_table({"environment-variables": ["MYAPP_*"]}, "t")
    assert [row for row, *_ in gpu008(source, config)] == [5]
    assert [row for row, *_ in gpu008(source)] == [6]
    with pytest.raises(ConfigError, match="`environment-variables` must be a list of strings"):
        config_from_table({"environment-variables": "VLLM_*"}, "t")


def test_aliases_of_os_and_environ_resolve() -> None:
    source = """\
        import os as _os
        from os import environ as env, putenv


        def test_x():
            _os.environ["VLLM_A"] = "1"
            env.setdefault("VLLM_B", "1")
            putenv("VLLM_C", "1")
        """
    assert [(row, kind) for row, _, kind, _ in gpu008(source)] == [
        (6, "safe"), (7, "safe"), (8, "unsafe")]


def test_shadowed_os_is_not_os_environ() -> None:
    assert reports("""\
        import os


        def test_env(os):
            os.environ["VLLM_X"] = "1"


        def test_real():
            os.environ["VLLM_X"] = "1"
        """) == [(9, 5, "GPU008")]


def test_exempt_isolation_patch_dict_and_configured_decorators() -> None:
    source = """\
        import os
        from unittest.mock import patch

        from tests.utils import fork_new_process_for_each_test, run_alone


        @fork_new_process_for_each_test
        def test_forked():
            os.environ["VLLM_A"] = "1"


        @run_alone
        def test_custom():
            os.environ["VLLM_A"] = "1"


        def test_patched():
            with patch.dict("os.environ", {}):
                os.environ["VLLM_A"] = "1"
            os.environ["VLLM_B"] = "1"


        def test_monkeypatch(monkeypatch):
            monkeypatch.setenv("VLLM_A", "1")
            monkeypatch.delenv("VLLM_B", raising=False)
        """
    assert [row for row, *_ in gpu008(source)] == [14, 20]
    config = config_from_table({"isolation-decorators": ["run_alone"]}, "t")
    assert [row for row, *_ in gpu008(source, config)] == [9, 20]


def test_helpers_and_conftest_hooks_are_not_watched() -> None:
    source = """\
        import os


        def set_backend():
            os.environ["VLLM_ATTENTION_BACKEND"] = "FLASH_ATTN"


        def pytest_configure(config):
            os.environ["VLLM_USE_V1"] = "1"
        """
    assert gpu008(source, path="tests/conftest.py") == []


def test_no_fix_in_pytest_xunit_setup_and_classes_of_unknown_bases() -> None:
    source = """\
        import os
        import unittest

        from tests.base import BaseTest


        class TestSetup:
            def setup_method(self):
                os.environ["VLLM_A"] = "1"


        def setup_module():
            os.environ["VLLM_B"] = "1"


        class TestOther(BaseTest):
            def test_x(self):
                os.environ["VLLM_A"] = "1"


        class TestCase(unittest.TestCase):
            def test_x(self):
                os.environ["VLLM_A"] = "1"
        """
    assert gpu008(source) == [
        (9, 9, "none", "pytest passes no fixtures to `setup_method`: restore the variable in "
                       "`teardown_method`, or set it with `monkeypatch` in an autouse "
                       "fixture"),
        (13, 5, "none", "pytest passes no fixtures to `setup_module`: restore the variable "
                        "in `teardown_module`, or set it with `monkeypatch` in an autouse "
                        "fixture"),
        (18, 9, "none", "a method of a class whose bases are not known to be "
                        "`unittest.TestCase`: no fixture and no `addCleanup` is known to "
                        "reach it"),
        (23, 9, "safe", ""),
    ]


XUNIT_RESTORED = """\
    import os
    import unittest
    from unittest import mock

    import pytest


    class TestPair(unittest.TestCase):
        def setUp(self):
            os.environ["VLLM_A"] = "1"

        def tearDown(self):
            del os.environ["VLLM_A"]


    class TestMethods:
        def setup_method(self):
            os.environ.setdefault("VLLM_B", "1")

        def test_sets(self):
            os.environ["VLLM_C"] = "1"

        def teardown_method(self):
            os.environ.pop("VLLM_B", None)
            os.environ.pop("VLLM_C", None)


    class TestWhole(unittest.TestCase):
        @classmethod
        def setUpClass(cls):
            cls.saved = dict(os.environ)
            os.environ["VLLM_D"] = "1"

        @classmethod
        def tearDownClass(cls):
            os.environ.clear()
            os.environ.update(cls.saved)


    class TestCleanups(unittest.TestCase):
        def setUp(self):
            os.environ["VLLM_E"] = "1"
            self.addCleanup(os.environ.pop, "VLLM_E", None)
            patcher = mock.patch.dict(os.environ)
            patcher.start()
            self.addCleanup(patcher.stop)
            os.environ["VLLM_F"] = "1"


    def setup_module():
        os.environ["VLLM_G"] = "1"


    def teardown_module():
        os.environ.pop("VLLM_G")


    class TestHalf:
        def setup_method(self):
            os.environ["VLLM_H"] = "1"
            os.environ["VLLM_I"] = "1"

        def teardown_method(self):
            os.environ.pop("VLLM_H")
            os.environ.pop("VLLM_J", None)
    """


def test_xunit_setup_restored_by_its_teardown_or_a_cleanup_is_not_reported() -> None:
    """A ``setUp``/``setup_method``/``setUpClass``/``setup_module`` whose teardown partner
    changes the same variable again (or clears the environment), or that registers a
    cleanup of it (``addCleanup`` naming ``os.environ``, a started
    ``mock.patch.dict(os.environ)``), restores it: neither side is a leak. What the
    teardown does not restore is reported, and so is a teardown change of a variable that
    nothing in its class sets."""
    assert [(row, col) for row, col, *_ in gpu008(XUNIT_RESTORED)] == [(61, 9), (65, 9)]


def test_unittest_setup_and_test_methods_restore_through_add_cleanup() -> None:
    source = """\
        import os
        import unittest


        class TestEnv(unittest.TestCase):
            def setUp(self):
                self.model = "m"
                # the V1 engine
                os.environ["VLLM_USE_V1"] = "1"
                os.environ.pop("VLLM_X", None)

            def test_x(self):
                os.environ.update({"VLLM_Y": "1"})
                assert os.environ["VLLM_USE_V1"] == "1"


        class TestClassWide(TestEnv):
            @classmethod
            def setUpClass(klass):
                os.environ["VLLM_Z"] = "1"
        """
    assert gpu008(source) == [(9, 9, "safe", ""), (10, 9, "safe", ""), (13, 9, "safe", ""),
                              (20, 9, "safe", "")]
    assert fixed(source) == textwrap.dedent("""\
        import os
        import unittest

        from pytest import MonkeyPatch


        class TestEnv(unittest.TestCase):
            def setUp(self):
                self.model = "m"
                # the V1 engine
                mp = MonkeyPatch()
                self.addCleanup(mp.undo)
                mp.setenv("VLLM_USE_V1", "1")
                mp.delenv("VLLM_X", raising=False)

            def test_x(self):
                mp = MonkeyPatch()
                self.addCleanup(mp.undo)
                mp.setenv("VLLM_Y", "1")
                assert os.environ["VLLM_USE_V1"] == "1"


        class TestClassWide(TestEnv):
            @classmethod
            def setUpClass(klass):
                mp = MonkeyPatch()
                klass.addClassCleanup(mp.undo)
                mp.setenv("VLLM_Z", "1")
        """)


def test_unittest_fix_uses_an_imported_pytest_and_not_a_taken_name() -> None:
    source = """\
        import os
        import unittest

        import pytest


        class TestEnv(unittest.TestCase):
            def setUp(self):
                os.environ["VLLM_USE_V1"] = "1"

            def test_x(self):
                mp = 1
                os.environ["VLLM_Y"] = "1"
        """
    assert gpu008(source) == [(9, 9, "safe", ""),
                              (13, 9, "none", "the function binds a local `mp`")]
    assert fixed(source).splitlines()[7:11] == [
        "    def setUp(self):",
        "        mp = pytest.MonkeyPatch()",
        "        self.addCleanup(mp.undo)",
        '        mp.setenv("VLLM_USE_V1", "1")',
    ]


def test_existing_monkeypatch_context_is_reused_in_a_wide_fixture() -> None:
    source = """\
        import os

        import pytest


        @pytest.fixture(scope="session")
        def env():
            with pytest.MonkeyPatch.context() as patcher:
                os.environ["VLLM_A"] = "1"
                yield
        """
    assert gpu008(source) == [(9, 9, "safe", "")]
    assert fixed(source) == textwrap.dedent(source).replace(
        'os.environ["VLLM_A"] = "1"', 'patcher.setenv("VLLM_A", "1")').removeprefix(
        "import os\n\n")  # `os` is no longer used


def test_wide_fixture_without_pytest_module_or_with_local_monkeypatch() -> None:
    source = """\
        import os

        from pytest import fixture


        @fixture(scope="module")
        def env():
            os.environ["VLLM_A"] = "1"
            yield


        def test_x():
            monkeypatch = None
            os.environ["VLLM_B"] = "1"
        """
    assert gpu008(source) == [
        (8, 5, "none", "`pytest` is not imported as `pytest` for "
                       "`pytest.MonkeyPatch.context()`"),
        (14, 5, "none", "the function binds a local `monkeypatch`"),
    ]


def test_update_with_dict_call_and_comments_inside() -> None:
    source = """\
        import os


        def test_x():
            os.environ.update(dict(VLLM_A="1", VLLM_B="2"))


        def test_y():
            os.environ.update({
                "VLLM_A": "1",  # why A
                "VLLM_B": "2",
            })
        """
    assert gpu008(source) == [
        (5, 5, "safe", ""),
        (9, 5, "none", "the comments inside the call would be lost"),
    ]
    assert fixed(source).splitlines()[:6] == [
        "import os",
        "",
        "",
        "def test_x(monkeypatch):",
        '    monkeypatch.setenv("VLLM_A", "1")',
        '    monkeypatch.setenv("VLLM_B", "2")',
    ]


def test_noqa_suppresses_and_the_fix_leaves_it() -> None:
    source = """\
        import os


        def test_x():
            os.environ["VLLM_A"] = "1"  # noqa: GPU008
        """
    assert gpu008(source) == []
    assert fixed(source) == textwrap.dedent(source)


def test_autouse_patch_dict_fixture_guards_tests_and_function_fixtures() -> None:
    source = """\
        import os
        from unittest import mock

        import pytest


        @pytest.fixture(autouse=True)
        def _clean_env():
            with mock.patch.dict(os.environ, clear=False):
                os.environ.pop("VLLM_A", None)
                yield


        @pytest.fixture(scope="module")
        def wide():
            os.environ["VLLM_B"] = "1"
            yield


        def test_x(wide):
            os.environ["VLLM_C"] = "1"
        """
    assert [row for row, *_ in gpu008(source)] == [16]
    unguarded = source.replace("(autouse=True)", "")
    assert [row for row, *_ in gpu008(unguarded)] == [16, 21]


def test_module_level_of_a_script_pytest_does_not_collect() -> None:
    source = """\
        import os

        os.environ["VLLM_SKIP_WARMUP"] = "true"


        def test_ngram(args):
            assert args


        if __name__ == "__main__":
            os.environ["VLLM_TORCH_PROFILER_DIR"] = "./profile"
        """
    assert gpu008(source, path="tests/full_tests/spec_decode.py") == []
    assert [row for row, *_ in gpu008(source, path="tests/full_tests/test_spec.py")] == [3]


SCOPE = ("the variable is now set only while this module's tests run: modules collected "
         "after it, and their tests, no longer see it")


def test_module_level_change_is_an_unsafe_fix_naming_what_ran_after_it() -> None:
    source = """\
        import os

        import pytest

        os.environ["VLLM_USE_V1"] = "1"
        from vllm import LLM
        os.environ["VLLM_PORT"] = "1234"

        MODELS = get_models()


        @pytest.mark.parametrize("model", MODELS)
        @pytest.mark.skipif(not os.environ.get("VLLM_USE_V1"), reason="V0")
        def test_x(model, backend=default_backend()):
            assert LLM and backend


        if __name__ == "__main__":
            run()
        """
    main = ("the `__main__` block (line 18) when the module runs as a script, where no "
            "fixture runs")
    assert gpu008(source) == [
        (5, 1, "unsafe", "code that runs after it at import no longer sees the change, which "
                         "the fixture makes only when the module's first test starts: the "
                         "import of `vllm` (line 6), `get_models()` (line 9), "
                         f"`os.environ.get(\"VLLM_USE_V1\")` (line 13) and 2 more; {SCOPE}"),
        (7, 1, "unsafe", "code that runs after it at import no longer sees the change, which "
                         "the fixture makes only when the module's first test starts: "
                         f"`get_models()` (line 9), `default_backend()` (line 14), {main}; "
                         f"{SCOPE}"),
    ]


def test_building_a_record_class_of_the_module_reads_no_environment() -> None:
    """A ``NamedTuple``, a dataclass or a class of fields only runs no code of the module
    when built: the reason lists what may read the variable, as written."""
    source = """\
        import dataclasses
        import os
        from typing import NamedTuple

        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"


        class Case(NamedTuple):
            prompt: str


        @dataclasses.dataclass(frozen=True)
        class Point:
            x: int


        class Checked(NamedTuple):
            prompt: str

            def check(self):
                return os.environ["VLLM_WORKER_MULTIPROC_METHOD"]


        CASES = [Case("The capital"), Point(1), Checked(prompt="x"), load( "cases" )]


        def test_cases():
            assert CASES
        """
    assert gpu008(source) == [
        (5, 1, "unsafe", "code that runs after it at import no longer sees the change, which "
                         "the fixture makes only when the module's first test starts: "
                         "`Checked(prompt=\"x\")` (line 24), `load(\"cases\")` (line 24); "
                         f"{SCOPE}"),
    ]


def test_a_patcher_built_at_import_is_passed_over_and_calls_are_shown_compact() -> None:
    """``@patch.dict(os.environ, {...})`` only builds the patch at import (it applies when
    the test runs); a call written over several lines is shown on one, no space inside
    its brackets."""
    source = """\
        import os
        from unittest.mock import patch

        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"


        @patch.dict(
            os.environ, {"HCCL_BUFFSIZE": "1024"}
        )
        @wait_free(
            "npu"
        )
        def test_x():
            assert True
        """
    assert gpu008(source) == [
        (4, 1, "unsafe", "code that runs after it at import no longer sees the change, which "
                         "the fixture makes only when the module's first test starts: "
                         f"`wait_free(\"npu\")` (line 10); {SCOPE}"),
    ]


def test_module_level_change_with_nothing_after_it_names_the_scope_only() -> None:
    source = """\
        import os

        import pytest


        def test_x():
            assert os.environ["VLLM_USE_V1"] == "1"


        os.environ["VLLM_USE_V1"] = "1"
        """
    assert gpu008(source) == [(10, 1, "unsafe", SCOPE)]
    assert fixed(source, unsafe=True) == textwrap.dedent("""\
        import os

        import pytest


        def test_x():
            assert os.environ["VLLM_USE_V1"] == "1"


        @pytest.fixture(scope="module", autouse=True)
        def _module_environment():
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("VLLM_USE_V1", "1")
                yield
        """)


def test_module_level_change_without_a_fix() -> None:
    pytest_other = """\
        import os

        from helpers import pytest

        os.environ["VLLM_USE_V1"] = "1"
        """
    late_pytest = """\
        import os

        os.environ["VLLM_USE_V1"] = "1"
        MODEL = "m"
        import pytest as pt
        """
    uses_mp = """\
        import os

        mp = "1"
        os.environ["VLLM_USE_V1"] = mp
        """
    one_line = """\
        import os

        os.environ["VLLM_A"] = "1"; os.environ["VLLM_B"] = "1"
        """
    assert gpu008(pytest_other) == [
        (5, 1, "none", "`pytest` names something else here, and the fixture needs "
                       "`pytest.fixture`")]
    assert gpu008(late_pytest) == [
        (3, 1, "none", "`pytest` is imported after code that follows the change: the "
                       "fixture's decorator could not use it")]
    assert gpu008(uses_mp) == [
        (4, 1, "none", "a value uses `mp`, the name the fixture binds to its `MonkeyPatch`")]
    assert gpu008(one_line) == [
        (3, 1, "none", "it shares its line with another statement"),
        (3, 29, "none", "it shares its line with another statement")]


def test_module_level_changes_that_stay_keep_their_reason() -> None:
    source = """\
        import os

        os.environ["VLLM_LOGGING_LEVEL"] = "DEBUG"
        os.environ["VLLM_PORT"] = 1234
        if os.environ.get("CI"):
            os.environ["VLLM_LOGGING_LEVEL"] = "INFO"
        """
    assert gpu008(source) == [
        (3, 1, "none", "another change of `VLLM_LOGGING_LEVEL` at module level stays where it "
                       "is (it cannot move into a fixture): moving this one would change "
                       "their order"),
        (4, 1, "none", "`1234` is not a string: setting it raises `TypeError` today, where "
                       "`monkeypatch.setenv` would convert it (with a warning) and the test "
                       "would go on"),
        (6, 5, "none", "at module level the setting applies to the whole session; set it in "
                       "a fixture with `monkeypatch`, or in a conftest.py"),
    ]


def test_module_level_fixture_uses_the_alias_of_pytest() -> None:
    source = """\
        import os

        import pytest as pt

        os.environ["VLLM_USE_V1"] = "1"
        """
    assert fixed(source, unsafe=True) == textwrap.dedent("""\
        import pytest as pt


        @pt.fixture(scope="module", autouse=True)
        def _module_environment():
            with pt.MonkeyPatch.context() as mp:
                mp.setenv("VLLM_USE_V1", "1")
                yield
        """)
    assert fixed(source) == textwrap.dedent(source)


def test_module_level_change_names_the_main_block() -> None:
    source = """\
        import os

        os.environ["VLLM_USE_V1"] = "1"


        def test_x():
            assert True


        if __name__ == "__main__":
            test_x()
        """
    assert gpu008(source) == [
        (3, 1, "unsafe", "code that runs after it at import no longer sees the change, which "
                         "the fixture makes only when the module's first test starts: the "
                         "`__main__` block (line 10) when the module runs as a script, where "
                         f"no fixture runs; {SCOPE}")]


def test_module_level_comment_too_wide_for_the_fixture_stays_above_it() -> None:
    source = textwrap.dedent("""\
        import os

        import pytest

        # Spawn: fork hangs with the OMP pool.
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        # Plain.
        os.environ["VLLM_USE_V1"] = "1"
        """).encode()
    config = config_from_table({"line-length": 44}, "pyproject.toml")
    outcome = fix_source(source, "tests/test_x.py", config, unsafe=True)
    assert outcome.error is None and outcome.new_source is not None
    assert outcome.new_source.decode() == textwrap.dedent("""\
        import pytest


        # Spawn: fork hangs with the OMP pool.
        @pytest.fixture(scope="module", autouse=True)
        def _module_environment():
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv(
                    "VLLM_WORKER_MULTIPROC_METHOD",
                    "spawn",
                )
                # Plain.
                mp.setenv("VLLM_USE_V1", "1")
                yield
        """)


RESTORED = """\
    import os

    import pytest

    KEYS = ("VLLM_A", "VLLM_B")

    os.environ["VLLM_A"] = "0"


    @pytest.fixture
    def settings():
        os.environ["VLLM_B"] = "1"


    def test_a(settings):
        os.environ["VLLM_A"] = "1"
        os.environ.update(VLLM_A="2", VLLM_C="2")


    class TestInClass:
        def test_b(self):
            del os.environ["VLLM_B"]


    @pytest.fixture(autouse=True)
"""
#: the rows of every change in RESTORED: the module level's, the fixture's, the tests'
EVERY_CHANGE = [7, 12, 16, 17, 22]


def restored(fixture: str, decorator: str = "(autouse=True)") -> str:
    """RESTORED with ``fixture`` (dedented source) defined last, under ``decorator``."""
    return RESTORED.replace("(autouse=True)", decorator) + textwrap.indent(fixture, "    ")


@pytest.mark.parametrize(("fixture", "rows"), [
    # the teardown changes keys known only at run time: the variables the fixture names
    # (KEYS) are restored, in tests and function-scoped fixtures; the module level ran at
    # collection, before any test
    ("def env_cleanup():\n"
     "    saved = {k: os.environ.pop(k, None) for k in KEYS}\n"
     "    yield\n"
     "    for k, v in saved.items():\n"
     "        if v is not None:\n"
     "            os.environ[k] = v\n"
     "        else:\n"
     "            os.environ.pop(k, None)\n", [7, 17]),
    # monkeypatch restores what it set or deleted when the fixture ends
    ('def env(monkeypatch):\n    monkeypatch.delenv("VLLM_A", raising=False)\n    yield\n',
     [7, 12, 17, 22]),
    ("def env(monkeypatch):\n    for name in KEYS:\n"
     "        monkeypatch.delenv(name, raising=False)\n    yield\n", [7, 17]),
    ('def env():\n    with pytest.MonkeyPatch.context() as mp:\n        mp.setenv("VLLM_B", "0")\n'
     "        yield\n", [7, 16, 17]),
    # the whole environment saved and put back
    ("def env():\n    saved = dict(os.environ)\n    yield\n    os.environ.clear()\n"
     "    os.environ.update(saved)\n", [7]),
    # put back by name after the yield
    ('def env():\n    yield\n    os.environ.pop("VLLM_B", None)\n', [7, 16, 17]),
    # clearing alone restores nothing, nor does a monkeypatch the fixture does not own
    ("def env():\n    yield\n    os.environ.clear()\n", EVERY_CHANGE),
    ('def env(mp):\n    mp.delenv("VLLM_A", raising=False)\n    yield\n', EVERY_CHANGE),
])
def test_autouse_fixture_restores_the_variables_it_names(fixture: str, rows: list[int]) -> None:
    assert [(row, col) for row, col, *_ in gpu008(restored(fixture)) if row < 25] == \
        [(row, 1 if row == 7 else 9 if row == 22 else 5) for row in rows]
    # not autouse, or restoring only when the module ends: every change is reported
    for decorator in ("", '(autouse=True, scope="module")'):
        assert [row for row, *_ in gpu008(restored(fixture, decorator)) if row < 25] == \
            EVERY_CHANGE


def test_autouse_fixture_of_a_class_covers_only_its_class() -> None:
    source = """\
        import os

        import pytest


        class TestOne:
            @pytest.fixture(autouse=True)
            def env(self, monkeypatch):
                monkeypatch.delenv("VLLM_A", raising=False)

            def test_in(self):
                os.environ["VLLM_A"] = "1"


        def test_out():
            os.environ["VLLM_A"] = "1"
        """
    assert [(row, col) for row, col, *_ in gpu008(source)] == [(16, 5)]


@pytest.mark.parametrize(("fixture", "rows"), [
    # an autouse fixture that only removes variables puts back the default state each test
    # of its reach starts from, in its setup or its teardown
    ('@pytest.fixture(autouse=True)\ndef clean():\n    os.environ.pop("VLLM_A", None)\n'
     '    del os.environ["VLLM_B"]\n    yield\n', []),
    ('@pytest.fixture(autouse=True, scope="session")\ndef clean():\n'
     '    os.environ.pop("VLLM_A", None)\n', []),
    # any fixture that removes a variable after its yield undoes what the test leaked
    ('@pytest.fixture\ndef clean():\n    yield\n    os.environ.pop("VLLM_A", None)\n', []),
    # before the yield of a fixture only some tests request, the removal stays for the
    # tests after them
    ('@pytest.fixture\ndef clean():\n    os.environ.pop("VLLM_A", None)\n    yield\n', [(8, 5)]),
    # a fixture that also sets a variable, or keeps the removed value, is not clearing
    ('@pytest.fixture(autouse=True)\ndef clean():\n    os.environ.pop("VLLM_A", None)\n'
     '    os.environ["VLLM_B"] = "1"\n', [(8, 5), (9, 5)]),
    ('@pytest.fixture(autouse=True)\ndef clean():\n    os.environ.pop("VLLM_A", None)\n'
     '    os.environ.setdefault("MY_APP", "1")\n', [(8, 5)]),
    ('@pytest.fixture(autouse=True)\ndef clean():\n    os.environ.pop("VLLM_A", None)\n'
     '    saved = os.environ.pop("MY_APP", None)\n', [(8, 5)]),
    # `os.unsetenv` leaves `os.environ` as it was; a test's removal stays for later tests
    ('@pytest.fixture(autouse=True)\ndef clean():\n    os.unsetenv("VLLM_A")\n', [(8, 5)]),
    ('def test_x():\n    os.environ.pop("VLLM_A", None)\n', [(7, 5)]),
])
def test_fixture_clearing_a_leaked_variable(fixture: str, rows: list[tuple[int, int]]) -> None:
    source = "import os\n\nimport pytest\n\n\n" + fixture
    assert [(row, col) for row, col, *_ in gpu008(source)] == rows


@pytest.mark.parametrize("extra", [
    "# 环境变量在导入时设置\n",
    # a name that NFKC-normalises to the fixture's: the fixture takes the next one
    "_\N{FULLWIDTH LATIN SMALL LETTER M}odule_environment = 1\n",
], ids=["a non-ASCII comment", "an identifier normalising to the fixture's name"])
def test_a_module_level_write_in_a_non_ascii_module(extra: str) -> None:
    """A non-ASCII source may spell a name in characters that normalise to it: the fixture's
    name is chosen against the normalised source, and the choice ends."""
    import signal

    source = ("import os\n\n" + extra + 'os.environ["VLLM_USE_V1"] = "1"\n\n\n'
              "def test_a():\n    assert os.environ\n")

    def stuck(signum: int, frame: object) -> None:
        raise TimeoutError("choosing the fixture's name did not end")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(20)
    try:
        found = check_source(source.encode(), "tests/test_env.py", Config())
        fixed = fix_source(source.encode(), "tests/test_env.py", Config(), unsafe=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else None)
            for v in found] == [(source.splitlines().index(
                'os.environ["VLLM_USE_V1"] = "1"') + 1, "GPU008", "unsafe")]
    assert fixed.new_source is not None
    expected = "_module_environment_2" if not extra.startswith("#") else \
        "_module_environment"
    assert f"def {expected}(" in fixed.new_source.decode()


def test_a_fixture_putting_back_what_it_saved_is_not_reported() -> None:
    """A fixture that reads a variable before its ``yield`` and, after it, sets it back or
    removes it (the value it had: none) undoes what the code under test left behind: no
    leak (and ``monkeypatch`` would set the leaked value back after it). A fixture that also
    changes the variable before its ``yield`` is reported whole, its fix moving all of it to
    ``monkeypatch``."""
    restore = """\
        import os

        import pytest


        @pytest.fixture(autouse=True)
        def _restore_flag():
            saved = os.environ.get("VLLM_MY_FLAG")
            yield
            if saved is None:
                os.environ.pop("VLLM_MY_FLAG", None)
            else:
                os.environ["VLLM_MY_FLAG"] = saved
        """
    assert gpu008(restore) == []
    changed = restore.replace("            yield\n",
                              '            os.environ["VLLM_MY_FLAG"] = "1"\n            yield\n')
    assert [found[0] for found in gpu008(changed)] == [9, 12, 14]
    other = restore.replace('os.environ["VLLM_MY_FLAG"] = saved',
                            'os.environ["VLLM_MY_FLAG"] = "0"')
    assert [found[0] for found in gpu008(other)] == [13]


def test_a_saved_name_bound_to_something_else_is_not_what_was_read() -> None:
    """``saved = os.environ.get(X)`` then ``saved = "1"``: what the teardown sets back is
    not what was read, and leaks."""
    source = """\
        import os

        import pytest


        @pytest.fixture
        def restore_overwritten():
            saved = os.environ.get("VLLM_C")
            saved = "1"
            yield
            os.environ["VLLM_C"] = saved
        """
    assert [found[0] for found in gpu008(source)] == [11]


def test_xunit_functions_of_a_helper_module() -> None:
    """A module that is not a test module is looked at when it defines a module-level xunit
    function (a test module that imports it runs it around its tests): its set-up's leak
    is reported, with no fix; a helper module with none is not looked at."""
    source = """\
        import os


        def setup_module():
            os.environ["VLLM_USE_V1"] = "1"


        def prepare():
            os.environ["VLLM_USE_V1"] = "0"
        """
    assert gpu008(source, path="tests/utils.py") == [
        (5, 5, "none", "pytest passes no fixtures to `setup_module`: restore the variable "
                       "in `teardown_module`, or set it with `monkeypatch` in an autouse "
                       "fixture")]
    plain = source.replace("def setup_module", "def set_up")
    assert check_source(textwrap.dedent(plain).encode(), "tests/utils.py", Config()) == []


RESTORED_IN_FINALLY = '''\
import os


def test_restored_by_finally():
    saved = os.environ.get("VLLM_USE_V1")
    try:
        os.environ["VLLM_USE_V1"] = "1"
        assert os.environ["VLLM_USE_V1"] == "1"
    finally:
        if saved is None:
            del os.environ["VLLM_USE_V1"]
        else:
            os.environ["VLLM_USE_V1"] = saved


def test_written_right_before_the_try():
    saved = os.environ.get("VLLM_USE_V1")
    os.environ["VLLM_USE_V1"] = "1"
    try:
        assert os.environ["VLLM_USE_V1"] == "1"
    finally:
        os.environ.pop("VLLM_USE_V1", None)
        if saved is not None:
            os.environ["VLLM_USE_V1"] = saved


def test_not_saved():
    try:
        os.environ["VLLM_USE_V1"] = "1"
    finally:
        del os.environ["VLLM_USE_V1"]


def test_restored_to_another_value():
    saved = os.environ.get("VLLM_USE_V1")
    try:
        os.environ["VLLM_USE_V1"] = "1"
    finally:
        os.environ["VLLM_USE_V1"] = "0"
        assert saved


def test_a_statement_between():
    saved = os.environ.get("VLLM_USE_V1")
    os.environ["VLLM_USE_V1"] = "1"
    prepare()
    try:
        assert os.environ["VLLM_USE_V1"] == "1"
    finally:
        os.environ["VLLM_USE_V1"] = saved
'''


def test_a_try_whose_finally_puts_back_what_was_read_before_it() -> None:
    """A change inside a ``try``, or among the changes right before it, that its ``finally``
    puts back as the test read it (a name holding ``os.environ.get(X)``, or its removal) is
    no leak, nor are those restoring changes; a ``finally`` that removes a value nobody
    saved, sets another one, or a statement between the change and the ``try`` (which may
    raise before it) leave it reported."""
    assert [row for row, *_ in gpu008(RESTORED_IN_FINALLY)] == [29, 31, 37, 39, 45]


def test_a_requested_fixture_that_restores_covers_only_its_requesters() -> None:
    """A function-scoped fixture, not autouse, that puts the variable back after its
    ``yield`` restores it for the tests that request it; a test that does not request it
    still leaks its change."""
    source = '''\
        import os

        import pytest


        @pytest.fixture
        def cores():
            saved = os.environ.get("VLLM_X_CORES")
            yield
            if saved is None:
                os.environ.pop("VLLM_X_CORES", None)
            else:
                os.environ["VLLM_X_CORES"] = saved


        def test_requests(cores):
            os.environ["VLLM_X_CORES"] = "0-15"


        def test_does_not(other):
            os.environ["VLLM_X_CORES"] = "16-31"
        '''
    assert [row for row, *_ in gpu008(source)] == [21]

"""GPU004 manual-engine-cleanup: manual cleanup in a function that owns an engine.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu004_manual_engine_cleanup.py``) and
what else is particular to it: cleanup at teardown only, and ``del`` of the runner inside its
own with-block, with the exact reports, fixes and fixed source. Elsewhere: a test receiving an
engine from a conftest fixture in ``tests/test_conftest_fixtures.py``; its rewrites byte for
byte in ``tests/fixtures/fix/`` (``cleanup_*``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from rule_testing import PATH, example_tests, fix_reports, own_rules, reports, rule_class

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source

RULE = rule_class("GPU004")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


# --------------------------------------------------------------------------- teardown

def test_cleanup_between_uses_is_not_teardown() -> None:
    assert fix_reports("""\
        import gc
        import weakref

        import pytest
        import torch


        @pytest.fixture
        def llm(vllm_runner):
            with vllm_runner("m") as runner:
                yield weakref.proxy(runner.llm)


        def test_rounds(llm):
            llm.chat([])
            gc.collect()
            torch.cuda.empty_cache()
            llm.chat([])
            gc.collect()


        def test_loop(llm):
            for _ in range(2):
                llm.chat([])
                gc.collect()


        def test_proxy_alias(vllm_runner):
            with vllm_runner("m") as runner:
                engine = weakref.proxy(runner.llm)
                engine.generate([])
                gc.collect()
                engine.generate([])
            gc.collect()


        def test_before_any_engine(vllm_runner):
            gc.collect()
            with vllm_runner("m") as runner:
                assert runner.generate([])
        """) == [
        (19, "GPU004", "unsafe", "removing it changes when memory is freed within the test"),
        (34, "GPU004", "unsafe", "removing it changes when memory is freed within the test"),
    ]


def test_rewrite_keeps_a_cleanup_between_two_uses() -> None:
    source = textwrap.dedent("""\
        import gc

        from vllm import LLM


        def test_rounds():
            llm = LLM("m")
            first = llm.generate(["a"])
            gc.collect()
            second = llm.generate(["b"])
            gc.collect()
            assert first and second
        """).encode()
    assert [(v.location.row, v.code) for v in check_source(source, PATH, own_rules())] == [
        (7, "GPU001"), (11, "GPU004")]
    outcome = fix_source(source, PATH, own_rules())
    assert outcome.new_source == textwrap.dedent("""\
        import gc
        import weakref


        def test_rounds(vllm_runner):
            with vllm_runner("m") as runner:
                llm = weakref.proxy(runner.llm)
                first = llm.generate(["a"])
                gc.collect()
                second = llm.generate(["b"])
            assert first and second
        """).encode()


def test_teardown_after_yield_and_loop_that_rebuilds() -> None:
    assert reports("""\
        import gc

        import pytest
        from vllm import LLM


        @pytest.fixture
        def engine():
            e = LLM("x")
            yield e
            gc.collect()
            del e


        def test_loop_rebuild():
            for name in ["a", "b"]:
                llm = LLM(name)
                llm.generate([])
                del llm
                gc.collect()
        """) == [(9, 9, "GPU001"), (10, 11, "GPU002"), (11, 5, "GPU004"), (12, 5, "GPU004"),
                 (17, 15, "GPU001"), (19, 9, "GPU004"), (20, 9, "GPU004")]


# --------------------------------------------------------------------------- del in own with

DEL_IN_BLOCK = """\
    from tests.conftest import VllmRunner


    def test_generate():
        with VllmRunner("m") as vllm_model:
            assert vllm_model.generate(["a"])
            del vllm_model
            print("done")


    def test_fixture(vllm_runner):
        with vllm_runner("m") as m:
            assert m.generate(["a"])
            del m


    def test_used_again(vllm_runner):
        with vllm_runner("m") as m:
            assert m.generate(["a"])
            del m
        m = None
        assert m is None


    def test_in_a_loop():
        with VllmRunner("m") as m:
            for _ in range(2):
                assert m.generate(["a"])
                del m


    def test_closure():
        with VllmRunner("m") as m:
            later = lambda: m.generate(["a"])
            del m
            later()


    def test_after_block(vllm_runner):
        with vllm_runner("m") as m:
            assert m.generate(["a"])
        del m
    """


def test_del_of_the_runner_in_its_own_block() -> None:
    assert fix_reports(DEL_IN_BLOCK) == [
        (7, "GPU004", "safe", ""),
        (14, "GPU004", "safe", ""),
        (20, "GPU004", "none", "`m` is bound again after the `del` (line 21)"),
        (29, "GPU004", "none", "the `del` is in a loop inside the with-block: a later "
                               "iteration would fail on the deleted name"),
        (35, "GPU004", "none", "a closure captures the runner's name"),
        (42, "GPU004", "unsafe", "removing it changes when memory is freed within the test"),
    ]


def test_del_of_the_runner_fix_removes_it() -> None:
    source = textwrap.dedent(DEL_IN_BLOCK).encode()
    outcome = fix_source(source, PATH, own_rules())
    assert outcome.error is None
    assert outcome.new_source == source.replace(
        b"        del vllm_model\n", b"").replace(
        b'        assert m.generate(["a"])\n        del m\n\n\ndef test_used_again',
        b'        assert m.generate(["a"])\n\n\ndef test_used_again')
    assert [(v.location.row, v.code) for v in outcome.fixed] == [(7, "GPU004"),
                                                                  (14, "GPU004")]


# ------------------------------------------------------------- cleanup before a shutdown

TRY_BODY = """\
    import gc

    import torch
    from vllm import LLM


    def test_try_body():
        llm = LLM("m")
        try:
            assert llm.generate(["x"])
            gc.collect()
            torch.cuda.empty_cache()
        finally:
            llm.shutdown()


    def test_between_uses():
        llm = LLM("m")
        try:
            assert llm.generate(["x"])
            gc.collect()
            assert llm.generate(["y"])
        finally:
            llm.shutdown()
    """


def test_cleanup_after_the_last_use_in_a_try_whose_finally_shuts_down() -> None:
    """A cleanup call after the engine's last use, inside the ``try`` whose ``finally``
    shuts the engine down: the shutdown is not a use (it is the engine's cleanup), so the
    call is teardown, and the rewrite that removes the ``try/finally`` removes it too."""
    assert fix_reports(TRY_BODY) == [
        (8, "GPU001", "safe", ""),
        (9, "GPU003", "safe", ""),
        (11, "GPU004", "safe", ""),
        (12, "GPU004", "safe", ""),
        (18, "GPU001", "safe", ""),
        (19, "GPU003", "safe", ""),
    ]
    outcome = fix_source(textwrap.dedent(TRY_BODY).encode(), PATH, own_rules())
    assert outcome.error is None
    assert outcome.new_source == textwrap.dedent("""\
        import gc
        import weakref


        def test_try_body(vllm_runner):
            with vllm_runner("m") as runner:
                llm = weakref.proxy(runner.llm)
                assert llm.generate(["x"])


        def test_between_uses(vllm_runner):
            with vllm_runner("m") as runner:
                llm = weakref.proxy(runner.llm)
                assert llm.generate(["x"])
                gc.collect()
                assert llm.generate(["y"])
        """).encode()
    assert sorted((v.location.row, v.code) for v in outcome.fixed) == [
        (8, "GPU001"), (9, "GPU003"), (11, "GPU004"), (12, "GPU004"), (18, "GPU001"),
        (19, "GPU003")]


# ------------------------------------------------------------------ runner variants

DP_CONFTEST = """\
from vllm import LLM
from vllm.distributed import cleanup_dist_env_and_memory


class VllmRunner:
    def __init__(self, model, **kwargs):
        self.model = LLM(model, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        del self.model


class DPVllmRunner(VllmRunner):
    pass


class HfRunner:
    def __init__(self, model):
        self.model = model

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        del self.model
        cleanup_dist_env_and_memory()
"""

DP_TEST = """\
from tests.conftest import DPVllmRunner, HfRunner, VllmRunner


def test_dp():
    with DPVllmRunner("m", data_parallel_size=2) as vllm_model:
        assert vllm_model.generate_greedy(["a"], 4)
        del vllm_model


def test_plain():
    with VllmRunner("m") as vllm_model:
        assert vllm_model.generate_greedy(["a"], 4)
        del vllm_model
    with HfRunner("m") as hf_runner:
        assert hf_runner.model
        del hf_runner
"""


@pytest.mark.parametrize("test_body", [DP_TEST, DP_TEST.split("\n\n\ndef test_plain")[0] + "\n"])
def test_del_inside_the_block_of_a_runner_variant_a_conftest_defines(
        tmp_path: Path, test_body: str) -> None:
    """``DPVllmRunner(VllmRunner)`` in a conftest (vllm-ascend's data-parallel runner) is a
    runner class too, unconfigured: ``del`` of it inside its own block is reported and
    removed, also in a module that names no configured runner class (the prefilter reads
    the conftest's runner classes). vLLM's ``HfRunner``, a runner only by its ``__exit__``
    (it holds a Hugging Face model, not an engine), is not."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(DP_CONFTEST)
    test = tmp_path / "tests" / "test_dp.py"
    test.write_text(test_body)
    result = check_paths([str(test)], own_rules(), cache=False)
    expected = [(7, 9, "GPU004")] + ([(13, 9, "GPU004")] if "test_plain" in test_body else [])
    assert [(v.location.row, v.location.column, v.code)
            for v in result.violations] == expected
    fixed = check_paths([str(test)], own_rules(), cache=False, fix=True)
    assert [v.code for v in fixed.violations] == []
    assert test.read_text() == test_body.replace("        del vllm_model\n", "")
    assert ("del hf_runner" in test.read_text()) is ("test_plain" in test_body)


# --------------------------------------------------------------------------- factories

FACTORY_REASON = (
    "`setup_engine()` is public: a module that imports it would get a context manager instead "
    "of an engine (`--fix` rewrites one module at a time and does not change callers in other "
    "modules)")


def test_an_engine_from_a_factory_helper_is_owned_by_its_caller() -> None:
    assert fix_reports("""\
        import gc

        import vllm


        def setup_engine(num_loras, tp=1) -> vllm.LLM:
            return vllm.LLM(model="m", enable_lora=True, max_loras=num_loras,
                            tensor_parallel_size=tp)


        def test_single_lora(tp):
            llm = setup_engine(1, tp)
            try:
                assert llm.generate(["a"])
            finally:
                llm.llm_engine.engine_core.shutdown()
                del llm
                gc.collect()


        def test_guarded():
            engine = None
            try:
                engine = setup_engine(2)
                assert engine.generate(["a"])
            finally:
                if engine is not None:
                    engine.llm_engine.engine_core.shutdown()


        def test_alias():
            llm = setup_engine(2)
            same = llm
            assert same.generate(["a"])
            del llm, same
    """) == [
        (7, "GPU001", "unsafe", FACTORY_REASON),
        (13, "GPU003", "unsafe", FACTORY_REASON),
        (23, "GPU003", "unsafe", FACTORY_REASON),
        (35, "GPU004", "unsafe", FACTORY_REASON),
    ]


RETURNS_A_CONFIG_VALUE = """\
    import gc

    from vllm import LLM


    def max_num_seqs(model):
        llm = LLM(model)
        try:
            return llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
        finally:
            del llm
            gc.collect()


    def test_default():
        seqs = max_num_seqs("m")
        assert seqs == 256
        gc.collect()
"""


def test_a_helper_that_returns_a_value_read_from_the_engine_is_not_a_factory() -> None:
    assert fix_reports(RETURNS_A_CONFIG_VALUE) == [
        (7, "GPU001", "safe", ""),
        (8, "GPU003", "safe", ""),
    ]
    outcome = fix_source(textwrap.dedent(RETURNS_A_CONFIG_VALUE).encode(), PATH, own_rules())
    assert outcome.error is None
    assert outcome.new_source == textwrap.dedent("""\
        import gc
        import weakref

        from lint_gpu_tests.runtime import VllmRunner


        def max_num_seqs(model):
            with VllmRunner(model) as runner:
                llm = weakref.proxy(runner.llm)
                return llm.llm_engine.vllm_config.scheduler_config.max_num_seqs


        def test_default():
            seqs = max_num_seqs("m")
            assert seqs == 256
            gc.collect()
    """).encode()


# --------------------------------------------------------------------------- xunit

def test_xunit_teardowns_of_an_engine_stored_by_their_setup() -> None:
    """A unittest class, a pytest class with a per-test setup and a module setup storing a
    global: each teardown's cleanup of that engine is reported. The class and the module
    whose teardown's cleanup is a run of its own are fixed with their set-up's GPU001; the
    teardown deleting the engine with another value has no fix, the reason saying why."""
    mixed = ("`teardown_method()` deletes `self.llm` together with other values (line 40): "
             "that statement is not the engine's cleanup alone")
    assert fix_reports("""\
        import gc
        import unittest

        import torch
        from vllm import LLM

        llm = None


        def setup_module():
            global llm
            llm = LLM("m")


        def teardown_module():
            global llm
            del llm
            torch.cuda.empty_cache()


        class TestCase(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                cls.engine = LLM("m")

            @classmethod
            def tearDownClass(cls):
                cls.engine.shutdown()
                cls.other = None

            def test_one(self):
                assert self.engine.generate(["a"])


        class TestPerTest:
            def setup_method(self):
                self.llm = LLM("m")

            def teardown_method(self):
                del self.llm, self.tokens
                gc.collect()

            def test_two(self):
                assert self.llm.generate(["a"])
        """) == [
        (12, "GPU001", "safe", ""),
        (17, "GPU004", "safe", ""),
        (18, "GPU004", "safe", ""),
        (24, "GPU001", "safe", ""),
        (28, "GPU004", "safe", ""),
        (37, "GPU001", "none", mixed),
        (40, "GPU004", "none", mixed),
        (41, "GPU004", "none", mixed),
    ]


XUNIT = """\
import gc
import unittest

import torch
from vllm import LLM, SamplingParams


class TestGenerate:
    @classmethod
    def setup_class(cls):
        cls.llm = LLM("facebook/opt-125m", max_model_len=256, enforce_eager=True)
        cls.params = SamplingParams(temperature=0.0)

    @classmethod
    def teardown_class(cls):
        del cls.llm
        gc.collect()
        torch.cuda.empty_cache()
        cls.params = None

    def test_generate(self):
        assert self.llm.generate(["a"], self.params)


class TestCase(unittest.TestCase):
    def setUp(self):
        self.engine = LLM("m")

    def tearDown(self):
        self.engine.llm_engine.engine_core.shutdown()
        del self.engine

    def test_identity(self):
        assert type(self.engine) is LLM
"""


def test_an_xunit_set_up_hands_its_engine_to_the_runner_on_a_stack() -> None:
    """The set-up enters the runner class on an ``ExitStack`` stored beside the engine's
    attribute, which becomes the engine's proxy; the teardown's run of cleanup becomes the
    stack's ``close()``, where the cleanup began. Safe for attribute uses, unsafe where a
    test checks the attribute's identity."""
    identity = "`type()` on `self.engine` sees a `weakref.proxy`"
    assert fix_reports(XUNIT) == [
        (11, "GPU001", "safe", ""), (16, "GPU004", "safe", ""), (17, "GPU004", "safe", ""),
        (18, "GPU004", "safe", ""), (27, "GPU001", "unsafe", identity),
        (30, "GPU004", "unsafe", identity), (31, "GPU004", "unsafe", identity)]
    outcome = fix_source(XUNIT.encode(), PATH, own_rules(), unsafe=True)
    assert outcome.new_source.decode() == """\
import contextlib
import unittest
import weakref

from lint_gpu_tests.runtime import VllmRunner
from vllm import LLM, SamplingParams


class TestGenerate:
    @classmethod
    def setup_class(cls):
        cls._engine_stack = contextlib.ExitStack()
        cls.llm = weakref.proxy(cls._engine_stack.enter_context(VllmRunner(
            "facebook/opt-125m",
            max_model_len=256,
            enforce_eager=True,
        )).llm)
        cls.params = SamplingParams(temperature=0.0)

    @classmethod
    def teardown_class(cls):
        cls._engine_stack.close()
        cls.params = None

    def test_generate(self):
        assert self.llm.generate(["a"], self.params)


class TestCase(unittest.TestCase):
    def setUp(self):
        self._engine_stack = contextlib.ExitStack()
        self.engine = weakref.proxy(self._engine_stack.enter_context(VllmRunner(
            "m",
        )).llm)

    def tearDown(self):
        self._engine_stack.close()

    def test_identity(self):
        assert type(self.engine) is LLM
"""


@pytest.mark.parametrize("package", [False, True])
def test_an_xunit_set_ups_import_of_vllms_runner_class_a_plain_pytest_run_may_miss(
        tmp_path: Path, package: bool) -> None:
    """With ``target = "vllm"`` the set-up's stack enters vLLM's runner class, imported from
    ``tests.conftest``: where a plain ``pytest`` run cannot import ``tests`` (no
    ``__init__.py``, nothing else putting the project root on ``sys.path``) the fix is
    unsafe and says so."""
    (tmp_path / "pyproject.toml").write_text("[tool.gpu-test-lint]\ntarget = 'vllm'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        "class VllmRunner:\n    def __init__(self, model_name, **kwargs):\n        pass\n")
    if package:
        (tmp_path / "tests" / "__init__.py").write_text("")
    module = tmp_path / "tests" / "test_case.py"
    module.write_text(XUNIT.split("\n\nclass TestCase")[0] + "\n")
    unimportable = ("`from tests.conftest import VllmRunner` imports only with the project "
                    "root on `sys.path`: tests/ has no `__init__.py`, the root no "
                    "`conftest.py` and pytest's `pythonpath` does not name it, so a plain "
                    "`pytest` run fails to import the module (`python -m pytest` imports it)")
    found = check_source(module.read_bytes(), str(module),
                         own_rules(Config(target="vllm", root=str(tmp_path))))
    expected = ("safe", "") if package else ("unsafe", unimportable)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none",
             v.fix.reason if v.fix else "") for v in found] == [
        (11, "GPU001", *expected), (16, "GPU004", *expected), (17, "GPU004", *expected),
        (18, "GPU004", *expected)]


# --------------------------------------------------------------------------- cleanup helpers

CLEANUP_HELPER = """\
import gc

from vllm import LLM


def _shutdown(llm):
    \"\"\"Shut the engine down.\"\"\"
    if llm is not None:
        llm.shutdown()
    del llm
    gc.collect()


def _report(llm):
    print(llm)
    gc.collect()


def test_after_use():
    llm = LLM("m")
    assert llm.generate(["a"])
    _report(llm)
    _shutdown(llm)


def test_in_finally():
    llm = LLM("m")
    try:
        assert llm.generate(["a"])
    finally:
        _shutdown(llm)
"""


def test_a_call_of_the_modules_cleanup_helper_is_manual_cleanup() -> None:
    """``_shutdown`` only cleans up what it is given: its call is GPU004 (in a ``finally``,
    the ``try`` is GPU003), removed with the rewrite; ``_report`` does more, so its call
    stays and is not reported."""
    assert fix_reports(CLEANUP_HELPER) == [
        (20, "GPU001", "safe", ""),
        (23, "GPU004", "safe", ""),
        (27, "GPU001", "safe", ""),
        (28, "GPU003", "safe", ""),
    ]
    assert fix_source(CLEANUP_HELPER.encode(), PATH, own_rules()).new_source.decode() == \
        CLEANUP_HELPER.replace("""\
def test_after_use():
    llm = LLM("m")
    assert llm.generate(["a"])
    _report(llm)
    _shutdown(llm)


def test_in_finally():
    llm = LLM("m")
    try:
        assert llm.generate(["a"])
    finally:
        _shutdown(llm)
""", """\
def test_after_use(vllm_runner):
    with vllm_runner("m") as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.generate(["a"])
        _report(llm)


def test_in_finally(vllm_runner):
    with vllm_runner("m") as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.generate(["a"])
""").replace("import gc\n\nfrom vllm import LLM\n", "import gc\nimport weakref\n")


TUPLE_FACTORY = """\
import gc

from vllm import LLM, SamplingParams

def _setup_llm(model):
    llm = LLM(model)
    return llm, SamplingParams(temperature=0.0)

def _prompts_and_llm(model):
    return ["a"], LLM(model)

def test_unpacked():
    llm, params = _setup_llm("m")
    assert llm.generate(["a"], params)
    del llm
    gc.collect()

def test_in_finally():
    llm, params = _setup_llm("m")
    try:
        assert llm.generate(["a"], params)
    finally:
        llm.llm_engine.engine_core.shutdown()
    assert params.temperature == 0.0

def test_engine_second():
    prompts, llm = _prompts_and_llm("m")
    assert llm.generate(prompts)
    del llm
"""


def test_an_engine_a_helper_returns_in_a_tuple() -> None:
    """The test that unpacks the tuple owns the engine: its cleanup is GPU004, its
    shutdown ``try`` GPU003. The helper and its calls are one fix, as for a helper returning
    the engine alone: the helper yields the tuple with the engine's proxy in its place
    (bound to its name at the top of the block, or built in the tuple), each call binds the
    same names (``with _setup_llm("m") as (llm, params):``), and the other values outlive
    the block as they outlived the engine."""
    assert [r[:3] for r in fix_reports(TUPLE_FACTORY)] == [
        (6, "GPU001", "safe"), (10, "GPU001", "safe"), (15, "GPU004", "safe"),
        (16, "GPU004", "safe"), (20, "GPU003", "safe"), (29, "GPU004", "safe")]
    outcome = fix_source(TUPLE_FACTORY.encode(), PATH, own_rules())
    assert outcome.new_source.decode() == """\
import contextlib
import weakref

from lint_gpu_tests.runtime import VllmRunner
from vllm import SamplingParams

@contextlib.contextmanager
def _setup_llm(model):
    with VllmRunner(model) as runner:
        llm = weakref.proxy(runner.llm)
        yield llm, SamplingParams(temperature=0.0)

@contextlib.contextmanager
def _prompts_and_llm(model):
    with VllmRunner(model) as runner:
        yield ["a"], weakref.proxy(runner.llm)

def test_unpacked():
    with _setup_llm("m") as (llm, params):
        assert llm.generate(["a"], params)

def test_in_finally():
    with _setup_llm("m") as (llm, params):
        assert llm.generate(["a"], params)
    assert params.temperature == 0.0

def test_engine_second():
    with _prompts_and_llm("m") as (prompts, llm):
        assert llm.generate(prompts)
"""


@pytest.mark.parametrize(("call", "why"), [
    ("*rest, = _setup_llm(\"m\")",
     "the call of `_setup_llm()` in `test_other()` (line 15) does not unpack the tuple it "
     "returns into names (`llm, params = ...`), so the with-statement the fix writes would "
     "bind the tuple where the engine's proxy goes"),
    ("pair = _setup_llm(\"m\")",
     "the call of `_setup_llm()` in `test_other()` (line 15) does not unpack the tuple it "
     "returns into names (`llm, params = ...`), so the with-statement the fix writes would "
     "bind the tuple where the engine's proxy goes"),
])
def test_a_tuple_helper_with_a_call_not_unpacked_into_names_has_no_fix(
        call: str, why: str) -> None:
    """A call whose tuple is kept whole or starred leaves the unit without a fix, the reason
    naming that call, on the helper's engine and on every cleanup the unit would remove."""
    source = TUPLE_FACTORY.split("def _prompts_and_llm")[0] + (
        "def test_unpacked():\n    llm, params = _setup_llm(\"m\")\n"
        "    assert llm.generate([\"a\"], params)\n    del llm\n\n"
        f"def test_other():\n    {call}\n")
    assert fix_reports(source) == [(6, "GPU001", "none", why), (12, "GPU004", "none", why)]


@pytest.mark.parametrize(("helper", "why"), [
    ("    llm = LLM(model)\n    return llm.get_tokenizer(), llm\n",
     "`_setup_llm()` returns a tuple that holds `llm` other than once as an element of its "
     "own (or holds a starred value): the proxy the fix yields would not replace every "
     "reference to the engine"),
    ("    return (*[\"a\"], LLM(model))\n",
     "`_setup_llm()` builds its engine in a tuple other than as an element of the tuple it "
     "returns (`return LLM(...), params`), or of one with a starred value"),
])
def test_tuple_helpers_whose_engine_the_proxy_would_not_replace(helper: str, why: str) -> None:
    """A tuple that refers to the engine in another element too keeps it from the proxy:
    no fix, the reason saying which."""
    source = ("import gc\n\nfrom vllm import LLM\n\n\ndef _setup_llm(model):\n" + helper
              + "\n\ndef test_unpacked():\n    tok, llm = _setup_llm(\"m\")\n"
              "    assert llm.generate([\"a\"])\n    del llm\n")
    assert {(code, fix, reason) for _, code, fix, reason in fix_reports(source)
            if code == "GPU004"} == {("GPU004", "none", why)}


def test_the_engines_own_shutdown_at_teardown() -> None:
    source = """\
        from vllm import LLM


        def test_generate():
            llm = LLM("m")
            assert llm.generate(["a"])
            llm.shutdown()
        """
    assert fix_reports(source) == [(5, "GPU001", "safe", ""), (7, "GPU004", "safe", "")]
    assert fix_source(textwrap.dedent(source).encode(), PATH, own_rules()).new_source == (
        b"import weakref\n\n\ndef test_generate(vllm_runner):\n"
        b"    with vllm_runner(\"m\") as runner:\n        llm = weakref.proxy(runner.llm)\n"
        b"        assert llm.generate([\"a\"])\n")


def test_a_standard_module_only_the_removed_teardown_used_goes_with_it() -> None:
    """``traceback`` was read only in the guarded shutdown the rewrite removes: its import
    goes too (pyflakes would report it), while a plugin's import stays (importing one may
    register a device)."""
    source = textwrap.dedent("""\
        import traceback

        import vllm_plugin
        from vllm import LLM


        def test_generate():
            llm = LLM("m")
            try:
                assert llm.generate(["a"])
            finally:
                try:
                    llm.llm_engine.engine_core.shutdown()
                except Exception:
                    traceback.print_exc()
                    vllm_plugin.report()
        """)
    fixed = fix_source(source.encode(), PATH, own_rules()).new_source
    assert fixed is not None
    assert fixed.decode().startswith("import weakref\n\nimport vllm_plugin\n\n\n")



def test_an_engine_a_method_of_the_class_returns() -> None:
    """A method of the test's class (its own, or inherited from a class of the module) that
    builds and returns an engine is a factory: the method that calls it on ``self`` owns the
    engine (GPU004). A property and a call on another object are not factory calls; a
    subclass's own method of the same name leaves the unit without a fix (a call may reach
    either), and the reason says so."""
    why = ("`TestOverride` defines a `_make()` of its own (line 26): a call that reaches it "
           "would get an engine where the fix enters a context manager")
    assert fix_reports("""\
        import gc

        from vllm import LLM

        class Base:
            def _make(self, model):
                llm = LLM(model)
                return llm

            @property
            def cached(self):
                return LLM("m")

        class TestOwn(Base):
            def test_inherited(self):
                llm = self._make("m")
                assert llm.generate(["a"])
                del llm
                gc.collect()

            def test_property(self):
                llm = self.cached
                del llm

        class TestOverride(Base):
            def _make(self, model):
                return model

            def test_overridden(self):
                llm = self._make("m")
                del llm
                gc.collect()

        class TestOther:
            def test_other_object(self, helper):
                llm = helper._make("m")
                del llm
        """) == [
        (7, "GPU001", "none", why),
        (12, "GPU001", "none", "the engine is returned to the caller, so it must outlive "
                               "this function"),
        (18, "GPU004", "none", why),
        (19, "GPU004", "none", why),
    ]


METHOD_FACTORY = """\
import gc

from vllm import LLM


class EngineTests:
    def _make_llm(self, num_loras):
        return LLM("facebook/opt-125m", enable_lora=True, max_loras=num_loras)


class TestLora(EngineTests):
    def test_single_lora(self):
        llm = self._make_llm(1)
        assert llm.generate(["hi"])
        del llm
        gc.collect()

    def test_in_finally(self):
        llm = self._make_llm(2)
        try:
            assert llm.generate(["hi"])
        finally:
            llm.llm_engine.engine_core.shutdown()
"""

METHOD_FACTORY_FIXED = """\
import contextlib
import weakref

from lint_gpu_tests.runtime import VllmRunner


class EngineTests:
    @contextlib.contextmanager
    def _make_llm(self, num_loras):
        with VllmRunner(
            "facebook/opt-125m", enable_lora=True, max_loras=num_loras
        ) as runner:
            yield weakref.proxy(runner.llm)


class TestLora(EngineTests):
    def test_single_lora(self):
        with self._make_llm(1) as llm:
            assert llm.generate(["hi"])

    def test_in_finally(self):
        with self._make_llm(2) as llm:
            assert llm.generate(["hi"])
"""


def test_a_factory_method_and_its_calls_are_one_fix(tmp_path: Path) -> None:
    """The factory method becomes a context manager and each call on ``self`` a with-block,
    one fix with the method's GPU001: safe in a run over a tree where no file imports the
    module; checked alone, or where another module of the tree imports it (a class there
    may inherit the method), no fix, and the reason says so."""
    why = ("a class of another module may inherit `_make_llm()` from `EngineTests` and would "
           "get a context manager instead of an engine: the method is fixed only in a run "
           "over its tree in which no file imports this module")
    assert fix_reports(METHOD_FACTORY) == [
        (8, "GPU001", "none", why), (15, "GPU004", "none", why),
        (16, "GPU004", "none", why), (20, "GPU003", "none", why)]
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests" / "test_lora.py"
    test.write_text(METHOD_FACTORY)
    importer = tmp_path / "tests" / "test_more.py"
    importer.write_text("from tests.test_lora import EngineTests\n\n\n"
                        "class TestMore(EngineTests):\n    pass\n")
    result = check_paths([str(test.parent)], own_rules(), cache=False)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none")
            for v in result.violations] == [(8, "GPU001", "none"), (15, "GPU004", "none"),
                                             (16, "GPU004", "none"), (20, "GPU003", "none")]
    importer.unlink()
    result = check_paths([str(test.parent)], own_rules(), cache=False)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none")
            for v in result.violations] == [(8, "GPU001", "safe"), (15, "GPU004", "safe"),
                                             (16, "GPU004", "safe"), (20, "GPU003", "safe")]
    fixed = check_paths([str(test.parent)], own_rules(), cache=False, fix=True)
    assert fixed.violations == []
    assert test.read_text() == METHOD_FACTORY_FIXED


def test_factory_methods_of_unrelated_classes_are_fixed_each(tmp_path: Path) -> None:
    """Two unrelated classes with a factory method of the same name: neither blocks the
    other (no call of one class reaches the other's method); a static method gets no fix,
    its reason says why."""
    source = textwrap.dedent("""\
        import gc

        from vllm import LLM


        class TestA:
            def _make_llm(self):
                return LLM("a")

            def test_a(self):
                llm = self._make_llm()
                assert llm.generate(["x"])
                del llm
                gc.collect()


        class TestB:
            def _make_llm(self):
                return LLM("b")

            def test_b(self):
                llm = self._make_llm()
                del llm


        class TestS:
            @staticmethod
            def _build():
                return LLM("s")

            def test_s(self):
                llm = self._build()
                del llm
        """)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests" / "test_classes.py"
    test.write_text(source)
    static = ("`_build()` is a static or class method: the fix makes only plain methods "
              "called on `self` context managers")
    result = check_paths([str(test.parent)], own_rules(), cache=False)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none",
             v.fix.reason if v.fix else "") for v in result.violations] == [
        (8, "GPU001", "safe", ""), (13, "GPU004", "safe", ""), (14, "GPU004", "safe", ""),
        (19, "GPU001", "safe", ""), (23, "GPU004", "safe", ""),
        (29, "GPU001", "none", static), (33, "GPU004", "none", static)]


CLASS_CALLS = """\
import gc

from vllm import LLM


class TestS:
    @staticmethod
    def _make(tp):
        return LLM("m", tensor_parallel_size=tp)

    def _build(self):
        return LLM("m")

    def test_a(self):
        llm = TestS._make(1)
        del llm
        gc.collect()

    def test_b(self):
        llm = TestS._build(self)
        assert llm.generate(["x"])
        del llm
        gc.collect()


def test_c():
    llm = TestS._make(2)
    try:
        assert llm.generate(["x"])
    finally:
        llm.llm_engine.engine_core.shutdown()
"""


def test_a_factory_method_called_on_its_class_gives_the_caller_its_engine(
        tmp_path: Path) -> None:
    """``TestS._make(...)`` (a static method, from a method or a test function) and
    ``TestS._build(self)`` (a plain method) hand the caller the engine the method builds, as
    ``self._build()`` does: the caller's cleanup is GPU004, its shutdown ``try`` GPU003. The
    plain method's unit takes its call on the class like a call on ``self``; the static
    method's has no fix, and the reason says why."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests" / "test_class_calls.py"
    test.write_text(CLASS_CALLS)
    static = ("`_make()` is a static or class method: the fix makes only plain methods "
              "called on `self` context managers")
    result = check_paths([str(test.parent)], own_rules(), cache=False)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none",
             v.fix.reason if v.fix else "") for v in result.violations] == [
        (9, "GPU001", "none", static), (12, "GPU001", "safe", ""),
        (16, "GPU004", "none", static), (17, "GPU004", "none", static),
        (22, "GPU004", "safe", ""), (23, "GPU004", "safe", ""),
        (28, "GPU003", "none", static)]
    fixed = check_paths([str(test.parent)], own_rules(), cache=False, fix=True)
    assert [(v.location.row, v.code) for v in fixed.violations] == [
        (12, "GPU001"), (21, "GPU004"), (22, "GPU004"), (31, "GPU003")]
    assert test.read_text().split("\n\n\n")[1:3] == ["""\
class TestS:
    @staticmethod
    def _make(tp):
        return LLM("m", tensor_parallel_size=tp)

    @contextlib.contextmanager
    def _build(self):
        with VllmRunner("m") as runner:
            yield weakref.proxy(runner.llm)

    def test_a(self):
        llm = TestS._make(1)
        del llm
        gc.collect()

    def test_b(self):
        with TestS._build(self) as llm:
            assert llm.generate(["x"])""", """\
def test_c():
    llm = TestS._make(2)
    try:
        assert llm.generate(["x"])
    finally:
        llm.llm_engine.engine_core.shutdown()
"""]


INSTANCE_CALLS = """\
import gc

from vllm import LLM


class EngineFactory:
    def create(self, tp=1):
        return LLM("m", tensor_parallel_size=tp)


def test_instance():
    factory = EngineFactory()
    llm = factory.create(2)
    assert llm.generate(["x"])
    del llm
    gc.collect()


def test_made_for_the_call():
    llm = EngineFactory().create()
    assert llm.generate(["x"])
    del llm
"""


def test_a_factory_method_called_on_an_instance_of_its_class(tmp_path: Path) -> None:
    """``factory = EngineFactory(); llm = factory.create(...)``, and ``EngineFactory().create()``:
    the function owns the engine the method builds (GPU004), and the method's unit rewrites
    the call as it does a call on ``self``."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests" / "test_instance_calls.py"
    test.write_text(INSTANCE_CALLS)
    result = check_paths([str(test.parent)], own_rules(), cache=False)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none")
            for v in result.violations] == [(8, "GPU001", "safe"), (15, "GPU004", "safe"),
                                             (16, "GPU004", "safe"), (22, "GPU004", "safe")]
    fixed = check_paths([str(test.parent)], own_rules(), cache=False, fix=True)
    assert fixed.violations == []
    assert test.read_text() == """\
import contextlib
import weakref

from lint_gpu_tests.runtime import VllmRunner


class EngineFactory:
    @contextlib.contextmanager
    def create(self, tp=1):
        with VllmRunner("m", tensor_parallel_size=tp) as runner:
            yield weakref.proxy(runner.llm)


def test_instance():
    factory = EngineFactory()
    with factory.create(2) as llm:
        assert llm.generate(["x"])


def test_made_for_the_call():
    with EngineFactory().create() as llm:
        assert llm.generate(["x"])
"""


def test_a_factory_method_inherited_from_a_class_of_another_module(tmp_path: Path) -> None:
    """A test class that inherits a factory method from a class of another module of the
    tree (``class TestLora(EngineMixin)``, directly or through a base of its own module)
    owns the engine each call on ``self`` gives it: its cleanup is GPU004, its shutdown
    ``try`` GPU003, without a fix, and the reason names the class that defines the method;
    so does a function calling it on an instance of that class, bound once in the function
    or at module level. A class that defines a method of that name itself, a mixin method
    that returns no engine, a name bound twice and a parameter give nothing."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "utils.py").write_text(textwrap.dedent("""\
        from vllm import LLM


        class EngineMixin:
            def _make_llm(self, tp=1):
                return LLM("m", tensor_parallel_size=tp)

            def _size(self):
                return 1
        """))
    (tests / "test_mixin.py").write_text(textwrap.dedent("""\
        import gc

        from tests import utils
        from tests.utils import EngineMixin


        class Base(utils.EngineMixin):
            pass


        class TestDirect(EngineMixin):
            def test_a(self):
                llm = self._make_llm(1)
                assert llm.generate(["x"])
                del llm
                gc.collect()


        class TestThrough(Base):
            def test_b(self):
                llm = self._make_llm(2)
                try:
                    assert llm.generate(["x"])
                finally:
                    llm.llm_engine.engine_core.shutdown()

            def test_size(self):
                n = self._size()
                del n
                gc.collect()


        class TestOwn(EngineMixin):
            def _make_llm(self, tp=1):
                return tp

            def test_c(self):
                x = self._make_llm(1)
                del x
                gc.collect()


        FACTORY = EngineMixin()


        def test_instance():
            maker = EngineMixin()
            llm = maker._make_llm(1)
            del llm
            gc.collect()


        def test_module_instance():
            llm = FACTORY._make_llm(2)
            del llm


        def test_rebound(flag):
            maker = EngineMixin()
            if flag:
                maker = object()
            llm = maker._make_llm(1)
            del llm


        def test_parameter(maker):
            llm = maker._make_llm(1)
            del llm
        """))
    why = ("the engine comes from `{spelled}()`, a method of `EngineMixin` (its own or one "
           "it inherits), a class defined in `tests/utils.py` (line 4): no fix rewrites a "
           "method of a class of another "
           "module together with its callers yet (`_make_llm()` would have to become a "
           "context manager for every class of the tree that inherits it)")
    result = check_paths([str(tests)], own_rules(), cache=False)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else "none",
             v.fix.reason if v.fix else "") for v in result.violations] == [
        (15, "GPU004", "none", why.format(spelled="self._make_llm")),
        (16, "GPU004", "none", why.format(spelled="self._make_llm")),
        (22, "GPU003", "none", why.format(spelled="self._make_llm")),
        (49, "GPU004", "none", why.format(spelled="maker._make_llm")),
        (50, "GPU004", "none", why.format(spelled="maker._make_llm")),
        (55, "GPU004", "none", why.format(spelled="FACTORY._make_llm"))]


def test_an_engine_a_caching_function_returns_belongs_to_its_cache() -> None:
    """A function or method whose decorator caches what it returns (``functools.cache``,
    ``functools.lru_cache(...)``, ``functools.cached_property``) is no factory: the engine it
    returns is the cache's, shared by every caller, so a caller's ``del`` and
    ``gc.collect()`` are not the cleanup of an engine it owns. The engine's GPU001 says
    why it has no fix."""
    why = ("`{name}()` caches the engine it returns (`@{cache}`): the engine lives as long "
           "as that cache, shared by every caller, and no fix rewrites a cached engine")
    assert fix_reports("""\
        import functools
        import gc

        from vllm import LLM

        @functools.lru_cache(maxsize=None)
        def get_llm(model):
            return LLM(model)

        @functools.cache
        def _warm_llm(model):
            llm = LLM(model)
            llm.generate(["warm up"])
            return llm

        class TestCached:
            @functools.cached_property
            def engine(self):
                return LLM("m")

            def test_shared(self):
                llm = get_llm("m")
                other = _warm_llm("m")
                assert llm.generate(["x"]) and other.generate(["x"])
                del llm, other
                gc.collect()
        """) == [
        (8, "GPU001", "none", why.format(name="get_llm", cache="functools.lru_cache")),
        (12, "GPU001", "none", why.format(name="_warm_llm", cache="functools.cache")),
        (19, "GPU001", "none", why.format(name="engine", cache="functools.cached_property")),
    ]


def test_an_engine_from_a_factory_fixture_belongs_to_the_test_that_calls_it(
        tmp_path: Path) -> None:
    """A fixture that hands out a factory of engines and keeps none of them (``def
    _make(**kw): return LLM(...)``, ``return _make``), in the module or in a conftest: the
    test that calls the factory owns the engine, so its ``del``/``gc.collect()`` is GPU004:
    removed by the unit of a test module's fixture and its callers
    (:mod:`lint_gpu_tests.fixplan.factory_fixtures`), and by the unit of a conftest's and
    its callers over the tree (:mod:`lint_gpu_tests.fixing.tree_units`). A factory that
    registers its engines (a finalizer, a list the
    fixture tears down) keeps them: nothing is reported there."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(textwrap.dedent("""\
        import pytest
        from vllm import LLM


        @pytest.fixture
        def llm_factory():
            def make(model):
                llm = LLM(model)
                return llm

            yield make
        """))
    (tests / "test_factories.py").write_text(textwrap.dedent("""\
        import gc

        import pytest
        from vllm import LLM


        @pytest.fixture
        def make_llm():
            def _make(**kwargs):
                return LLM("m", **kwargs)

            return _make


        @pytest.fixture
        def tracked(request):
            def _make():
                llm = LLM("m")
                request.addfinalizer(llm.llm_engine.engine_core.shutdown)
                return llm

            return _make


        def test_module_factory(make_llm):
            llm = make_llm(max_model_len=64)
            assert llm.generate(["x"])
            del llm
            gc.collect()


        def test_conftest_factory(llm_factory):
            llm = llm_factory("m")
            assert llm.generate(["x"])
            del llm


        def test_tracked(tracked):
            llm = tracked()
            del llm
            gc.collect()
        """))
    result = check_paths([str(tests)], own_rules(), cache=False)
    assert [(Path(v.path).name, v.location.row, v.code,
             v.fix.applicability.value if v.fix else "none", v.fix.reason if v.fix else "")
            for v in result.violations if v.code == "GPU004"] == [
        ("test_factories.py", 28, "GPU004", "safe", ""),
        ("test_factories.py", 29, "GPU004", "safe", ""),
        ("test_factories.py", 35, "GPU004", "safe", ""),
    ]


def test_an_engine_a_caching_function_of_another_module_returns(tmp_path: Path) -> None:
    """A caching function of a helper module the rules do not look at (``tests/utils.py``):
    each call of it is where a test gets the cache's engine, reported as GPU001 there
    without a fix (the reason names the cache); the caller's ``del`` and ``gc.collect()``
    are not the cleanup of an engine it owns."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "utils.py").write_text(textwrap.dedent("""\
        import functools

        from vllm import LLM


        @functools.lru_cache(maxsize=1)
        def shared_engine(model="m"):
            return LLM(model)
        """))
    (tests / "test_shared.py").write_text(textwrap.dedent("""\
        import gc

        from tests.utils import shared_engine


        def test_shared():
            llm = shared_engine()
            assert llm.generate(["x"])
            del llm
            gc.collect()
        """))
    result = check_paths([str(tests)], own_rules(), cache=False)
    assert [(v.location.row, v.code, v.message, v.fix.reason if v.fix else "")
            for v in result.violations] == [
        (7, "GPU001", "Engine `shared_engine(...)` built outside `with vllm_runner(...)`",
         "the engine comes from `shared_engine()`, defined in `tests/utils.py` (line 7), "
         "which caches the engine it returns (`@functools.lru_cache`): the engine lives as "
         "long as that cache, shared by every caller, and no fix rewrites a cached engine")]


def test_a_fixture_method_returning_an_engine_is_not_a_factory_method() -> None:
    """A fixture of a test class that returns the engine is pytest's to call, not a factory
    method: its GPU001 keeps the fixture's own fix (a safe with-block yielding the proxy)."""
    assert fix_reports("""\
        import pytest
        from vllm import LLM

        class TestF:
            @pytest.fixture
            def llm(self):
                return LLM("m")

            def test_x(self, llm):
                assert llm.generate(["x"])
        """) == [(7, "GPU001", "safe", ""), (7, "GPU002", "safe", "")]


def test_cleanup_and_shutdown_helpers_of_another_module(tmp_path: Path) -> None:
    """A cleanup helper of another module of the tree (whole body cleanup, its module
    naming no engine class) is cleanup like the module's own: its call is GPU004, removed
    with the engine's with-block, and the import it leaves unused goes. A shutdown helper
    that does more (it hands the engine's core to a helper that shuts it down, then sleeps)
    is GPU004 only where the call hands it an engine the test owns, its removal an unsafe
    fix, the reason naming where it is defined (the engine's with-block keeps the call
    until then, on the proxy, still reported); handed anything else, it is no cleanup."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "__init__.py").write_text("")
    (tests / "memory.py").write_text(textwrap.dedent("""\
        import gc

        import torch


        def cleanup(llm):
            del llm
            gc.collect()
            torch.cuda.empty_cache()
        """))
    (tests / "engines.py").write_text(textwrap.dedent("""\
        import time


        def _stop_core(engine_core):
            engine_core.shutdown()
            time.sleep(1.0)


        def force_engine_shutdown(llm):
            _stop_core(llm.llm_engine.engine_core)
        """))
    test = tests / "test_helpers.py"
    test.write_text(textwrap.dedent("""\
        from vllm import LLM

        from tests.engines import force_engine_shutdown
        from tests.memory import cleanup


        def test_cleanup():
            llm = LLM("m")
            assert llm.generate(["a"])
            cleanup(llm)


        def test_force(server):
            llm = LLM("m")
            assert llm.generate(["a"])
            force_engine_shutdown(server)
            force_engine_shutdown(llm)
        """))
    result = check_paths([str(tests)], own_rules(), cache=False)
    why = ("`force_engine_shutdown()`, defined in `tests/engines.py` (line 9), shuts down the "
           "engine it is given, and its body holds more than the cleanup the runner's "
           "teardown does: removing the call drops the rest (the engine's with-block keeps "
           "it, acting on the proxy, unless this fix removes it)")
    assert [(v.location.row, v.code, v.message,
             v.fix.applicability.value if v.fix else "", v.fix.reason if v.fix else "")
            for v in result.violations] == [
        (8, "GPU001", "Engine `LLM(...)` built outside `with vllm_runner(...)`", "safe", ""),
        (10, "GPU004", "Manual cleanup `cleanup()` in a function that owns an engine", "safe",
         ""),
        (14, "GPU001", "Engine `LLM(...)` built outside `with vllm_runner(...)`", "safe", ""),
        (17, "GPU004",
         "Manual cleanup `force_engine_shutdown()` in a function that owns an engine",
         "unsafe", why),
    ]
    check_paths([str(tests)], own_rules(), cache=False, fix=True)
    assert test.read_text() == textwrap.dedent("""\
        import weakref

        from tests.engines import force_engine_shutdown


        def test_cleanup(vllm_runner):
            with vllm_runner("m") as runner:
                llm = weakref.proxy(runner.llm)
                assert llm.generate(["a"])


        def test_force(server, vllm_runner):
            with vllm_runner("m") as runner:
                llm = weakref.proxy(runner.llm)
                assert llm.generate(["a"])
                force_engine_shutdown(server)
                force_engine_shutdown(llm)
        """)
    result = check_paths([str(tests)], own_rules(), cache=False)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else "")
            for v in result.violations] == [(17, "GPU004", "unsafe")]
    check_paths([str(tests)], own_rules(), cache=False, fix=True, unsafe_fixes=True)
    assert test.read_text().endswith(
        "        assert llm.generate([\"a\"])\n        force_engine_shutdown(server)\n")


def test_a_teardown_that_sets_the_engines_attribute_to_none_keeps_that_statement() -> None:
    """``self.llm = None`` within or after the teardown's cleanup run is no read of the
    attribute: it stays where it is (the attribute ends as it did), the cleanup around it
    goes, and the stack closes where the cleanup began. A shutdown helper given another value
    beside the engine (which the rest of its body may change) keeps its call: no fix."""
    source = textwrap.dedent("""\
        import gc
        import time
        import unittest

        from vllm import LLM


        def free(llm):
            llm.llm_engine.engine_core.shutdown()
            gc.collect()


        def shutdown_and_reset(llm, state):
            llm.llm_engine.engine_core.shutdown()
            time.sleep(1)
            state.clear()


        class TestNone(unittest.TestCase):
            def setUp(self):
                self.llm = LLM("m")

            def tearDown(self):
                free(self.llm)
                self.llm = None
                gc.collect()

            def test_x(self):
                assert self.llm.generate(["a"])


        def test_reset():
            state = {"a": 1}
            llm = LLM("m")
            assert llm.generate(["a"])
            shutdown_and_reset(llm, state)
            assert state == {}
        """)
    kept = ("`shutdown_and_reset()` (line 13) shuts down the engine it is given, and its body "
            "holds more than the cleanup the runner's teardown does; the call also gives it "
            "`state`, which the rest of its body may change: no fix removes the call (the "
            "engine's with-block keeps it, acting on the proxy)")
    assert fix_reports(source) == [
        (21, "GPU001", "safe", ""), (24, "GPU004", "safe", ""), (26, "GPU004", "safe", ""),
        (34, "GPU001", "safe", ""), (36, "GPU004", "none", kept)]
    fixed = fix_source(source.encode(), PATH, own_rules(), unsafe=True).new_source.decode()
    assert "    def tearDown(self):\n        self._engine_stack.close()\n" \
        "        self.llm = None\n\n" in fixed
    assert "        shutdown_and_reset(llm, state)\n    assert state == {}\n" in fixed


MODULE_SETUP = """\
import gc

import torch
from vllm import LLM

llm = None


def setup_module(module):
    global llm
    llm = LLM("m")


def teardown_module(module):
    global llm
    del llm
    gc.collect()
    torch.cuda.empty_cache()


def test_generate():
    assert llm.generate(["a"])


def test_local_name():
    llm = object()
    assert llm is not None and llm is llm
"""


def test_a_module_set_up_hands_its_global_engine_to_a_stack() -> None:
    """``setup_module`` storing the engine in a global and ``teardown_module`` cleaning it
    up: the set-up opens a global ``ExitStack`` (joining its ``global`` statement) and binds
    the global to the proxy of the runner's engine; the teardown's cleanup run becomes the
    stack's ``close()`` (and its ``global`` statement, declaring nothing it uses then,
    goes). Safe: a test's local of the same name is not the global, so its
    identity check is no risk."""
    assert fix_reports(MODULE_SETUP) == [
        (11, "GPU001", "safe", ""), (16, "GPU004", "safe", ""), (17, "GPU004", "safe", ""),
        (18, "GPU004", "safe", "")]
    outcome = fix_source(MODULE_SETUP.encode(), PATH, own_rules())
    assert outcome.new_source.decode() == """\
import contextlib
import weakref

from lint_gpu_tests.runtime import VllmRunner

llm = None


def setup_module(module):
    global llm, _engine_stack
    _engine_stack = contextlib.ExitStack()
    llm = weakref.proxy(_engine_stack.enter_context(VllmRunner("m")).llm)


def teardown_module(module):
    _engine_stack.close()


def test_generate():
    assert llm.generate(["a"])


def test_local_name():
    llm = object()
    assert llm is not None and llm is llm
"""


FACTORY_SETUPS = """\
import gc

from vllm import LLM


def _build(max_model_len=256):
    llm = LLM("m", max_model_len=max_model_len)
    return llm


class TestGenerate:
    @classmethod
    def setup_class(cls):
        cls.llm = _build(128)

    @classmethod
    def teardown_class(cls):
        del cls.llm
        gc.collect()

    def test_generate(self):
        assert self.llm.generate(["a"])


def setup_function():
    global engine
    engine = _build()


def test_engine():
    assert engine.generate(["b"])
"""


def test_xunit_set_ups_enter_a_factory_helpers_call_on_a_stack() -> None:
    """An engine an xunit set-up gets from a factory helper of the module (a class's
    ``setup_class``, a module's ``setup_function`` without its teardown): the helper becomes
    a context manager as for its other callers, and each set-up enters its call on an
    ``ExitStack`` its teardown closes (the module gets the ``teardown_function`` it lacked,
    so each test's engine is shut down after it, not left to the next)."""
    assert fix_reports(FACTORY_SETUPS) == [
        (7, "GPU001", "safe", ""), (18, "GPU004", "safe", ""), (19, "GPU004", "safe", "")]
    outcome = fix_source(FACTORY_SETUPS.encode(), PATH, own_rules())
    assert outcome.new_source.decode() == """\
import contextlib
import weakref

from lint_gpu_tests.runtime import VllmRunner


@contextlib.contextmanager
def _build(max_model_len=256):
    with VllmRunner("m", max_model_len=max_model_len) as runner:
        yield weakref.proxy(runner.llm)


class TestGenerate:
    @classmethod
    def setup_class(cls):
        cls._engine_stack = contextlib.ExitStack()
        cls.llm = cls._engine_stack.enter_context(_build(128))

    @classmethod
    def teardown_class(cls):
        cls._engine_stack.close()

    def test_generate(self):
        assert self.llm.generate(["a"])


def setup_function():
    global engine, _engine_stack
    _engine_stack = contextlib.ExitStack()
    engine = _engine_stack.enter_context(_build())


def teardown_function():
    _engine_stack.close()


def test_engine():
    assert engine.generate(["b"])
"""


def test_xunit_set_ups_of_a_factorys_engine_without_a_fix() -> None:
    """A set-up storing two engines of the factory, or a module's global rebound by a test:
    the factory's unit has no fix, the reason naming the call and why."""
    two = FACTORY_SETUPS.replace("        cls.llm = _build(128)\n",
                                 "        cls.llm = _build(128)\n        cls.other = _build()\n")
    assert fix_reports(two)[0] == (
        7, "GPU001", "none", "the call of `_build()` in `setup_class()` (line 14): "
        "`setup_class()` builds several engines")
    rebound = FACTORY_SETUPS + "\n\ndef test_rebinds():\n    global engine\n    engine = None\n"
    assert fix_reports(rebound)[0] == (
        7, "GPU001", "none", "the call of `_build()` in `setup_function()` (line 27): "
        "`engine` is assigned or deleted elsewhere in the module (line 36): the stack would "
        "not own what it holds then")


def test_an_xunit_teardowns_line_of_cleanup_alone_goes_whole() -> None:
    """``del cls.llm; gc.collect()`` on one line of the teardown: the line becomes the
    stack's ``close()``; a line that also holds a statement that is not cleanup has no
    fix, the reason saying so."""
    source = textwrap.dedent("""\
        import gc

        from vllm import LLM


        class TestGenerate:
            @classmethod
            def setup_class(cls):
                cls.llm = LLM("m")

            @classmethod
            def teardown_class(cls):
                del cls.llm; gc.collect()  # noqa: E702

            def test_generate(self):
                assert self.llm.generate(["a"])
        """)
    assert fix_reports(source) == [
        (9, "GPU001", "safe", ""), (13, "GPU004", "safe", ""), (13, "GPU004", "safe", "")]
    fixed = fix_source(source.encode(), PATH, own_rules()).new_source.decode()
    assert "        cls._engine_stack.close()  # noqa: E702\n" in fixed
    assert "gc" not in fixed
    mixed = source.replace("del cls.llm; gc.collect()", "del cls.llm; cls.count = 0")
    why = ("a cleanup statement of `teardown_class()` shares its line with a statement that "
           "is not cleanup")
    assert fix_reports(mixed) == [(9, "GPU001", "none", why), (13, "GPU004", "none", why)]


def test_xunit_and_fixture_stores_the_fix_would_change() -> None:
    """A teardown checking by name that the engine's attribute is gone, and a test using
    the stored engine as a set member: no fix (the proxy stays where the cleanup had
    deleted it; a proxy is unhashable). A module's set-up storing the engine on the module
    object it takes (``module.llm``, the module's global): fixed on a stack stored there
    too, its ``del module.llm`` reported."""
    checked = XUNIT_BY_NAME.replace("        gc.collect()\n",
                                    "        gc.collect()\n"
                                    "        assert not hasattr(self, \"llm\")\n")
    assert fix_reports(checked)[0] == (
        8, "GPU001", "none", "`teardown_method()` reads `self.llm` after its cleanup (line 13)")
    hashed = XUNIT_BY_NAME + "\n    def test_member(self):\n        assert len({self.llm}) == 1\n"
    assert fix_reports(hashed)[0] == (
        8, "GPU001", "none", "`self.llm` is a dict key or set member or is hashed (line 18), "
        "and the `weakref.proxy` the fix binds is unhashable")
    on_module = textwrap.dedent("""\
        import gc

        from vllm import LLM


        def setup_module(module):
            module.llm = LLM("m")


        def teardown_module(module):
            del module.llm
            gc.collect()
        """)
    assert fix_reports(on_module) == [
        (7, "GPU001", "safe", ""), (11, "GPU004", "safe", ""), (12, "GPU004", "safe", "")]
    fixed = fix_source(on_module.encode(), PATH, own_rules()).new_source.decode()
    assert fixed.split("\n\n\n")[1:] == [
        "def setup_module(module):\n    module._engine_stack = contextlib.ExitStack()\n"
        "    module.llm = weakref.proxy(module._engine_stack.enter_context(VllmRunner(\"m\")).llm)",
        "def teardown_module(module):\n    module._engine_stack.close()\n"]


XUNIT_BY_NAME = """\
import gc

from vllm import LLM


class TestGenerate:
    def setup_method(self):
        self.llm = LLM("m")

    def teardown_method(self):
        del self.llm
        gc.collect()

    def test_generate(self):
        assert self.llm.generate(["a"])
"""


def test_a_long_store_of_a_factorys_engine_puts_the_entered_call_on_its_own_line() -> None:
    """A set-up storing a factory's engine on a long attribute: past the line length, the
    call the stack enters goes on a line of its own (the factory has no arguments to lay
    out)."""
    source = FACTORY_SETUPS.replace("cls.llm", "cls.reference_engine_shared_by_the_tests_here")
    source = source.replace("self.llm", "self.reference_engine_shared_by_the_tests_here")
    source = source.replace("_build(128)", "_build()")
    fixed = fix_source(source.encode(), PATH, own_rules()).new_source.decode()
    assert ("        cls.reference_engine_shared_by_the_tests_here = "
            "cls._engine_stack.enter_context(\n            _build(),\n        )\n") in fixed


def test_an_xunit_teardown_of_an_engine_a_tuple_helper_returned() -> None:
    """``cls.llm, cls.params = build_pair()`` in ``setup_class``, the engine first in the
    helper's tuple: the teardown's cleanup of ``cls.llm`` is reported (it was not), with no
    fix and the reason saying where the engine is stored."""
    source = textwrap.dedent("""\
        import gc

        from vllm import LLM, SamplingParams


        def build_pair():
            llm = LLM("m")
            return llm, SamplingParams(temperature=0.0)


        class TestPair:
            @classmethod
            def setup_class(cls):
                cls.llm, cls.params = build_pair()

            @classmethod
            def teardown_class(cls):
                del cls.llm
                gc.collect()
                cls.params = None

            def test_a(self):
                assert self.llm.generate(["a"], self.params)
        """)
    stored = ("the engine is stored on `cls.llm` by `setup_class()` (line 14) and lives until "
              "`teardown_class()`: no fix rewrites this xunit set-up and teardown (one whose "
              "set-up stores the engine on its class or instance, or in a global it declares, "
              "built there or by a factory helper, and whose teardown cleans it up, is fixed)")
    assert [r for r in fix_reports(source) if r[1] == "GPU004"] == [
        (18, "GPU004", "none", stored), (19, "GPU004", "none", stored)]


def test_a_cached_factory_a_fixture_hands_out_keeps_its_engines() -> None:
    """A fixture's factory under ``functools.lru_cache`` keeps every engine it built in its
    cache: the test does not own what it gets, and its ``gc.collect()`` is not reported."""
    source = textwrap.dedent("""\
        import functools
        import gc

        import pytest
        from vllm import LLM


        @pytest.fixture
        def make_llm():
            @functools.lru_cache
            def _make(seed):
                return LLM("m", seed=seed)
            return _make


        def test_cached(make_llm):
            llm = make_llm(0)
            assert llm
            gc.collect()
        """)
    assert [v.code for v in check_source(source.encode(), "tests/test_x.py", Config())
            if v.code == "GPU004"] == []

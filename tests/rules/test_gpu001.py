"""GPU001 engine-outside-runner: an engine built by hand instead of by the runner's
with-statement.

Its own INVALID/VALID examples (``lint_gpu_tests/rules/gpu001_engine_outside_runner.py``) and
what else is particular to it. Elsewhere: how its fix is planned, shape by shape, in
``tests/test_fix_*.py`` and ``tests/test_engine_owner_class.py``; its rewrites byte for byte
in ``tests/fixtures/fix/``; what counts as vLLM's engine (name resolution, process targets)
in ``tests/test_precision.py``.
"""

from __future__ import annotations

import pytest
from rule_testing import SOUNDNESS, example_tests, fix_reports, own_rules, rule_class

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source

RULE = rule_class("GPU001")
#: its own INVALID/VALID examples, one case an example
(test_invalid_example_reports_marked_lines,
 test_valid_example_reports_nothing) = example_tests(RULE)


def test_runtime_compilation_config_needs_unsafe_fixes() -> None:
    before = (SOUNDNESS / "runtime_compilation_config_target_vllm.py").read_bytes()
    safe_only = fix_source(before, "tests/test_case.py", own_rules(Config(target="vllm")))
    assert safe_only.new_source is None
    (engine,) = safe_only.remaining
    assert engine.code == "GPU001" and engine.fix is not None
    assert engine.fix.applicability.value == "unsafe"
    assert engine.fix.reason.startswith("`compilation_config=cc` is only known at run time")


ISOLATE = "; `--fix-strategy isolate` would fix it safely"
REJECTED = ("none", "`LLM` does not take `{}=` (building it raises `TypeError`), but the "
                    "runner does and would build the engine" + ISOLATE)
STAR_ARGS = ("none", "`*` arguments may hold more than the model, and the runner takes only "
                     "the model by position" + ISOLATE)


def _fix_of(call: str, target: str = "bundled") -> tuple[str, str]:
    """(applicability, reason) of the GPU001 of ``llm = <call>`` in a test."""
    source = (f"from vllm import LLM\n\n\ndef test_x():\n    llm = {call}\n"
              "    assert llm.generate(['hi'])\n").encode()
    (found,) = check_source(source, "tests/test_x.py", own_rules(Config(target=target)))
    assert found.code == "GPU001" and found.fix is not None
    return found.fix.applicability.value, found.fix.reason


@pytest.mark.parametrize(("call", "target", "expected"), [
    # The bundled runner takes the model as `model_name=`, renames `tokenizer_name=` to
    # `tokenizer=`, and takes `engine_factory=`/`_group=` itself.
    ("LLM('m', tokenizer_name='m')", "bundled",
     (REJECTED[0], REJECTED[1].format("tokenizer_name"))),
    ("LLM(model_name='m')", "bundled", (REJECTED[0], REJECTED[1].format("model_name"))),
    ("LLM('m', engine_factory=f)", "bundled",
     (REJECTED[0], REJECTED[1].format("engine_factory"))),
    # vLLM's runner has `tokenizer_name` and `default_torch_num_threads` parameters.
    ("LLM('m', tokenizer_name='m')", "vllm",
     (REJECTED[0], REJECTED[1].format("tokenizer_name"))),
    ("LLM('m', default_torch_num_threads=1)", "vllm",
     (REJECTED[0], REJECTED[1].format("default_torch_num_threads"))),
    # The runner takes one positional argument.
    ("LLM(*args)", "bundled", STAR_ARGS),
    ("LLM(*args, model='m')", "vllm", STAR_ARGS),
    ("LLM(*('m', 't'))", "bundled", STAR_ARGS),
    # Statically one positional argument, and `LLM`'s own keywords: mapped as they are.
    ("LLM(*('m',))", "bundled", ("safe", "")),
    ("LLM('m', tokenizer='m')", "bundled", ("safe", "")),
])
def test_arguments_the_runner_takes_and_llm_rejects_have_no_fix(
        call: str, target: str, expected: tuple[str, str]) -> None:
    assert _fix_of(call, target) == expected


@pytest.mark.parametrize(("finally_body", "fix"), [
    # the cleanup that opens the finally goes with the rewrite, the rest stays
    ("del llm\n        print('done')", ("safe", "")),
    # a finally that reads the engine after deleting it is a use outside the block
    ("del llm\n        print(llm)",
     ("none", "`llm` is used outside the block that builds it" + ISOLATE)),
    # cleanup after other work stays, and so does the name bound for it
    ("print('done')\n        del llm",
     ("none", "`llm` is rebound elsewhere in the function" + ISOLATE)),
])
def test_finally_cleanup_and_the_name_bound_for_it(finally_body: str,
                                                   fix: tuple[str, str]) -> None:
    source = ("from vllm import LLM\n\n\ndef test_x():\n    llm = None\n    try:\n"
              "        llm = LLM('m')\n        assert llm.generate(['hi'])\n    finally:\n"
              f"        {finally_body}\n")
    (engine,) = [v for v in check_source(source.encode(), "tests/test_x.py", Config())
                 if v.code == "GPU001"]
    assert engine.fix is not None
    assert (engine.fix.applicability.value, engine.fix.reason) == fix


def test_an_engine_built_inside_an_assert_says_so() -> None:
    """An engine built inside a simple statement that is no assignment, expression or
    ``return`` (``assert LLM(...).generate(...)``) has no fix, and the reason names that
    statement (not a compound statement's header)."""
    why = ("built inside {what}, which no fix turns into a with-block (bind the engine to a "
           "name first); `--fix-strategy isolate` would fix it safely")
    assert fix_reports("""\
        from vllm import LLM

        def test_inline():
            assert LLM("m").generate(["z"])

        def test_augmented():
            outputs = []
            outputs += LLM("m").generate(["z"])
        """) == [(4, "GPU001", "none", why.format(what="an `assert`")),
                 (8, "GPU001", "none", why.format(what="an augmented assignment"))]


XUNIT_WITHOUT_TEARDOWN = """\
import unittest

from vllm import LLM


class TestNoTeardown:
    @classmethod
    def setup_class(cls):
        cls.llm = LLM("m")

    def test_a(self):
        assert self.llm.generate(["a"])


class TestPerTest(unittest.TestCase):
    def setUp(self):
        self.llm = LLM("m")

    def test_b(self):
        assert self.llm.generate(["b"])


class Base:
    pass


class TestInherits(Base):
    def setup_method(self):
        self.llm = LLM("m")

    def test_c(self):
        assert self.llm.generate(["c"])
"""


def test_an_xunit_set_up_without_a_teardown_gets_one_closing_the_runners_stack() -> None:
    """A class whose set-up stores the engine and that has no teardown of the pair keeps
    the engine until the class goes: the fix enters the runner on an ``ExitStack`` and adds
    the teardown that closes it, after the set-up (a class method where the set-up is one).
    A class with another base could inherit a teardown the new one would replace: no fix."""
    inherits = ("`TestInherits` has no teardown of its own and inherits from `Base`: a "
                "teardown the fix adds could replace one it inherits")
    assert fix_reports(XUNIT_WITHOUT_TEARDOWN) == [
        (9, "GPU001", "safe", ""), (17, "GPU001", "safe", ""),
        (29, "GPU001", "none", inherits)]
    outcome = fix_source(XUNIT_WITHOUT_TEARDOWN.encode(), "tests/test_x.py", own_rules())
    assert outcome.new_source.decode() == """\
import contextlib
import unittest
import weakref

from lint_gpu_tests.runtime import VllmRunner
from vllm import LLM


class TestNoTeardown:
    @classmethod
    def setup_class(cls):
        cls._engine_stack = contextlib.ExitStack()
        cls.llm = weakref.proxy(cls._engine_stack.enter_context(VllmRunner("m")).llm)

    @classmethod
    def teardown_class(cls):
        cls._engine_stack.close()

    def test_a(self):
        assert self.llm.generate(["a"])


class TestPerTest(unittest.TestCase):
    def setUp(self):
        self._engine_stack = contextlib.ExitStack()
        self.llm = weakref.proxy(self._engine_stack.enter_context(VllmRunner("m")).llm)

    def tearDown(self):
        self._engine_stack.close()

    def test_b(self):
        assert self.llm.generate(["b"])


class Base:
    pass


class TestInherits(Base):
    def setup_method(self):
        self.llm = LLM("m")

    def test_c(self):
        assert self.llm.generate(["c"])
"""


STORED = """\
import gc

import pytest
from vllm import LLM


class TestShared:
    @pytest.fixture(scope="class", autouse=True)
    def engine(self, request):
        request.cls.llm = LLM("m", max_model_len=64)
        yield
        del request.cls.llm
        gc.collect()

    def test_generate(self):
        assert self.llm.generate(["a"])


@pytest.fixture(scope="module")
def module_engine(request):
    request.module.engine = LLM("m")
    yield
    request.module.engine.llm_engine.engine_core.shutdown()
    del request.module.engine


class TestPerTest:
    @pytest.fixture(autouse=True)
    def own_engine(self):
        self.llm = LLM("m")
        yield
        self.llm.shutdown()

    def test_generate(self):
        assert self.llm.generate(["b"])
"""


def test_a_fixture_storing_its_engine_on_an_attribute_gets_a_with_block() -> None:
    """A generator fixture storing its engine on ``request.cls``, ``request.module`` or
    ``self`` and cleaning it up after its ``yield``: the with-block runs from the store,
    which binds the attribute to the engine's proxy, through the ``yield``; the cleanup run
    goes, so the runner's teardown runs where it began. A function-scoped fixture gets the
    runner fixture, the wider ones the runner class; the ``del`` of the attribute is
    GPU004."""
    assert fix_reports(STORED) == [
        (10, "GPU001", "safe", ""), (12, "GPU004", "safe", ""), (13, "GPU004", "safe", ""),
        (21, "GPU001", "safe", ""), (23, "GPU004", "safe", ""), (24, "GPU004", "safe", ""),
        (30, "GPU001", "safe", ""), (32, "GPU004", "safe", "")]
    outcome = fix_source(STORED.encode(), "tests/test_stored.py", own_rules())
    assert outcome.new_source.decode() == """\
import weakref

import pytest
from lint_gpu_tests.runtime import VllmRunner


class TestShared:
    @pytest.fixture(scope="class", autouse=True)
    def engine(self, request):
        with VllmRunner("m", max_model_len=64) as runner:
            request.cls.llm = weakref.proxy(runner.llm)
            yield

    def test_generate(self):
        assert self.llm.generate(["a"])


@pytest.fixture(scope="module")
def module_engine(request):
    with VllmRunner("m") as runner:
        request.module.engine = weakref.proxy(runner.llm)
        yield


class TestPerTest:
    @pytest.fixture(autouse=True)
    def own_engine(self, vllm_runner):
        with vllm_runner("m") as runner:
            self.llm = weakref.proxy(runner.llm)
            yield

    def test_generate(self):
        assert self.llm.generate(["b"])
"""


def test_fixtures_storing_their_engine_whose_fix_is_unsafe_or_missing() -> None:
    """A test comparing the stored attribute by identity makes the fix unsafe (a proxy
    now); a fixture reading the attribute after its cleanup has none."""
    identity = STORED + "\n    def test_same(self):\n        assert self.llm is not self\n"
    assert fix_reports(identity)[6:] == [
        (30, "GPU001", "unsafe", "identity checks (`is`) on `self.llm` see a `weakref.proxy`"),
        (32, "GPU004", "unsafe", "identity checks (`is`) on `self.llm` see a `weakref.proxy`")]
    late = STORED.replace("        self.llm.shutdown()\n",
                          "        self.llm.shutdown()\n        print(self.llm)\n")
    why = "`own_engine()` after its `yield` reads `self.llm` after its cleanup (line 33)"
    assert fix_reports(late)[6:] == [(30, "GPU001", "none", why), (32, "GPU004", "none", why)]


def test_a_fixture_storing_its_engine_in_a_global_it_declares() -> None:
    """``global ENGINE; ENGINE = LLM(...)`` in a module-scoped fixture, deleted after its
    ``yield``: the with-block binds the global to the engine's proxy (a module-level
    ``ENGINE = None`` is its first value, no other store)."""
    source = """\
import gc

import pytest
from vllm import LLM

ENGINE = None


@pytest.fixture(scope="module", autouse=True)
def engine_for_module():
    global ENGINE
    ENGINE = LLM("m")
    yield
    del ENGINE
    gc.collect()


def test_uses():
    assert ENGINE.generate(["a"])
"""
    assert fix_reports(source) == [
        (12, "GPU001", "safe", ""), (14, "GPU004", "safe", ""), (15, "GPU004", "safe", "")]
    fixed = fix_source(source.encode(), "tests/test_global.py", own_rules()).new_source
    assert fixed.decode().split("\n\n\n")[1:3] == [
        "@pytest.fixture(scope=\"module\", autouse=True)\ndef engine_for_module():\n"
        "    global ENGINE\n    with VllmRunner(\"m\") as runner:\n"
        "        ENGINE = weakref.proxy(runner.llm)\n        yield",
        "def test_uses():\n    assert ENGINE.generate([\"a\"])\n"]


def test_a_fixture_storing_its_engine_around_a_try_finally_or_storing_two() -> None:
    """The ``yield`` in a ``try`` whose ``finally`` is the cleanup alone: the ``try`` gives
    way to its body inside the with-block. A fixture storing two engines has no fix, and
    the reason says so (not that its cleanup is split)."""
    source = """\
import gc

import pytest
from vllm import LLM


class TestTry:
    @pytest.fixture(scope="class", autouse=True)
    def engine(self, request):
        request.cls.llm = LLM("m")
        try:
            yield
        finally:
            del request.cls.llm
            gc.collect()

    def test_b(self):
        assert self.llm.generate(["a"])
"""
    assert fix_reports(source) == [
        (10, "GPU001", "safe", ""), (14, "GPU004", "safe", ""), (15, "GPU004", "safe", "")]
    fixed = fix_source(source.encode(), "tests/test_try.py", own_rules()).new_source.decode()
    assert fixed.split("\n\n\n")[1] == (
        "class TestTry:\n    @pytest.fixture(scope=\"class\", autouse=True)\n"
        "    def engine(self, request):\n        with VllmRunner(\"m\") as runner:\n"
        "            request.cls.llm = weakref.proxy(runner.llm)\n            yield\n\n"
        "    def test_b(self):\n        assert self.llm.generate([\"a\"])\n")
    two = source.replace("        request.cls.llm = LLM(\"m\")\n",
                         "        request.cls.llm = LLM(\"m\")\n"
                         "        request.cls.other = LLM(\"n\")\n")
    why = "`engine()` builds several engines"
    assert [r for r in fix_reports(two) if r[1] == "GPU001"] == [
        (10, "GPU001", "none", why), (11, "GPU001", "none", why)]


def test_a_stored_fixture_of_a_dynamic_scope_or_yielding_its_engine_is_unsafe() -> None:
    """A scope the runner's block may not follow (a callable or a name), and a fixture
    handing its tests the attribute it stored: unsafe, the reason saying why."""
    dynamic = STORED.replace('@pytest.fixture(scope="class", autouse=True)',
                             "@pytest.fixture(scope=SCOPE, autouse=True)")
    first = fix_reports(dynamic)[0]
    assert first[:3] == (10, "GPU001", "unsafe") and first[3].endswith(
        "-scoped fixture: the engine's lifetime follows the fixture's scope and the runner "
        "must allow it")
    yielding = STORED.replace("        request.cls.llm = LLM(\"m\", max_model_len=64)\n"
                              "        yield\n",
                              "        request.cls.llm = LLM(\"m\", max_model_len=64)\n"
                              "        yield request.cls.llm\n")
    assert fix_reports(yielding)[0] == (
        10, "GPU001", "unsafe",
        "the fixture yields `request.cls.llm`: its users get the engine's `weakref.proxy`")


def test_a_module_fixture_storing_on_the_class_is_not_blocked_by_another_class() -> None:
    """A fixture of the module storing its engine on ``request.cls.llm`` and an unrelated
    class storing its own engine on ``self.llm`` in its set-up: both fixed (the other
    class's store is no store of the fixture's attribute)."""
    source = STORED.split("\n\n\n@pytest.fixture(scope=\"module\")")[0].replace(
        "class TestShared:\n    @pytest.fixture(scope=\"class\", autouse=True)\n"
        "    def engine(self, request):\n",
        "@pytest.fixture(scope=\"class\")\ndef engine(request):\n").replace(
        "        request.cls.llm = LLM(\"m\", max_model_len=64)\n        yield\n"
        "        del request.cls.llm\n        gc.collect()\n",
        "    request.cls.llm = LLM(\"m\", max_model_len=64)\n    yield\n"
        "    del request.cls.llm\n    gc.collect()\n\n\n@pytest.mark.usefixtures(\"engine\")\n"
        "class TestShared:\n") + (
        "\n\n\nclass TestOther:\n    def setup_method(self):\n        self.llm = LLM(\"n\")\n\n"
        "    def teardown_method(self):\n        del self.llm\n\n    def test_b(self):\n"
        "        assert self.llm.generate([\"b\"])\n")
    assert [r[1:3] for r in fix_reports(source)] == [
        ("GPU001", "safe"), ("GPU004", "safe"), ("GPU004", "safe"),
        ("GPU001", "safe"), ("GPU004", "safe")]

"""Groups of engines, rebinding in branches and factory fixtures: the fix each construction
gets and the reason it gives, pinned for the fix fixtures ``engine_group_*``,
``engine_rebound_in_branches`` and ``factory_fixture*``, plus shapes
:mod:`lint_gpu_tests.fixplan.groups` must not take for a group."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixplan.groups import FACTORY_REASON, GROUP_TITLE

FIX_DIR = Path(__file__).parent / "fixtures" / "fix"


def fixes(source: bytes, codes: tuple[str, ...] = ("GPU001", "GPU003")
          ) -> list[tuple[str, int, str, str, str]]:
    found = check_source(source, "tests/test_case.py", Config())
    return [(v.code, v.location.row, v.fix.applicability.value, v.fix.title, v.fix.reason)
            for v in found if v.fix is not None and v.code in codes]


def test_group_fixes_are_safe_and_titled() -> None:
    source = (FIX_DIR / "engine_group_loop" / "before.py").read_bytes()
    assert fixes(source) == [("GPU001", 11, "safe", GROUP_TITLE, ""),
                             ("GPU001", 23, "safe", GROUP_TITLE, "")]


def test_identity_check_on_an_element_is_unsafe() -> None:
    source = (FIX_DIR / "engine_group_identity" / "before.py").read_bytes()
    assert fixes(source) == [("GPU001", 5, "unsafe", GROUP_TITLE,
                              "`type()` on an engine of the group sees a "
                              "`weakref.proxy`, not the engine")]


def test_group_without_fix_reasons() -> None:
    source = (FIX_DIR / "engine_group_no_fix" / "before.py").read_bytes()
    wrap = "Wrap in `with vllm_runner(...)`"
    assert fixes(source) == [
        ("GPU001", 5, "none", wrap, "built inside a lambda or comprehension; "
         "`--fix-strategy isolate` would fix it safely"),
        ("GPU001", 11, "none", wrap,
         "the engine is stored in `engine_pool`, which outlives the block; "
         "`--fix-strategy isolate` would fix it as an unsafe fix (the fixture `engine_pool` "
         "is sent to the child by pickle: its value must pickle, and what its set-up changed "
         "in this process (other than environment variables) is not seen there)"),
        ("GPU001", 17, "none", wrap, "built inside a lambda or comprehension"),
    ]


def test_factory_fixture_is_unsafe_with_its_reason() -> None:
    source = (FIX_DIR / "factory_fixture" / "before.py").read_bytes()
    assert fixes(source) == [("GPU001", 10, "unsafe", GROUP_TITLE, FACTORY_REASON),
                             ("GPU003", 11, "unsafe", "Remove the finalizer (part of the "
                              "GPU001 rewrite)", FACTORY_REASON),
                             ("GPU001", 20, "unsafe", GROUP_TITLE, FACTORY_REASON)]


def test_factory_fixture_without_fix_reasons() -> None:
    source = (FIX_DIR / "factory_fixture_no_fix" / "before.py").read_bytes()
    wrap = "Wrap in `with VllmRunner(...)`"
    assert fixes(source) == [
        ("GPU001", 10, "none", wrap,
         "the factory uses its engine in ways the fix does not follow"),
        ("GPU001", 20, "none", wrap,
         "the engine is returned to the caller, so it must outlive this function"),
    ]


GENERATOR_FACTORY = b"""import gc

import pytest
from vllm import LLM


@pytest.fixture
def llm_generator(kwargs):
    def generate():
        llm = LLM(**kwargs)
        yield llm
        del llm
        gc.collect()

    return generate
"""


def test_a_factory_fixture_handing_out_a_generator_says_so() -> None:
    # vLLM's older spec-decode conftests: tests iterate what the factory yields.
    assert fixes(GENERATOR_FACTORY) == [
        ("GPU001", 10, "none", "Wrap in `with VllmRunner(...)`",
         "the factory is a generator (it yields its engine and cleans up after it), which "
         "no fix rewrites")]


NOT_GROUPS = {
    "container bound twice": '''
        engines = []
        engines = []
        for m in MODELS:
            engines.append(LLM(m))
        assert engines
    ''',
    "container bound after the loop": '''
        for m in MODELS:
            engines.append(LLM(m))
        engines = []
        assert engines
    ''',
    "two engines a loop iteration": '''
        a, b = [], []
        for m in MODELS:
            a.append(LLM(m))
            b.append(LLM(m))
        assert a and b
    ''',
    "container from elsewhere": '''
        engines = list(POOL)
        for m in MODELS:
            engines.append(LLM(m))
        assert engines
    ''',
}


@pytest.mark.parametrize("body", NOT_GROUPS.values(), ids=NOT_GROUPS.keys())
def test_not_taken_for_a_group(body: str) -> None:
    source = "from vllm import LLM\n\n\ndef test_x():\n" + textwrap.indent(
        textwrap.dedent(body).strip("\n"), "    ") + "\n"
    found = fixes(source.encode())
    assert found and all(f[2] == "none" for f in found), found


def test_the_other_branch_must_bind_first() -> None:
    """An ``else`` that reads the name before binding it may see this engine (in a loop, the
    previous iteration's): no fix."""
    source = textwrap.dedent('''\
        from vllm import LLM


        def test_x(flags):
            for flag in flags:
                if flag:
                    llm = LLM("a")
                    assert llm.generate(["x"])
                else:
                    assert llm.generate(["y"])
                    llm = LLM("b")
                    assert llm.generate(["z"])
    ''').encode()
    assert [f[:3] for f in fixes(source)] == [("GPU001", 7, "none"), ("GPU001", 11, "none")]


@pytest.mark.parametrize("case", ["engine_group_shutdown_loop", "engine_group_cleanup_loop_kept"])
def test_announced_fixes_are_the_fixes_applied(case: str) -> None:
    # Found by a first-time user: `check` announced one fix fewer than `--fix` applied (a
    # `engine_core.shutdown()` loop kept in the ExitStack block was no longer reported).
    from lint_gpu_tests.checking.checker import wanted_fixes
    from lint_gpu_tests.fixing.fixloop import fix_source

    source = (FIX_DIR / case / "before.py").read_bytes()
    found = check_source(source, "tests/test_case.py", Config())
    outcome = fix_source(source, "tests/test_case.py", Config(), violations=found)
    announced = [(v.code, v.location.row) for v in wanted_fixes(found, False)]
    assert [(v.code, v.location.row) for v in outcome.fixed] == announced


def test_class_checks_see_through_a_proxy_and_identity_does_not() -> None:
    # Why `isinstance()`/`issubclass()` keep the fix safe and `type()`/`id()`/`is` do not.
    import weakref

    class Engine:
        pass

    engine = Engine()
    proxy = weakref.proxy(engine)
    assert isinstance(proxy, Engine) and isinstance(proxy, (str, Engine))
    assert not isinstance(proxy, str)
    with pytest.raises(TypeError):
        issubclass(proxy, Engine)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        issubclass(engine, Engine)  # type: ignore[arg-type]
    assert type(proxy) is not Engine and proxy is not engine and id(proxy) != id(engine)
    assert isinstance(proxy, weakref.ProxyType) and not isinstance(engine, weakref.ProxyType)


def test_isinstance_keeps_the_fix_safe_unless_it_asks_for_the_proxy_type() -> None:
    source = textwrap.dedent("""\
        import weakref

        from vllm import LLM


        def test_x():
            llm = LLM("m")
            assert isinstance(llm, LLM) and not issubclass(type(llm), str)
            assert llm.generate(["x"])


        def test_y():
            llm = LLM("m")
            assert not isinstance(llm, weakref.ProxyType)
            assert llm.generate(["x"])
        """).encode()
    assert [(code, row, safety, reason) for code, row, safety, _, reason in fixes(source)] == [
        ("GPU001", 7, "unsafe", "`type()` on the engine sees a `weakref.proxy`, not the engine"),
        ("GPU001", 13, "unsafe",
         "`isinstance()` on the engine sees a `weakref.proxy`, not the engine")]

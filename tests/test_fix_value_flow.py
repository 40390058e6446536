"""The value-flow check of fix planning: which names can reach an engine.

:func:`lint_gpu_tests.fixplan.flow.value_flow` is run on small functions whose engine is the
name ``llm``; each case lists exactly the names that must count as holding the engine, and
the reason the analysis gives up when a value escapes. The last tests pin the reasons the
planner reports for the ``flow_unknown_call`` fix fixture.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source
from lint_gpu_tests.fixplan.flow import self_referencing, value_flow
from lint_gpu_tests.ftypes import Blocked, Risky

FIXTURE = Path(__file__).parent / "fixtures" / "fix" / "flow_unknown_call" / "before.py"


def flow_of(body: str):
    """The flow of ``llm`` through ``def f(param, items): <body>`` (after its first line,
    which binds ``llm``)."""
    source = "def f(param, items):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    func = ast.parse(source).body[0]
    assert isinstance(func, ast.FunctionDef)
    return value_flow(func, func.body, {"llm"}, None)


#: body -> names that may hold the engine (``llm`` itself included)
FOLLOWED = {
    "dict": ('llm = LLM("m")\nbox = {"engine": llm}\n', {"llm", "box"}),
    "tuple unpacked": ('llm = LLM("m")\npair = (llm, 1)\ne, n = pair\n',
                       {"llm", "pair", "e", "n"}),
    "list iterated": ('llm = LLM("m")\nengines = [llm]\nfor e in engines:\n    e.generate(1)\n',
                      {"llm", "engines", "e"}),
    "generator is lazy": ('llm = LLM("m")\ngen = (o.text for o in llm.generate(p))\n',
                          {"llm", "gen"}),
    "list comprehension of data": ('llm = LLM("m")\ntexts = [o.text for o in llm.generate(p)]\n',
                                   {"llm"}),
    "comprehension of engines": ('llm = LLM("m")\nsame = [e for e in [llm]]\n',
                                 {"llm", "same"}),
    "partial": ('llm = LLM("m")\nrun = functools.partial(llm.generate, p)\nout = run()\n',
                {"llm", "run", "out"}),
    "bound method returns data": ('llm = LLM("m")\ngen = llm.generate\nout = gen(p)\n',
                                  {"llm", "gen"}),
    "attribute chain": ('llm = LLM("m")\ncore = llm.llm_engine.engine_core\n',
                        {"llm", "core"}),
    "wrapper call": ('llm = LLM("m")\nw = Wrapper(llm)\nn = len([llm])\n', {"llm", "w"}),
    "lambda": ('llm = LLM("m")\nf = lambda: llm\nx = f()\n', {"llm", "f", "x"}),
    "closure returning data": (
        'llm = LLM("m")\ndef run():\n    return llm.generate(p)\nout = run()\n',
        {"llm", "run"}),
    "closure returning the engine": (
        'llm = LLM("m")\ndef get():\n    return llm\nsame = get()\n', {"llm", "get", "same"}),
    "local list append": ('llm = LLM("m")\nkept = []\nkept.append(llm)\n', {"llm", "kept"}),
    "local dict item": ('llm = LLM("m")\nkept = {}\nkept["e"] = llm\n', {"llm", "kept"}),
    "extend with data": (
        'llm = LLM("m")\nkept = []\nkept.extend(o.text for o in llm.generate(p))\n', {"llm"}),
    "augmented": ('llm = LLM("m")\nacc = []\nacc += [llm]\n', {"llm", "acc"}),
    "walrus and with": ('llm = LLM("m")\nif (e := llm):\n    pass\nwith llm.ctx() as c:\n'
                        '    pass\n', {"llm", "e", "c"}),
}


@pytest.mark.parametrize("case", sorted(FOLLOWED))
def test_followed_values(case: str) -> None:
    body, expected = FOLLOWED[case]
    flow = flow_of(body)
    assert flow.tainted == expected
    assert flow.problem is None


#: body -> the reason the analysis gives when a value escapes for sure (it rules the fix out)
ESCAPES = {
    "attribute": ('llm = LLM("m")\nparam.engine = llm.generate\n',
                  Blocked("the engine is stored in `param`, which outlives the block")),
    "parameter's list": ('llm = LLM("m")\nitems.append((llm, 1))\n',
                         Blocked("the engine is stored in `items`, which outlives the block")),
    "local bound to a parameter": ('llm = LLM("m")\nalias = items\nalias.append(llm)\n',
                                   Blocked("the engine is stored in `alias`, which outlives "
                                           "the block")),
    "global": ('global G\nllm = LLM("m")\nG = [llm]\n',
               Blocked("`G` holds the engine and is global or nonlocal")),
    "setattr": ('llm = LLM("m")\nsetattr(param, "e", llm)\n',
                Blocked("the engine is stored with `setattr` and outlives the block")),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_escaping_values(case: str) -> None:
    body, reason = ESCAPES[case]
    assert flow_of(body).problem == reason


def test_derived_value_passed_to_unknown_call_is_unfollowed() -> None:
    source = 'llm = LLM("m")\nbox = {"e": llm}\nregistry.keep(box)\nhelper(llm)\nprint(box)\n'
    flow = flow_of(source)
    func = ast.parse("def f():\n" + textwrap.indent(source, "    ")).body[0]
    assert flow.unfollowed_call(func.body) == Risky(  # type: ignore[attr-defined]
        "`registry.keep()` receives `box`, which may hold the engine, and may keep it after "
        "the block")


def test_engine_itself_passed_to_a_helper_is_followed() -> None:
    source = 'llm = LLM("m")\nhelper(llm)\ncheck(llm.generate, p)\nprint([llm])\n'
    flow = flow_of(source)
    func = ast.parse("def f():\n" + textwrap.indent(source, "    ")).body[0]
    assert flow.unfollowed_call(func.body) is None  # type: ignore[attr-defined]


def test_unknown_flow_fixture_reasons() -> None:
    found = check_source(FIXTURE.read_bytes(), "tests/test_case.py", Config())
    assert [(v.code, v.location.row, v.fix.applicability.value, v.fix.reason)
            for v in found if v.fix is not None] == [
        ("GPU001", 8, "unsafe",
         "`registry.remember()` receives `pair`, which may hold the engine, and may keep it "
         "after the block"),
        ("GPU001", 15, "none", "the engine is stored in `request.node`, which outlives the "
                               "block"),
        ("GPU001", 26, "unsafe",
         "`keep()` keeps what it is given past the call (in a global, an attribute or a "
         "container), the engine included"),
    ]
    assert fix_source(FIXTURE.read_bytes(), "tests/test_case.py", Config()).new_source is None


HELPERS = """\
from vllm import LLM

KEPT = []


def texts(llm):
    return [o.outputs[0].text for o in llm.generate(["x"])]


def wrap(llm):
    return (llm, 1)


def lazy(llm):
    yield from llm.generate(["x"])


def keep(llm):
    KEPT.append(llm)


def test_x():
    llm = LLM("m")
    a = texts(llm)
    b = wrap(llm)
    c = lazy(llm)
    keep(llm)
"""


def test_module_helpers_are_followed() -> None:
    """A call of a function of the same module is followed into its body: a result that
    holds nothing of the engine is data, one that may (a tuple, a generator) holds it, and
    a helper that stores its argument makes the fix unsafe."""
    from lint_gpu_tests.fixplan.flow import module_helpers, summarize_helper

    tree = ast.parse(HELPERS)
    helpers = module_helpers(tree)
    assert sorted(helpers) == ["keep", "lazy", "test_x", "texts", "wrap"]
    assert [(n, summarize_helper(n, helpers).returns, summarize_helper(n, helpers).keeps)
            for n in ("texts", "wrap", "lazy", "keep")] == [
        ("texts", False, ""), ("wrap", True, ""), ("lazy", True, ""),
        ("keep", False, "keeps what it is given past the call (in a global, an attribute or "
                        "a container), the engine included")]
    func = tree.body[-1]
    assert isinstance(func, ast.FunctionDef)
    flow = value_flow(func, func.body, {"llm"}, None, helpers=helpers)
    assert flow.tainted == {"llm", "b", "c"}
    assert flow.unfollowed_call(func.body) == Risky(
        "`keep()` keeps what it is given past the call (in a global, an attribute or a "
        "container), the engine included")


@pytest.mark.parametrize(("source", "cycle"), [
    ("box['self'] = box", "box"),
    ("xs.append(xs)", "xs"),
    ("xs += [xs]", "xs"),
    ("inner = [outer]\nouter.append(inner)", "outer"),
    ("box['me'] = {'again': box}", "box"),
    ("box['a'] = box['b']", None),  # an element, not the dict itself
    ("d['k'] = d.get('k')", None),
    ("xs.append(len(xs))", None),
    ("xs = list(xs)", None),  # a new list holding the old one's elements
])
def test_self_referencing_container(source: str, cycle: str | None) -> None:
    """Which containers holding the engine refer to themselves (the cycle keeps
    the engine alive past the block, so the fix is unsafe)."""
    tainted = {"box", "xs", "outer", "d"}
    assert self_referencing(list(ast.walk(ast.parse(source))), tainted) == cycle


GUARDED = '''\
from vllm import LLM


def test_guarded():
    llm = LLM("m")
    try:
        assert llm is not None
        assert llm.generate(["a"])
    finally:
        if {guard}:
            llm.llm_engine.engine_core.shutdown()
'''


@pytest.mark.parametrize("guard", ["llm is not None", "llm != None", "llm"])
def test_a_comparison_with_none_is_no_identity_check(guard: str) -> None:
    """``llm is None`` and ``llm is not None`` answer the same for a ``weakref.proxy`` as for
    the engine (a proxy is never ``None``): the wrap is safe, the guarded shutdown goes,
    however the guard tests the engine's presence."""
    source = GUARDED.format(guard=guard).encode()
    found = check_source(source, "tests/test_case.py", Config())
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else None)
            for v in found] == [(5, "GPU001", "safe"), (6, "GPU003", "safe")]
    assert fix_source(source, "tests/test_case.py", Config()).new_source == (
        b"import weakref\n\n\n"
        b"def test_guarded(vllm_runner):\n"
        b"    with vllm_runner(\"m\") as runner:\n"
        b"        llm = weakref.proxy(runner.llm)\n"
        b"        assert llm is not None\n"
        b"        assert llm.generate([\"a\"])\n")


def test_a_comparison_with_another_object_is_an_identity_check() -> None:
    source = GUARDED.replace("assert llm is not None", "assert llm is not object()")
    found = check_source(source.encode(), "tests/test_case.py", Config())
    assert {v.fix.reason for v in found if v.fix} == {
        "identity checks (`is`) on the engine see a `weakref.proxy`"}


def test_a_helper_keeps_only_what_it_hands_on_from_the_parameter_given_the_engine() -> None:
    """A helper of the module is followed parameter by parameter: handing a value derived
    from another parameter to a call the analysis does not follow keeps nothing of the
    engine (safe); handing one derived from the engine's parameter may keep it, and the
    reason names that value and that call."""
    source = ("from vllm import LLM\nfrom tests.utils import compare, remember\n\n\n"
              "def check(llm, expected):\n    for out in llm.generate(['hi']):\n"
              "        compare(out.outputs[0].text, expected[0])\n\n\n"
              "def stash(name, llm):\n    remember(name, [llm])\n\n\n"
              "def test_x():\n    llm = LLM('m')\n    check(llm, ['x'])\n\n\n"
              "def test_y():\n    llm = LLM('m')\n    stash('a', llm)\n")
    found = [v for v in check_source(source.encode(), "tests/test_x.py", Config())
             if v.code == "GPU001"]
    assert [(v.location.row, v.fix.applicability.value if v.fix else "",
             v.fix.reason if v.fix else "") for v in found] == [
        (15, "safe", ""),
        (20, "unsafe", "`stash()` may keep what it is given past the call: it hands "
                       "`[llm]`, derived from its arguments, to `remember()`, which the "
                       "analysis does not follow")]

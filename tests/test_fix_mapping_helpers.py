"""Under ``target = "vllm"``: what the planner reads from a ``**mapping``
(:mod:`lint_gpu_tests.analysis.mappings`), who may pass a helper the runner fixture
(:mod:`lint_gpu_tests.analysis.helper_calls`), the reasons reported when a fix is unsafe or missing,
and the ``_runner_kwargs`` helper the fix adds, run against what vLLM's runner hands to ``LLM``.
"""

from __future__ import annotations

import ast
import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.analysis.helper_calls import HelperCallers, helper_callers
from lint_gpu_tests.analysis.mappings import (
    RUNNER_KWARGS_HELPER,
    RUNNER_KWARGS_NAME,
    resolve_mapping,
)
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config

FIX_DIR = Path(__file__).parent / "fixtures" / "fix"
VLLM = Config(target="vllm")


def _module(source: str) -> ModuleAnalysis:
    text = textwrap.dedent(source)
    return ModuleAnalysis.build(ast.parse(text), text, "tests/test_case.py", VLLM)


def _keys(source: str) -> list[list[str]] | str:
    """The key lists the ``**`` argument of the module's only ``LLM(...)`` call may have, or
    the reason it is unknown."""
    module = _module(source)
    (site,) = module.engines
    assert site.function is not None
    star = next(k.value for k in site.call.keywords if k.arg is None)
    mapping = resolve_mapping(module, site.function, star, site.call)
    if mapping.entries is None:
        return mapping.reason
    return [sorted(e) for e in mapping.entries]


HEAD = 'from vllm import LLM\nimport pytest\nM = "m"\n'

RESOLVED: dict[str, tuple[str, list[list[str]] | str]] = {
    "dict display": ("def test_x():\n    LLM(**{'model': M, 'seed': 1})\n", [["model", "seed"]]),
    "local dict": ("def test_x():\n    kw = dict(model=M)\n    LLM(**kw)\n", [["model"]]),
    "local read only": (
        "def test_x():\n    kw = {'model': M}\n    print(len(kw), kw.get('model'), 'x' in kw)\n"
        "    LLM(**kw)\n", [["model"]]),
    "local changed": ("def test_x():\n    kw = {'model': M}\n    kw['seed'] = 1\n    LLM(**kw)\n",
                      "`kw` may be changed in `test_x()` before the call"),
    "local handed out": ("def test_x():\n    kw = {'model': M}\n    fill(kw)\n    LLM(**kw)\n",
                         "`kw` may be changed in `test_x()` before the call"),
    "local in a branch": ("def test_x(a):\n    if a:\n        kw = {'model': M}\n    LLM(**kw)\n",
                          "`kw` is not bound once, before the call, in `test_x()`"),
    "local bound twice": ("def test_x():\n    kw = {}\n    kw = {'model': M}\n    LLM(**kw)\n",
                          "`kw` is a parameter or bound more than once in `test_x()`"),
    "parameter": ("def test_x(kw):\n    LLM(**kw)\n", "`kw` is a parameter of `test_x()`"),
    "parametrized": (
        "@pytest.mark.parametrize('a, kw', [(1, {'model': M}), pytest.param(2, {'model': M, "
        "'seed': 1})])\ndef test_x(a, kw):\n    LLM(**kw)\n", [["model"], ["model", "seed"]]),
    "parametrized from a constant": (
        "ROWS = [{'model': M}]\n@pytest.mark.parametrize('kw', ROWS)\n"
        "def test_x(kw):\n    LLM(**kw)\n", [["model"]]),
    "parametrized indirect": (
        "@pytest.mark.parametrize('kw', [{'model': M}], indirect=True)\n"
        "def test_x(kw):\n    LLM(**kw)\n", "`kw` is a parameter of `test_x()`"),
    "table by parameter": (
        "T = {'a': {'model': M}, 'b': B}\nB = {'model': M, 'tokenizer': M}\n"
        "def test_x(name):\n    LLM(**T[name])\n", [["model"], ["model", "tokenizer"]]),
    "table by literal key": ("T = {'a': {'model': M}, 'b': {}}\ndef test_x():\n    LLM(**T['a'])\n",
                             [["model"]]),
    "table entry changed": (
        "T = {'a': {'model': M}}\nT['a']['seed'] = 1\ndef test_x(n):\n    LLM(**T[n])\n",
        "`T` may be changed by the module"),
    "table entry updated": (
        "T = {'a': {'model': M}}\ndef test_y():\n    T.get('a').update(seed=1)\n"
        "def test_x(n):\n    LLM(**T[n])\n", "`T` may be changed by the module"),
    "table entries handed out": (
        "T = {'a': {'model': M}}\ndef test_y():\n    for e in T.values():\n        e['x'] = 1\n"
        "def test_x(n):\n    LLM(**T[n])\n", "`T` may be changed by the module"),
    "entry held by a changed list": (
        "A = {'model': M}\nROWS = [A]\nROWS[0]['seed'] = 1\ndef test_x():\n    LLM(**A)\n",
        "`A` may be changed by the module"),
    "flat mapping iterated": (
        "A = {'model': M}\ndef test_x():\n    names = [k for k in A]\n    LLM(**A)\n",
        [["model"]]),
    "constant rebound": ("C = {'model': M}\nC = {}\ndef test_x():\n    LLM(**C)\n",
                         "`C` is not a module constant the fix can read"),
    "call": ("def test_x(args):\n    LLM(**vars(args))\n",
             "`vars(args)` is only known at run time"),
}


@pytest.mark.parametrize("case", list(RESOLVED))
def test_resolve_mapping(case: str) -> None:
    source, expected = RESOLVED[case]
    assert _keys(HEAD + source) == expected


def _callers(source: str) -> HelperCallers | str:
    module = _module(source)
    (site,) = module.engines
    assert site.function is not None
    return helper_callers(module, site.function, "vllm_runner")


HELPER = "from vllm import LLM\n\ndef _h(p):\n    llm = LLM('m')\n    return 1\n\n"


@pytest.mark.parametrize(("calls", "expected"), [
    ("def test_a():\n    _h(1)\n\ndef test_b(vllm_runner):\n    f = lambda: _h(2)\n",
     HelperCallers("_h", frozenset({7}), False)),
    ("def _other():\n    _h(1)\n",
     "`_h()` is called from `_other()` (line 8), which cannot request the `vllm_runner` fixture"),
    ("x = _h(1)\n", "`_h()` is called from the module level (line 7), which cannot request the "
                    "`vllm_runner` fixture"),
    ("def test_a(x=_h(1)):\n    pass\n",
     "`_h()` is called from a decorator or default value of `test_a()` (line 7), which cannot "
     "request the `vllm_runner` fixture"),
    ("def test_a():\n    run = _h\n",
     "`_h` is used other than by a call (line 8), so not every use can be given the "
     "`vllm_runner` fixture"),
    ("class TestA(unittest.TestCase):\n    def test_a(self):\n        _h(1)\n",
     "`_h()` is called from `test_a()` (line 9), which cannot request the `vllm_runner` "
     "fixture"),
    ("", "`_h()` is not called in this module: its callers are in other modules, and "
         "`--fix` rewrites one module at a time, so it cannot give the helper and every "
         "caller the `vllm_runner` fixture together"),
])
def test_helper_callers(calls: str, expected: HelperCallers | str) -> None:
    assert _callers(HELPER + calls) == expected


def _reasons(case: str) -> dict[int, tuple[str, str]]:
    """GPU001 row -> (applicability, reason) for a fix fixture, checked with target vllm."""
    source = (FIX_DIR / case / "before.py").read_bytes()
    found = check_source(source, "tests/test_case.py", VLLM)
    return {v.location.row: (v.fix.applicability.value, v.fix.reason) for v in found
            if v.code == "GPU001" and v.fix is not None}


CANNOT = ("vLLM's `VllmRunner` lives in its tests/conftest.py, which a helper cannot import, "
          "and ")


ISOLATE_SAFELY = "; `--fix-strategy isolate` would fix it safely"


def isolate_unsafely(fixture: str) -> str:
    """The hint a no-fix reason ends with when isolating the test would be unsafe."""
    return (f"; `--fix-strategy isolate` would fix it as an unsafe fix (the fixture "
            f"`{fixture}` is sent to the child by pickle: its value must pickle, and what its "
            "set-up changed in this process (other than environment variables) is not seen "
            "there)")


def test_reasons_mapping_target_vllm_unsafe() -> None:
    runtime = (": the rewrite maps its keys onto vLLM's `VllmRunner` at run time, but a falsy "
               "`compilation_config` in it would be replaced by the runner's own graph sizes")
    assert _reasons("mapping_target_vllm_unsafe") == {
        13: ("unsafe", "`engine_config` is a parameter of `test_engine_from_fixture()`"
             + runtime),
        21: ("none", "`NO_MODEL` does not always hold `model`" + ISOLATE_SAFELY),
        26: ("none", "`compilation_config=None` in `FALSY_COMPILATION` would be replaced by "
                     "vLLM's `VllmRunner` with its own graph sizes, and the fix does not "
                     "rewrite the mapping" + ISOLATE_SAFELY),
        31: ("none", "the model is hidden in one of several `**` mappings, which the fix does "
                     "not merge (a key in two of them is an error for `LLM`)"
                     + isolate_unsafely("extra")),
        36: ("unsafe", "`CHANGED` may be changed by the module" + runtime),
    }


def test_reasons_helpers_target_vllm() -> None:
    assert _reasons("helper_target_vllm_nofix") == {
        10: ("none", CANNOT + "`_greedy_texts()` is called from `_both()` (line 18), which "
                              "cannot request the `vllm_runner` fixture"),
        28: ("none", CANNOT + "`_count` is used other than by a call (line 34), so not every "
                              "use can be given the `vllm_runner` fixture"),
        38: ("none", CANNOT + "`_warm_up()` is called from the module level (line 42), which "
                              "cannot request the `vllm_runner` fixture"),
    }
    assert _reasons("helper_target_vllm_public") == {
        7: ("unsafe", "`greedy_texts()` is public: a module that imports it must now pass "
                      "`vllm_runner` too (`--fix` rewrites one module at a time and does not "
                      "change callers in other modules)"),
    }
    assert _reasons("helper_target_vllm") == {10: ("safe", ""), 45: ("safe", ""),
                                              48: ("safe", "")}


def test_public_helper_of_a_conftest_has_no_fix() -> None:
    source = (FIX_DIR / "helper_target_vllm_public" / "before.py").read_bytes()
    (gpu001,) = [v for v in check_source(source, "tests/conftest.py", VLLM) if v.code == "GPU001"]
    assert gpu001.fix is not None
    assert (gpu001.fix.applicability.value, gpu001.fix.reason) == (
        "none", CANNOT + "`greedy_texts()` is public in a module others import: their calls "
                         "would need `vllm_runner` too, and `--fix` rewrites one module at a "
                         "time (the helper and its callers in other modules are not fixed "
                         "together)")


def test_an_existing_helper_of_another_kind_blocks_the_fix() -> None:
    source = HEAD + "def _runner_kwargs(kw):\n    return kw\n\ndef test_x(kw):\n    LLM(**kw)\n"
    (gpu001,) = [v for v in check_source(source.encode(), "tests/test_case.py", VLLM)
                 if v.code == "GPU001"]
    assert gpu001.fix is not None
    assert (gpu001.fix.applicability.value, gpu001.fix.reason) == (
        "none", "the module already defines `_runner_kwargs`, the name the fix gives its helper"
        + isolate_unsafely("kw"))


def _runner_kwargs() -> Any:
    namespace: dict[str, Any] = {}
    exec(RUNNER_KWARGS_HELPER, namespace)  # noqa: S102 - our own template
    return namespace[RUNNER_KWARGS_NAME]


def test_the_helper_maps_names_and_fills_only_missing_keys() -> None:
    helper = _runner_kwargs()
    mapping = {"model": "m", "tokenizer": "t", "max_model_len": 64}
    assert helper(mapping, max_model_len=None, block_size=None) == {
        "model_name": "m", "tokenizer_name": "t", "max_model_len": 64, "block_size": None}
    assert mapping == {"model": "m", "tokenizer": "t", "max_model_len": 64}
    assert helper({"model": "m"}) == {"model_name": "m"}
    with pytest.raises(KeyError):
        helper({"seed": 0})


def test_helper_with_callers_in_other_modules_of_the_tree(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A run over the whole tree sees the helper's callers in other modules, but
    ``--fix`` plans and rewrites one module at a time: the helper and those callers are never
    fixed together, so neither is fixed (no ``[*]``), and the reason says why."""
    from click.testing import CliRunner

    from lint_gpu_tests.interfaces import cli

    (tmp_path / "pyproject.toml").write_text('[tool.gpu-test-lint]\ntarget = "vllm"\n'
                                             'test-roots = ["tests"]\n')
    tests = tmp_path / "tests"
    tests.mkdir()
    helper = ("import pytest\nfrom vllm import LLM\n\n\n"
              "def greedy_texts(model):\n    llm = LLM(model)\n"
              "    outputs = llm.generate(['Hello'])\n    return outputs\n\n\n"
              "def _private_texts(model):\n    llm = LLM(model)\n"
              "    outputs = llm.generate(['Hi'])\n    return outputs\n\n\n"
              "@pytest.fixture\ndef reference():\n    return greedy_texts('m')\n")
    caller = ("from tests.generation import _private_texts, greedy_texts\n\n\n"
              "def test_greedy():\n    assert greedy_texts('m') == _private_texts('m')\n")
    (tests / "generation.py").write_text(helper)
    (tests / "test_greedy.py").write_text(caller)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.cli, ["check", "--no-cache", "--fix", "--output-format",
                                          "json", "tests"])
    found = [(os.path.relpath(v["filename"], tmp_path).replace(os.sep, "/"),
              v["location"]["row"], v["code"], v["fix"],
              v["no_fix_reason"]) for v in json.loads(result.stdout)]
    assert found == [
        ("tests/generation.py", 6, "GPU001", None, CANNOT + "`greedy_texts()` is public in a "
         "module others import: their calls would need `vllm_runner` too, and `--fix` "
         "rewrites one module at a time (the helper and its callers in other modules are not "
         "fixed together)"),
        ("tests/generation.py", 12, "GPU001", None, CANNOT + "`_private_texts()` is not "
         "called in this module: its callers are in other modules, and `--fix` rewrites one "
         "module at a time, so it cannot give the helper and every caller the `vllm_runner` "
         "fixture together"),
    ]
    assert (tests / "generation.py").read_text() == helper
    assert (tests / "test_greedy.py").read_text() == caller


def test_public_helper_of_a_test_module_no_file_imports_is_safe(tmp_path: Path) -> None:
    """In a run over the tree, a test module that no file imports keeps its public helper to
    its own tests: giving the helper the runner fixture changes no other module's call."""
    from lint_gpu_tests.api import check_paths

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef vllm_runner():\n    return None\n")
    source = (FIX_DIR / "helper_target_vllm_public" / "before.py").read_text()
    (tmp_path / "tests" / "test_greedy.py").write_text(source)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = check_paths(["tests"], Config(root=str(tmp_path), target="vllm"), jobs=1,
                             cache=False)
    finally:
        os.chdir(old)
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else None,
             v.fix.reason if v.fix else None) for v in result.violations] == [
        (7, "GPU001", "safe", "")]

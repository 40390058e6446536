"""Property tests: the checker never raises and every fix is sound (issue 6).

Two sources of programs:

* ``hypothesmith``: arbitrary valid Python from the grammar and from LibCST's node types,
  with and without an engine import in front, checked as a test module. ``check_source``
  returns violations (or ``GPU900``) and never raises; ``fix_source`` never raises and its
  output parses.
* :func:`engine_modules`: test modules composed from the patterns the rules are about (LLM
  imported in all its spellings, fixtures and helpers, ``del``/``gc.collect()``/
  ``empty_cache()``, finalizers, ``try``/``finally``, runners with and without ``with``,
  aliases, returns, ``self`` stores, closures, loops, ``if``, nested engines, ``# noqa``,
  CRLF and tab indentation). On those, every fix result parses, is idempotent, leaves no
  violation whose fix applies, adds no pyflakes warning and keeps the line endings; a file
  with no violation is left byte for byte.

Example counts come from the hypothesis profile (``tests/hardening/conftest.py``).
"""

from __future__ import annotations

import ast
import io
from collections import Counter

import hypothesmith
import pyflakes.api
import pyflakes.reporter
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from lint_gpu_tests.config import Config
from lint_gpu_tests.engine import PARSE_ERROR_CODE, check_source, fix_source, wanted_fixes
from lint_gpu_tests.ftypes import Violation

PATH = "tests/test_fuzz_case.py"
CONFIG = Config()
VLLM_CONFIG = Config(target="vllm")


def _is_violation_list(found: object) -> bool:
    return isinstance(found, list) and all(isinstance(v, Violation) for v in found)


def _parses(data: bytes) -> bool:
    try:
        ast.parse(data)
    except SyntaxError:
        return False
    return True


# --------------------------------------------------------------------------- hypothesmith

ENGINE_PRELUDE = "from vllm import LLM\nimport gc\n\n"


def _check_arbitrary(code: str, unsafe: bool) -> None:
    source = code.encode("utf-8")
    found = check_source(source, PATH, CONFIG)
    assert _is_violation_list(found)
    if any(v.code == PARSE_ERROR_CODE for v in found):
        assert len(found) == 1
        return
    outcome = fix_source(source, PATH, CONFIG, unsafe=unsafe)
    if outcome.new_source is not None:
        assert _parses(outcome.new_source)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles
@given(code=hypothesmith.from_grammar(), prelude=st.booleans(), unsafe=st.booleans())
def test_grammar_programs_never_crash(code: str, prelude: bool, unsafe: bool) -> None:
    _check_arbitrary((ENGINE_PRELUDE if prelude else "") + code, unsafe)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles
@given(code=hypothesmith.from_node(), prelude=st.booleans(), unsafe=st.booleans())
def test_libcst_node_programs_never_crash(code: str, prelude: bool, unsafe: bool) -> None:
    _check_arbitrary((ENGINE_PRELUDE if prelude else "") + code, unsafe)


# --------------------------------------------------------------------------- test modules

# Each import spelling: (import lines, expression that builds an engine).
ENGINE_SPELLINGS = [
    (["from vllm import LLM"], "LLM"),
    (["from vllm import LLM as Engine"], "Engine"),
    (["import vllm"], "vllm.LLM"),
    (["from vllm.entrypoints.llm import LLM"], "LLM"),
    (["from vllm import LLM, SamplingParams"], "LLM"),
]
EXTRA_IMPORTS = [
    "import gc",
    "import torch",
    "import pytest",
    "import atexit",
    "import weakref",
    "from vllm.distributed import cleanup_dist_env_and_memory",
    "from tests.utils import wait_for_gpu_memory_to_clear",
]
CLEANUPS = [
    "del {v}",
    "gc.collect()",
    "torch.cuda.empty_cache()",
    "torch.accelerator.empty_cache()",
    "cleanup_dist_env_and_memory()",
    "wait_for_gpu_memory_to_clear(devices=[0], threshold_ratio=0.1)",
    "{v}.llm_engine.engine_core.shutdown()",
]
NOQA = ["", "", "", "  # noqa", "  # noqa: GPU001", "  # noqa: GPU004", "  # keep"]

# A block is a list of items; an item is a line (str) or (header, block).
Item = object


@st.composite
def _ctor(draw: st.DrawFn, ctor: str) -> str:
    args = draw(st.sampled_from([
        '"facebook/opt-125m"',
        'MODEL, enforce_eager=True',
        'model=MODEL, max_model_len=512',
        'MODEL, tokenizer=MODEL, seed=0',
        '"m", **kwargs',
        'MODEL,\n    enforce_eager=True,\n',
    ]))
    if "**kwargs" in args:
        args = args.replace("**kwargs", "**{'seed': 0}")
    return f"{ctor}({args})"


@st.composite
def _engine_block(draw: st.DrawFn, ctor: str, var: str, depth: int) -> list[Item]:
    """Statements that build engine ``var`` and do things with it."""
    noqa = draw(st.sampled_from(NOQA))
    body: list[Item] = [f"{var} = {draw(_ctor(ctor))}{noqa}"]
    uses = draw(st.lists(st.sampled_from([
        f"out = {var}.generate(PROMPTS)",
        f"assert {var}.generate(PROMPTS)",
        f"other = {var}",
        f"print({var})",
        f"assert isinstance({var}, object)",
        f"tok = {var}.get_tokenizer()",
        "assert PROMPTS",
        "CLOSURE",
        "LOOP",
        "IF",
        "NESTED",
    ]), max_size=4))
    for use in uses:
        if use == "CLOSURE":
            body.append(("def inner():", [f"return {var}.generate(PROMPTS)"]))
            body.append("inner()")
        elif use == "LOOP":
            body.append(("for prompt in PROMPTS:", [f"{var}.generate([prompt])"]))
        elif use == "IF":
            body.append((f"if {var} is not None:", [f"{var}.generate(PROMPTS)"]))
            if draw(st.booleans()):
                body.append(("else:", ["pass"]))
        elif use == "NESTED" and depth < 1:
            body.extend(draw(_engine_block(ctor, var + "2", depth + 1)))
        elif use != "NESTED":
            body.append(use)
    style = draw(st.sampled_from(["plain", "cleanup", "finalizer", "atexit", "try", "loop"]))
    if style == "cleanup":
        for line in draw(st.lists(st.sampled_from(CLEANUPS), min_size=1, max_size=4)):
            body.append(line.format(v=var) + draw(st.sampled_from(NOQA)))
    elif style == "finalizer":
        body.insert(1, f"request.addfinalizer({var}.llm_engine.engine_core.shutdown)")
    elif style == "atexit":
        body.insert(1, f"atexit.register({var}.llm_engine.engine_core.shutdown)")
    elif style == "try":
        inner = body[1:] or ["pass"]
        final = [c.format(v=var) for c in draw(st.lists(
            st.sampled_from(CLEANUPS), min_size=1, max_size=3))]
        body = [body[0], ("try:", inner), ("finally:", final)]
    elif style == "loop":
        body = [("for _ in range(2):", body)]
    return body


@st.composite
def _runner_block(draw: st.DrawFn) -> list[Item]:
    runner = draw(st.sampled_from(["vllm_runner", "VllmRunner"]))
    alias = draw(st.sampled_from([
        "llm = runner.llm",
        "llm = weakref.proxy(runner.llm)",
        "out = runner.llm.generate(PROMPTS)",
    ]))
    if draw(st.booleans()):
        return [(f'with {runner}("m", enforce_eager=True) as runner:',
                 [alias, "assert runner.llm.generate(PROMPTS)"])]
    return [f'runner = {runner}("m")', alias, "runner.llm.generate(PROMPTS)"]


@st.composite
def _function(draw: st.DrawFn, ctor: str, index: int) -> list[Item]:
    kind = draw(st.sampled_from(["test", "test", "fixture", "helper", "class", "method",
                                 "clean"]))
    if kind == "clean":
        return [(f"def test_{index}(vllm_runner):", [
            ('with vllm_runner(MODEL) as runner:', [
                "llm = weakref.proxy(runner.llm)", "assert llm.generate(PROMPTS)"]),
        ]), ""]
    body = draw(_engine_block(ctor, "llm", 0))
    if draw(st.booleans()):
        body = draw(_runner_block()) + body
    params = ["request"] if any(
        isinstance(i, str) and "request." in i for i in body) else []
    if draw(st.booleans()):
        params.append("vllm_runner")
    if kind == "fixture":
        scope = draw(st.sampled_from(["", '(scope="module")']))
        end = draw(st.sampled_from(["yield llm", "return llm", "yield weakref.proxy(llm)"]))
        body = body + [end]
        return ["@pytest.fixture" + scope,
                (f"def engine_{index}({', '.join(params)}):", body), ""]
    if kind == "helper":
        end = draw(st.sampled_from(["return llm", "return None", "pass"]))
        return [(f"def build_{index}({', '.join(params)}):", body + [end]), ""]
    if kind == "class":
        store = draw(st.sampled_from(["self.llm = llm", "self.x = 1"]))
        return [(f"class Holder{index}:", [
            ("def __init__(self):", body + [store]),
        ]), ""]
    if kind == "method":
        return [(f"class TestGroup{index}:", [
            (f"def test_m{index}({', '.join(['self', *params])}):", body),
        ]), ""]
    decorator = draw(st.sampled_from(["", "", "@pytest.mark.slow",
                                      "@create_new_process_for_each_test()"]))
    head = [decorator] if decorator else []
    asyncness = draw(st.sampled_from(["", "", "async "]))
    return [*head, (f"{asyncness}def test_{index}({', '.join(params)}):", body), ""]


def _render(items: list[Item], indent: str, level: int, out: list[str]) -> None:
    for item in items:
        if isinstance(item, tuple):
            header, block = item
            out.append(indent * level + header)
            _render(block or ["pass"], indent, level + 1, out)
        else:
            for line in str(item).split("\n"):
                out.append(indent * level + line if line else "")


@st.composite
def engine_modules(draw: st.DrawFn) -> bytes:
    """A test module built from the engine patterns (bytes, valid Python)."""
    imports, ctor = draw(st.sampled_from(ENGINE_SPELLINGS))
    extra = draw(st.lists(st.sampled_from(EXTRA_IMPORTS), unique=True)) + ["import weakref"]
    if draw(st.booleans()):
        extra.append("from tests.utils import create_new_process_for_each_test")
    items: list[Item] = [*(sorted(set(extra)) + ["import pytest"]), *imports, "",
                         'MODEL = "facebook/opt-125m"', 'PROMPTS = ["Hello"]', ""]
    items = list(dict.fromkeys(i for i in items if i)) + [""]
    if draw(st.booleans()):
        items += [f"engine = {draw(_ctor(ctor))}", ""]
    for index in range(draw(st.integers(min_value=1, max_value=3))):
        items.extend(draw(_function(ctor, index)))
    lines: list[str] = []
    indent = draw(st.sampled_from(["    ", "    ", "\t", "  "]))
    _render(items, indent, 0, lines)
    text = "\n".join(lines).rstrip("\n") + "\n"
    ending = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    data = text.replace("\n", ending).encode("utf-8")
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        data = b"\xef\xbb\xbf" + data
    return data


def _pyflakes(data: bytes) -> Counter[tuple[str, str]]:
    """pyflakes warnings keyed by kind and first argument (line numbers move in a fix)."""
    warnings: list[tuple[str, str]] = []

    class Collect(pyflakes.reporter.Reporter):
        def __init__(self) -> None:
            super().__init__(io.StringIO(), io.StringIO())

        def flake(self, message: object) -> None:  # type: ignore[override]
            args = getattr(message, "message_args", ())
            warnings.append((type(message).__name__, str(args[0]) if args else ""))

    pyflakes.api.check(data.decode("utf-8-sig"), "case.py", Collect())
    return Counter(warnings)


def _endings(data: bytes) -> set[bytes]:
    crlf = data.count(b"\r\n")
    lf = data.count(b"\n") - crlf
    return ({b"\r\n"} if crlf else set()) | ({b"\n"} if lf else set())


@given(source=engine_modules(), unsafe=st.booleans(), vllm_target=st.booleans())
def test_fix_is_sound_on_engine_modules(source: bytes, unsafe: bool, vllm_target: bool) -> None:
    assume(_parses(source))
    note(source.decode("utf-8"))
    config = VLLM_CONFIG if vllm_target else CONFIG
    found = check_source(source, PATH, config)
    assert _is_violation_list(found)
    assert all(v.code != PARSE_ERROR_CODE for v in found)
    outcome = fix_source(source, PATH, config, unsafe=unsafe)
    assert outcome.error is None
    if not found:
        assert outcome.new_source is None  # nothing to fix: byte-identical
        return
    if outcome.new_source is None:
        assert not wanted_fixes(found, unsafe)
        return
    fixed = outcome.new_source
    note(fixed.decode("utf-8"))
    assert _parses(fixed)
    assert fixed.startswith(b"\xef\xbb\xbf") == source.startswith(b"\xef\xbb\xbf")
    assert _endings(fixed) <= _endings(source)
    again = fix_source(fixed, PATH, config, unsafe=unsafe)
    assert again.new_source is None, "fix is not idempotent"
    assert not wanted_fixes(check_source(fixed, PATH, config), unsafe)
    new_warnings = _pyflakes(fixed) - _pyflakes(source)
    assert not new_warnings, f"fix added pyflakes warnings: {new_warnings}"

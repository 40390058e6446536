"""Property tests: the checker never raises and every fix is sound.

Two sources of programs:

* ``hypothesmith``: arbitrary valid Python from the grammar and from LibCST's node types,
  with and without an engine import in front, checked as a test module. ``check_source``
  returns violations (or ``GPU900``) and never raises; ``fix_source`` never raises and its
  output parses.
* :func:`engine_modules`: test modules composed from the patterns the rules are about (LLM
  imported in all its spellings, fixtures and helpers, ``del``/``gc.collect()``/
  ``empty_cache()``, finalizers, ``try``/``finally``, runners with and without ``with``,
  aliases, returns, ``self`` stores, closures, loops, ``if``, nested engines, ``# noqa``,
  CRLF and tab indentation, and values derived from the engine -- containers, tuples,
  bound methods, ``functools.partial``, lazy generators -- used after the manual cleanup),
  tests in which the engine's name is shadowed (a parameter, a local, a loop or
  comprehension variable: never reported), and prompt constants of a few hundred
  ``"..." + "..."`` parts.
  On those, every fix result parses, is idempotent, leaves no violation whose fix applies,
  adds no pyflakes warning and keeps the line endings; a file with no violation is left
  byte for byte; and nothing that can reach an engine is used after the runner's
  with-block (:func:`late_uses`, an AST walk of its own, independent of the planner).

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

from lint_gpu_tests.checking.checker import PARSE_ERROR_CODE, check_source, wanted_fixes
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source
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
    "import functools",
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

#: Values derived from engine ``{v}``: (binding, a use of it placed after the cleanup).
DERIVED = [
    ('box_{v} = {{"engine": {v}}}', 'assert box_{v}["engine"].generate(PROMPTS)'),
    ("pair_{v} = ({v}, 1)", "assert pair_{v}[0].generate(PROMPTS)"),
    ("gen_{v} = {v}.generate", "assert gen_{v}(PROMPTS)"),
    ("run_{v} = functools.partial({v}.generate, PROMPTS)", "assert run_{v}()"),
    ("lazy_{v} = (o.outputs for o in {v}.generate(PROMPTS))", "assert list(lazy_{v})"),
    ("engines_{v} = [{v}]", ("for e_{v} in engines_{v}:", ["e_{v}.generate(PROMPTS)"])),
]


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
        f"assert weakref.proxy({var}).generate(PROMPTS)",
        f"weak = weakref.proxy({var})",
        "assert PROMPTS",
        "CLOSURE",
        "LOOP",
        "IF",
        "NESTED",
        "DERIVED",
        "DERIVED",
    ]), max_size=4))
    late: list[Item] = []
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
        elif use == "DERIVED":
            binding, later = draw(st.sampled_from(DERIVED))
            body.append(binding.format(v=var))
            late.append(later.format(v=var) if isinstance(later, str) else (
                later[0].format(v=var), [line.format(v=var) for line in later[1]]))
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
    # Uses of the derived values come last: after ``del llm`` and the cleanup.
    body = body + late
    if style == "loop":
        body = [("for _ in range(2):", body)]
    return body


@st.composite
def _runner_block(draw: st.DrawFn) -> list[Item]:
    runner = draw(st.sampled_from(["vllm_runner", "VllmRunner"]))
    alias = draw(st.sampled_from([
        "llm = runner.llm",
        "llm = weakref.proxy(runner.llm)",
        "out = runner.llm.generate(PROMPTS)",
        "llm = runner.llm\nweak = weakref.proxy(llm)",
    ]))
    if draw(st.booleans()):
        return [(f'with {runner}("m", enforce_eager=True) as runner:',
                 [alias, "assert runner.llm.generate(PROMPTS)"])]
    return [f'runner = {runner}("m")', alias, "runner.llm.generate(PROMPTS)"]


SHADOWED = "  # shadowed"


@st.composite
def _shadowed(draw: st.DrawFn, ctor: str, index: int) -> Item:
    """A test in which the engine's name is bound to something else (a parameter, a local,
    a loop or comprehension variable): every line is marked ``# shadowed`` and must get no
    report."""
    head = ctor.split(".")[0]
    call = f'made = {ctor}("x")'
    how = draw(st.sampled_from(["param", "local", "loop", "comprehension"]))
    if how == "param":
        header, body = f"def test_{index}({head}):", [call, "del made"]
    elif how == "local":
        header, body = f"def test_{index}():", [f"{head} = object", call, "del made"]
    elif how == "loop":
        header, body = f"def test_{index}():", [(f"for {head} in (object,):",
                                                  [call + SHADOWED, "del made" + SHADOWED])]
    else:
        header, body = f"def test_{index}():", [
            f'made = [{ctor}("x") for {head} in (object,)]', "del made"]
    return (header + SHADOWED, [line + SHADOWED if isinstance(line, str) else line
                                for line in body])


def _concatenation(draw: st.DrawFn) -> str:
    """A prompt constant of a few hundred ``"..." + "..."`` parts (deep for the parsers)."""
    parts = draw(st.sampled_from([150, 400, 650]))
    return "LONG_PROMPT = " + " + ".join(f'"p{i} "' for i in range(parts))


@st.composite
def _function(draw: st.DrawFn, ctor: str, index: int) -> list[Item]:
    kind = draw(st.sampled_from(["test", "test", "fixture", "helper", "class", "method",
                                 "clean", "shadow"]))
    if kind == "shadow":
        return [draw(_shadowed(ctor, index)), ""]
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
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        items += [_concatenation(draw), ""]
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


RUNNER_CALLABLES = frozenset({"vllm_runner", "VllmRunner"})


def _callee(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _holds(node: ast.AST | None, derived: set[str]) -> bool:
    """Whether the value of ``node`` keeps one of ``derived`` reachable (for the programs
    :func:`engine_modules` writes: a call's result is data, except a weak proxy or a
    ``partial`` of what it wraps)."""
    if node is None:
        return False
    if isinstance(node, ast.Name):
        return node.id in derived
    if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        return _holds(node.value, derived)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_holds(e, derived) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(_holds(v, derived) for v in node.values)
    if isinstance(node, (ast.GeneratorExp, ast.Lambda)):
        return any(isinstance(n, ast.Name) and n.id in derived for n in ast.walk(node))
    if isinstance(node, ast.Call) and _callee(node.func) in ("proxy", "partial"):
        return any(_holds(a, derived) for a in node.args)
    return False


def late_uses(tree: ast.Module) -> list[str]:
    """Every read of a name that can reach a runner's engine, after that runner's
    ``with`` block has ended (and before the name is bound again), as ``"name@line"``."""
    problems: list[str] = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        stores = [(n.id, n.lineno) for n in ast.walk(func)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        for block in ast.walk(func):
            if not isinstance(block, (ast.With, ast.AsyncWith)):
                continue
            derived = {item.optional_vars.id for item in block.items
                       if isinstance(item.context_expr, ast.Call)
                       and _callee(item.context_expr.func) in RUNNER_CALLABLES
                       and isinstance(item.optional_vars, ast.Name)}
            if not derived:
                continue
            grown = True
            while grown:
                grown = False
                for node in (n for stmt in block.body for n in ast.walk(stmt)):
                    bound: set[str] = set()
                    if isinstance(node, ast.Assign) and _holds(node.value, derived):
                        bound = {n.id for t in node.targets for n in ast.walk(t)
                                 if isinstance(n, ast.Name)}
                    elif isinstance(node, (ast.For, ast.AsyncFor)) and _holds(node.iter,
                                                                               derived):
                        bound = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
                    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                            isinstance(n, ast.Name) and n.id in derived for n in ast.walk(node)):
                        bound = {node.name}
                    if bound - derived:
                        derived |= bound
                        grown = True
            end = block.end_lineno or block.lineno
            for node in ast.walk(func):
                if isinstance(node, ast.Name) and node.id in derived and node.lineno > end \
                        and isinstance(node.ctx, (ast.Load, ast.Del)) and not any(
                            name == node.id and end < line < node.lineno
                            for name, line in stores):
                    problems.append(f"{node.id}@{node.lineno}")
    return problems


def proxies_of_proxies(tree: ast.Module) -> list[str]:
    """``weakref.proxy``/``weakref.ref`` calls on a name whose latest binding above them
    in the same function is a ``weakref.proxy(...)`` (a ``TypeError`` at run time), as
    ``"name@line"``."""
    problems: list[str] = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        bindings: list[tuple[int, str, bool]] = []  # (line, name, bound to a proxy)
        targets: set[int] = set()
        for node in ast.walk(func):
            if isinstance(node, ast.Assign):
                proxy = isinstance(node.value, ast.Call) and _callee(node.value.func) == "proxy"
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        bindings.append((node.lineno, target.id, proxy))
                        targets.add(id(target))
        bindings += [(n.lineno, n.id, False) for n in ast.walk(func) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Store) and id(n) not in targets]
        for node in ast.walk(func):
            if not (isinstance(node, ast.Call) and _callee(node.func) in ("proxy", "ref")
                    and node.args and isinstance(node.args[0], ast.Name)):
                continue
            name = node.args[0].id
            above = sorted(b for b in bindings if b[1] == name and b[0] < node.lineno)
            if above and above[-1][2]:
                problems.append(f"{name}@{node.lineno}")
    return problems


def test_proxies_of_proxies_sees_one() -> None:
    tree = ast.parse("def f(r):\n    a = weakref.proxy(r.llm)\n    b = weakref.proxy(r.llm)\n"
                     "    return weakref.ref(a), weakref.proxy(r)\n")
    assert proxies_of_proxies(tree) == ["a@4"]


def test_late_uses_sees_a_value_used_after_its_block() -> None:
    tree = ast.parse(
        "def test_x(vllm_runner):\n"
        "    with vllm_runner('m') as runner:\n"
        "        llm = weakref.proxy(runner.llm)\n"
        "        gen = functools.partial(llm.generate, P)\n"
        "        out = llm.generate(P)\n"
        "    assert out and gen()\n"
        "    llm = 1\n"
        "    assert llm\n")
    assert late_uses(tree) == ["gen@6"]


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
    shadowed = {number for number, line in enumerate(
        source.decode("utf-8-sig").splitlines(), start=1) if line.endswith(SHADOWED)}
    assert not [v for v in found if v.location.row in shadowed], "a shadowed name reported"
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
    assert not late_uses(ast.parse(fixed)), "a value that reaches the engine outlives its block"
    if not proxies_of_proxies(ast.parse(source)):
        assert not proxies_of_proxies(ast.parse(fixed)), "the fix made a proxy of a proxy"
    again = fix_source(fixed, PATH, config, unsafe=unsafe)
    assert again.new_source is None, "fix is not idempotent"
    assert not wanted_fixes(check_source(fixed, PATH, config), unsafe)
    new_warnings = _pyflakes(fixed) - _pyflakes(source)
    # pyflakes counts ``del x`` as a use of ``x``: a name the source binds and deletes but
    # never reads was unused already, and removing its ``del`` (GPU004) only shows that.
    read = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}
    new_warnings = Counter({key: count for key, count in new_warnings.items()
                            if not (key[0] == "UnusedVariable" and key[1] not in read)})
    assert not new_warnings, f"fix added pyflakes warnings: {new_warnings}"

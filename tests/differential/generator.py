"""Generated pytest modules that build stand-in vLLM engines by hand, deterministic by seed.

:func:`generate_module` composes a module from :data:`SHAPES` (the ways hand-managed engines
appear in real GPU suites: cleanup by hand, finalizers, try/finally, fixtures, proxies,
aliases and derived values, several engines, rebinding in loops and branches, helpers,
classes, parametrize, ``pytest.raises``, ``os.environ``, runners without ``with``, mapping
keyword arguments, hashing and identity) and then adds syntax noise (comments, blank lines,
odd whitespace, decorators, docstrings, nested functions, long lines, unicode strings, tab
indentation, CRLF line endings). Every shape's tests pass (or skip, or xfail) on the stand-in
engine before any fix (the harness reports those that do not).

Shapes that hit a defect of the fixer known and being fixed are in
:data:`KNOWN_DEFECT_SHAPES`, left out unless ``known_defects=True``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

#: A shape renders ``(rng, n, style)`` into :class:`Part` (its module-level definitions and
#: its tests), where ``n`` makes its names unique in the module.
ShapeFn = Callable[[random.Random, int, "Style"], "Part"]


@dataclass
class Style:
    """How one module spells things.

    Attributes:
        llm: the engine class as the module names it (``LLM``, ``vllm.LLM``, ``Engine``).
        sp: the sampling parameters class as the module names it.
        import_line: the import that provides both.
    """

    llm: str
    sp: str
    import_line: str


@dataclass
class Part:
    """What one shape adds to a module: module-level code before its tests, and the tests."""

    defs: str = ""
    tests: str = ""
    imports: set[str] = field(default_factory=set)


STYLES = [
    Style("LLM", "SamplingParams", "from vllm import LLM, SamplingParams"),
    Style("vllm.LLM", "vllm.SamplingParams", "import vllm"),
    Style("Engine", "SamplingParams",
          "from vllm import LLM as Engine\nfrom vllm import SamplingParams"),
]

PROMPT_SETS = [
    '["hello my name is", "the capital of france is"]',
    '["héllo wörld ✓", "日本語のテキスト", "emoji 🚀 prompt"]',
    '["a"]',
    '["Ünïcödé prompt with a rather long tail that goes on and on to make a long line '
    'for the formatter to consider when it rewrites this module", "b"]',
]


def _kwargs(rng: random.Random, *, model_kw: bool | None = None) -> str:
    """An engine's arguments: the model (positional or ``model=``) and a few keywords, with
    odd whitespace now and then."""
    options = {
        "max_model_len": ["32", "64", "128"],
        "enforce_eager": ["True", "False"],
        "seed": ["0", "1", "7"],
        "dtype": ['"float32"', '"auto"'],
        "block_size": ["16", "32"],
        "gpu_memory_utilization": ["0.5", "0.3"],
        "enable_prefix_caching": ["True", "False"],
    }
    chosen = rng.sample(sorted(options), rng.randint(0, 3))
    eq = rng.choice(["=", "=", "=", " = "])
    parts = [f"{k}{eq}{rng.choice(options[k])}" for k in chosen]
    use_kw = rng.random() < 0.3 if model_kw is None else model_kw
    parts.insert(0, "model=MODEL" if use_kw else "MODEL")
    sep = rng.choice([", ", ", ", ",  ", " ,"])
    if len(parts) > 2 and rng.random() < 0.2:
        return "\n        " + ",\n        ".join(parts) + ",\n    "
    return sep.join(parts)


def _sp(rng: random.Random, s: Style) -> str:
    return rng.choice([f"{s.sp}(temperature=0.0, max_tokens=8)",
                       f"{s.sp}(temperature=0, max_tokens=4, seed=3)",
                       "GREEDY"])


def _cleanup(rng: random.Random, name: str, indent: str = "    ") -> str:
    """Manual cleanup of ``name``, in one of the spellings real suites use."""
    lines = rng.choice([
        [f"del {name}", "gc.collect()"],
        [f"del {name}", "gc.collect()", "torch.cuda.empty_cache()"],
        [f"del {name}", "cleanup_dist_env_and_memory()"],
        [f"del {name}", "gc.collect()", "cleanup_dist_env_and_memory()",
         "torch.cuda.empty_cache()"],
        [f"{name}.llm_engine.engine_core.shutdown()", f"del {name}"],
        [f"del {name}; gc.collect()"],
    ])
    return "".join(f"{indent}{line}\n" for line in lines)


def _use(rng: random.Random, name: str, s: Style, indent: str = "    ") -> str:
    """A use of the engine ``name`` that asserts something of its result."""
    return indent + rng.choice([
        f"outputs = {name}.generate(PROMPTS, {_sp(rng, s)})\n"
        f"{indent}assert len(outputs) == len(PROMPTS)\n",
        f"outputs = {name}.generate(PROMPTS[0], {_sp(rng, s)})\n"
        f"{indent}assert outputs[0].outputs[0].text\n",
        f"tok = {name}.get_tokenizer()\n{indent}assert tok.decode(tok.encode(\"hi\")) == \"hi\"\n"
        f"{indent}{name}.generate(PROMPTS, {_sp(rng, s)})\n",
        f"config = {name}.llm_engine.vllm_config\n"
        f"{indent}assert config.model_config.max_model_len > 0\n"
        f"{indent}{name}.generate(PROMPTS, {_sp(rng, s)})\n",
        f"outputs = {name}.chat([{{\"role\": \"user\", \"content\": \"hi\"}}], {_sp(rng, s)})\n"
        f"{indent}assert outputs\n",
    ])


def _header(name: str, params: str = "") -> str:
    return f"def {name}({params}):\n"


# -- shapes --------------------------------------------------------------------------------


def shape_cleanup_by_hand(rng: random.Random, n: int, s: Style) -> Part:
    """An engine built in the test and cleaned up by hand."""
    body = f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s) + _cleanup(rng, "llm")
    return Part(tests=_header(f"test_cleanup_by_hand_{n}") + body)


def shape_no_cleanup(rng: random.Random, n: int, s: Style) -> Part:
    """An engine built and never cleaned up (its cycle keeps it until a collection)."""
    body = f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s)
    return Part(tests=_header(f"test_no_cleanup_{n}") + body)


def shape_finalizer(rng: random.Random, n: int, s: Style) -> Part:
    """``request.addfinalizer(...)`` shutting the engine down."""
    fin = rng.choice(["llm.llm_engine.engine_core.shutdown", "llm.shutdown"])
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n    request.addfinalizer({fin})\n"
            + _use(rng, "llm", s))
    return Part(tests=_header(f"test_finalizer_{n}", "request") + body)


def shape_try_finally(rng: random.Random, n: int, s: Style) -> Part:
    """``try: ... finally:`` shutting the engine down or deleting it."""
    fin = rng.choice(["        llm.llm_engine.engine_core.shutdown()\n",
                      "        del llm\n        gc.collect()\n",
                      "        llm.shutdown()\n"])
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n    try:\n" + _use(rng, "llm", s, "        ")
            + "    finally:\n" + fin)
    return Part(tests=_header(f"test_try_finally_{n}") + body)


def shape_fixture(rng: random.Random, n: int, s: Style) -> Part:
    """A fixture that yields or returns an engine (function or module scope), cleaned up
    after the ``yield`` or not at all; one or two tests use it."""
    scope = rng.choice(["", "", '(scope="module")'])
    kind = rng.choice(["yield", "yield", "return", "proxy"])
    name = f"engine_{n}"
    head = f"@pytest.fixture{scope}\ndef {name}():\n    llm = {s.llm}({_kwargs(rng)})\n"
    if kind == "yield":
        body = "    yield llm\n" + _cleanup(rng, "llm")
    elif kind == "return":
        body = "    return llm\n"
    else:
        body = "    yield weakref.proxy(llm)\n" + _cleanup(rng, "llm")
    tests = ""
    for i in range(rng.randint(1, 2)):
        tests += _header(f"test_uses_{name}_{i}", name) + _use(rng, name, s) + "\n\n"
    return Part(defs=head + body, tests=tests.rstrip("\n") + "\n")


def shape_aliases(rng: random.Random, n: int, s: Style) -> Part:
    """Aliases and values derived from the engine, used before the cleanup."""
    derived = rng.choice([
        ("engine = llm\n    other = engine\n", "other"),
        ("pair = (llm, 1)\n    first = pair[0]\n", "first"),
        ("table = {\"e\": llm}\n    first = table[\"e\"]\n", "first"),
        ("engines = [llm]\n    first = engines[0]\n", "first"),
    ])
    body = f"    llm = {s.llm}({_kwargs(rng)})\n    {derived[0]}" + _use(rng, derived[1], s)
    body += _cleanup(rng, "llm")
    return Part(tests=_header(f"test_aliases_{n}") + body)


def shape_callables(rng: random.Random, n: int, s: Style) -> Part:
    """A ``functools.partial``, a bound method or a lazy generator over the engine."""
    sp = _sp(rng, s)
    use = rng.choice([
        f"run = functools.partial(llm.generate, sampling_params={sp})\n"
        "    outputs = run(PROMPTS)\n",
        "run = llm.generate\n    outputs = run(PROMPTS, " + sp + ")\n",
        f"lazy = (llm.generate([p], {sp}) for p in PROMPTS)\n"
        "    outputs = [o for batch in lazy for o in batch]\n",
    ])
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n    {use}    assert len(outputs) == len(PROMPTS)\n"
            + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_callables_{n}") + body)


def shape_two_sequential(rng: random.Random, n: int, s: Style) -> Part:
    """Two engines one after the other, each cleaned up before the next."""
    body = (f"    first = {s.llm}({_kwargs(rng)})\n" + _use(rng, "first", s)
            + _cleanup(rng, "first")
            + f"    second = {s.llm}({_kwargs(rng)})\n" + _use(rng, "second", s)
            + _cleanup(rng, "second"))
    return Part(tests=_header(f"test_two_sequential_{n}") + body)


def shape_two_together(rng: random.Random, n: int, s: Style) -> Part:
    """Two engines alive together, compared, cleaned up together."""
    sp = _sp(rng, s)
    body = (f"    a = {s.llm}({_kwargs(rng)})\n    b = {s.llm}({_kwargs(rng)})\n"
            f"    out_a = a.generate(PROMPTS, {sp})\n    out_b = b.generate(PROMPTS, {sp})\n"
            "    assert len(out_a) == len(out_b)\n"
            "    del a, b\n    gc.collect()\n")
    return Part(tests=_header(f"test_two_together_{n}") + body)


def shape_loop_rebind(rng: random.Random, n: int, s: Style) -> Part:
    """An engine rebound in each iteration of a loop."""
    body = ("    for size in (32, 64):\n"
            f"        llm = {s.llm}(MODEL, max_model_len=size)\n" + _use(rng, "llm", s, "        ")
            + _cleanup(rng, "llm", "        "))
    return Part(tests=_header(f"test_loop_rebind_{n}") + body)


def shape_branch_rebind(rng: random.Random, n: int, s: Style) -> Part:
    """An engine bound in each branch of an ``if``."""
    flag = rng.choice(["True", "False", "len(PROMPTS) > 1"])
    body = (f"    if {flag}:\n        llm = {s.llm}({_kwargs(rng)})\n"
            f"    else:\n        llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s)
            + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_branch_rebind_{n}") + body)


def shape_helper_builds(rng: random.Random, n: int, s: Style) -> Part:
    """A helper that builds the engine; another that receives it."""
    defs = (f"def _build_{n}(size):\n    return {s.llm}(MODEL, max_model_len=size)\n\n\n"
            f"def _run_{n}(llm):\n    return llm.generate(PROMPTS, {_sp(rng, s)})\n")
    body = (f"    llm = _build_{n}({rng.choice([32, 64])})\n"
            f"    assert len(_run_{n}(llm)) == len(PROMPTS)\n" + _cleanup(rng, "llm"))
    return Part(defs=defs, tests=_header(f"test_helper_builds_{n}") + body)


def shape_helper_receives(rng: random.Random, n: int, s: Style) -> Part:
    """A test that builds the engine and hands it to a helper."""
    defs = (f"def _check_{n}(llm, prompts):\n    outputs = llm.generate(prompts, "
            f"{_sp(rng, s)})\n    assert len(outputs) == len(prompts)\n    return outputs\n")
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n    _check_{n}(llm, PROMPTS)\n"
            + _cleanup(rng, "llm"))
    return Part(defs=defs, tests=_header(f"test_helper_receives_{n}") + body)


def shape_class(rng: random.Random, n: int, s: Style) -> Part:
    """Test methods of a class building engines."""
    tests = f"class TestEngines{n}:\n"
    for i in range(rng.randint(1, 2)):
        tests += (f"    def test_method_{i}(self):\n        llm = {s.llm}({_kwargs(rng)})\n"
                  + _use(rng, "llm", s, "        ") + _cleanup(rng, "llm", "        ") + "\n")
    return Part(tests=tests.rstrip("\n") + "\n")


def shape_parametrize(rng: random.Random, n: int, s: Style) -> Part:
    """A parametrized test building one engine per parameter."""
    body = (f"    llm = {s.llm}(MODEL, max_model_len=size, enforce_eager=eager)\n"
            + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    return Part(tests='@pytest.mark.parametrize("size", [32, 64])\n'
                      '@pytest.mark.parametrize("eager", [True, False])\n'
                      + _header(f"test_parametrize_{n}", "size, eager") + body)


def shape_raises(rng: random.Random, n: int, s: Style) -> Part:
    """``pytest.raises`` around a construction that fails (an unknown keyword, a model
    length too small), then a good engine."""
    bad = rng.choice([("TypeError", "MODEL, not_an_engine_arg=1"),
                      ("ValueError", "MODEL, max_model_len=4")])
    body = (f"    with pytest.raises({bad[0]}):\n        {s.llm}({bad[1]})\n"
            f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_raises_{n}") + body)


def shape_environ_write(rng: random.Random, n: int, s: Style) -> Part:
    """``os.environ[...] = "..."`` before an engine is built (GPU008)."""
    var = rng.choice(["VLLM_ATTENTION_BACKEND", "VLLM_USE_V1", "VLLM_ENABLE_THING"])
    body = (f"    os.environ[\"{var}_{n}\"] = \"{rng.choice(['1', 'FLASH', 'x'])}\"\n"
            f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_environ_write_{n}") + body)


def shape_environ_read(rng: random.Random, n: int, s: Style) -> Part:
    """A test that only reads ``os.environ``."""
    body = (f"    value = os.environ.get(\"VLLM_UNSET_{n}\", \"default\")\n"
            f"    llm = {s.llm}({_kwargs(rng)})\n    assert value == \"default\"\n"
            + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_environ_read_{n}") + body)


def shape_runner_without_with(rng: random.Random, n: int, s: Style) -> Part:
    """``vllm_runner(...)`` used without ``with`` (GPU005)."""
    body = (f"    runner = vllm_runner({_kwargs(rng)})\n"
            f"    outputs = runner.llm.generate(PROMPTS, {_sp(rng, s)})\n"
            "    assert len(outputs) == len(PROMPTS)\n")
    return Part(tests=_header(f"test_runner_without_with_{n}", "vllm_runner") + body)


def shape_runner_with(rng: random.Random, n: int, s: Style) -> Part:
    """The managed form, with the runner's engine held strongly (GPU006)."""
    body = (f"    with vllm_runner({_kwargs(rng)}) as runner:\n        llm = runner.llm\n"
            + _use(rng, "llm", s, "        "))
    return Part(tests=_header(f"test_runner_with_{n}", "vllm_runner") + body)


def shape_mapping_kwargs(rng: random.Random, n: int, s: Style) -> Part:
    """``LLM(**kwargs)`` and ``LLM(model=..., **extra)``, as plugin suites build engines."""
    if rng.random() < 0.5:
        build = (f"    llm_kwargs = dict(model=MODEL, max_model_len={rng.choice([32, 64])})\n"
                 f"    llm = {s.llm}(**llm_kwargs)\n")
    else:
        build = (f"    extra = {{\"enforce_eager\": {rng.choice(['True', 'False'])}}}\n"
                 f"    llm = {s.llm}(model=MODEL, block_size=16, **extra)\n")
    body = build + _use(rng, "llm", s) + _cleanup(rng, "llm")
    return Part(tests=_header(f"test_mapping_kwargs_{n}") + body)


def shape_identity_in_test(rng: random.Random, n: int, s: Style) -> Part:
    """The engine as a dict key, in a set, compared by ``type()`` or ``is``, in the test."""
    check = rng.choice([
        "seen = {llm: 1}\n    assert seen[llm] == 1\n",
        "group = {llm}\n    assert llm in group\n",
        "assert type(llm).__name__ == \"LLM\"\n",
        "same = llm\n    assert same is llm\n",
    ])
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n    {check}" + _use(rng, "llm", s)
            + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_identity_{n}") + body)


def shape_nested_function(rng: random.Random, n: int, s: Style) -> Part:
    """A nested function that uses the engine (a closure)."""
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n\n    def run(prompts):\n"
            f"        return llm.generate(prompts, {_sp(rng, s)})\n\n"
            "    assert len(run(PROMPTS)) == len(PROMPTS)\n" + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_nested_function_{n}") + body)


def shape_engine_cache(rng: random.Random, n: int, s: Style) -> Part:
    """A module-level cache of engines keyed by configuration, as plugin suites keep."""
    defs = (f"_CACHE_{n} = {{}}\n\n\ndef _cached_{n}(size):\n    if size not in _CACHE_{n}:\n"
            f"        _CACHE_{n}[size] = {s.llm}(MODEL, max_model_len=size)\n"
            f"    return _CACHE_{n}[size]\n")
    body = (f"    llm = _cached_{n}(32)\n" + _use(rng, "llm", s))
    return Part(defs=defs, tests=_header(f"test_engine_cache_{n}") + body)


def shape_owner_class(rng: random.Random, n: int, s: Style) -> Part:
    """A helper class that owns an engine (``self.llm = LLM(...)`` in ``__init__``)."""
    defs = (f"class Tester{n}:\n    def __init__(self, size):\n"
            f"        self.llm = {s.llm}(MODEL, max_model_len=size)\n\n"
            f"    def run(self, prompts):\n        return self.llm.generate(prompts, "
            f"{_sp(rng, s)})\n")
    body = (f"    tester = Tester{n}({rng.choice([32, 64])})\n"
            "    assert len(tester.run(PROMPTS)) == len(PROMPTS)\n"
            # the instance has no llm_engine: a shutdown goes through its engine
            + _cleanup(rng, "tester").replace("tester.llm_engine", "tester.llm.llm_engine"))
    return Part(defs=defs, tests=_header(f"test_owner_class_{n}") + body)


def shape_factory_fixture(rng: random.Random, n: int, s: Style) -> Part:
    """A factory fixture: a nested ``make`` that builds an engine and registers its
    shutdown."""
    defs = (f"@pytest.fixture\ndef make_engine_{n}(request):\n    def make(**kwargs):\n"
            f"        llm = {s.llm}(MODEL, **kwargs)\n"
            "        request.addfinalizer(llm.llm_engine.engine_core.shutdown)\n"
            "        return llm\n\n    return make\n")
    body = (f"    llm = make_engine_{n}(max_model_len={rng.choice([32, 64])})\n"
            + _use(rng, "llm", s))
    return Part(defs=defs, tests=_header(f"test_factory_fixture_{n}", f"make_engine_{n}")
                + body)


def shape_engine_group(rng: random.Random, n: int, s: Style) -> Part:
    """Engines alive together in a list, torn down in a loop."""
    teardown = rng.choice(["    for llm in llms:\n        llm.shutdown()\n",
                           "    del llms\n    gc.collect()\n"])
    body = (f"    llms = [{s.llm}(MODEL, seed=i) for i in range(2)]\n"
            f"    outputs = [llm.generate(PROMPTS, {_sp(rng, s)}) for llm in llms]\n"
            "    assert len(outputs) == 2\n" + teardown)
    return Part(tests=_header(f"test_engine_group_{n}") + body)


def shape_try_except_skip(rng: random.Random, n: int, s: Style) -> Part:
    """A construction in ``try`` whose failure skips the test."""
    size = rng.choice(["4", "32"])
    body = (f"    try:\n        llm = {s.llm}(MODEL, max_model_len={size})\n"
            "    except ValueError:\n        pytest.skip(\"model length not supported\")\n"
            + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_try_except_skip_{n}") + body)


def shape_raises_rebound(rng: random.Random, n: int, s: Style) -> Part:
    """A construction bound to a name inside ``pytest.raises`` (it fails), the name then
    bound to a good engine."""
    bad = rng.choice([("TypeError", "MODEL, not_an_engine_arg=1"),
                      ("ValueError", "MODEL, max_model_len=4")])
    body = (f"    with pytest.raises({bad[0]}):\n        llm = {s.llm}({bad[1]})\n"
            f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_raises_rebound_{n}") + body)


def shape_one_name_in_turn(rng: random.Random, n: int, s: Style) -> Part:
    """One name bound to two engines in turn, each cleaned up before the next."""
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s) + _cleanup(rng, "llm")
            + f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s)
            + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_one_name_in_turn_{n}") + body)


def shape_thread_after_del(rng: random.Random, n: int, s: Style) -> Part:
    """The engine (or a bare runner) deleted while a thread still generates with it."""
    if rng.random() < 0.5:
        build, params, held = f"{s.llm}({_kwargs(rng)})", "", "llm"
    else:
        build, params, held = f"vllm_runner({_kwargs(rng)})", "vllm_runner", "llm"
    generate = f"{held}.generate" if params == "" else f"{held}.llm.generate"
    body = (f"    {held} = {build}\n"
            "    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:\n"
            f"        future = executor.submit({generate}, PROMPTS, {_sp(rng, s)})\n"
            f"        del {held}\n        gc.collect()\n"
            "        outputs = future.result()\n"
            "    assert len(outputs) == len(PROMPTS)\n")
    return Part(tests=_header(f"test_thread_after_del_{n}", params) + body,
                imports={"import concurrent.futures"})


def shape_fixture_chain(rng: random.Random, n: int, s: Style) -> Part:
    """A fixture built on an engine fixture (the tokenizer of the engine)."""
    defs = (f"@pytest.fixture\ndef chained_engine_{n}():\n    llm = {s.llm}({_kwargs(rng)})\n"
            "    yield llm\n" + _cleanup(rng, "llm") + "\n\n"
            f"@pytest.fixture\ndef chained_tokenizer_{n}(chained_engine_{n}):\n"
            f"    return chained_engine_{n}.get_tokenizer()\n")
    body = (f"    assert chained_tokenizer_{n}.encode(\"ab\") == [97, 98]\n"
            + _use(rng, f"chained_engine_{n}", s))
    return Part(defs=defs, tests=_header(
        f"test_fixture_chain_{n}", f"chained_engine_{n}, chained_tokenizer_{n}") + body)


def shape_unittest_class(rng: random.Random, n: int, s: Style) -> Part:
    """A ``unittest.TestCase`` that builds its engine in ``setUpClass``."""
    tests = (f"class TestUnittest{n}(unittest.TestCase):\n    @classmethod\n"
             f"    def setUpClass(cls):\n        cls.llm = {s.llm}({_kwargs(rng)})\n\n"
             "    @classmethod\n    def tearDownClass(cls):\n        del cls.llm\n"
             "        gc.collect()\n\n    def test_generate(self):\n"
             f"        outputs = self.llm.generate(PROMPTS, {_sp(rng, s)})\n"
             "        self.assertEqual(len(outputs), len(PROMPTS))\n")
    return Part(tests=tests, imports={"import unittest"})


def shape_xunit_class(rng: random.Random, n: int, s: Style) -> Part:
    """A pytest class whose ``setup_class`` (or ``setup_method``) stores the engine on the
    class (or instance), cleaned up by hand in the paired teardown, or with no teardown at
    all; two tests use it through the attribute."""
    per_test = rng.random() < 0.5
    receiver, setup, teardown = ("self", "setup_method", "teardown_method") if per_test \
        else ("cls", "setup_class", "teardown_class")
    decorator = "" if per_test else "    @classmethod\n"
    tests = (f"class TestXunit{n}:\n{decorator}    def {setup}({receiver}):\n"
             f"        {receiver}.llm = {s.llm}({_kwargs(rng)})\n\n")
    if rng.random() < 0.75:
        tests += (f"{decorator}    def {teardown}({receiver}):\n"
                  + _cleanup(rng, f"{receiver}.llm", "        ") + "\n")
    for i in range(2):
        tests += (f"    def test_xunit_{i}(self):\n"
                  f"        outputs = self.llm.generate(PROMPTS, {_sp(rng, s)})\n"
                  "        assert len(outputs) == len(PROMPTS)\n\n")
    return Part(tests=tests.rstrip("\n") + "\n")


def shape_module_xunit(rng: random.Random, n: int, s: Style) -> Part:
    """A module's ``setup_module`` (or ``setup_function``) storing the engine in a global
    (or on the module object ``setup_module`` takes), cleaned up by hand in the paired
    teardown or never; the global has a first value now and then, and two tests use it."""
    per_test = rng.random() < 0.3
    setup, teardown = ("setup_function", "teardown_function") if per_test \
        else ("setup_module", "teardown_module")
    name = f"engine_{n}"
    defs = f"{name} = None\n\n\n" if rng.random() < 0.5 else ""
    if not per_test and rng.random() < 0.3:
        # on the module object ``setup_module`` takes: the same global
        defs += f"def {setup}(module):\n    module.{name} = {s.llm}({_kwargs(rng)})\n"
        if rng.random() < 0.75:
            defs += f"\n\ndef {teardown}(module):\n" + _cleanup(rng, f"module.{name}")
    else:
        defs += f"def {setup}():\n    global {name}\n    {name} = {s.llm}({_kwargs(rng)})\n"
        if rng.random() < 0.75:
            defs += (f"\n\ndef {teardown}():\n    global {name}\n"
                     + _cleanup(rng, name))
    tests = "\n\n".join(_header(f"test_module_xunit_{n}_{i}") + _use(rng, name, s)
                          for i in range(2))
    return Part(defs=defs, tests=tests)


def shape_xunit_factory(rng: random.Random, n: int, s: Style) -> Part:
    """A pytest class whose ``setup_class`` (or ``setup_method``) stores an engine a factory
    helper of the module builds, cleaned up by hand in the paired teardown or never; a test
    of the module calls the helper too now and then."""
    per_test = rng.random() < 0.5
    receiver, setup, teardown = ("self", "setup_method", "teardown_method") if per_test \
        else ("cls", "setup_class", "teardown_class")
    decorator = "" if per_test else "    @classmethod\n"
    if rng.random() < 0.5:
        defs = (f"def _build_{n}(size=64):\n    llm = {s.llm}(MODEL, max_model_len=size)\n"
                "    return llm\n")
    else:
        defs = f"def _build_{n}(size=64):\n    return {s.llm}(MODEL, max_model_len=size)\n"
    tests = (f"class TestXunitFactory{n}:\n{decorator}    def {setup}({receiver}):\n"
             f"        {receiver}.llm = _build_{n}({rng.choice([32, 64])})\n\n")
    if rng.random() < 0.75:
        tests += (f"{decorator}    def {teardown}({receiver}):\n"
                  + _cleanup(rng, f"{receiver}.llm", "        ") + "\n")
    for i in range(2):
        tests += (f"    def test_xunit_factory_{i}(self):\n"
                  + _use(rng, "self.llm", s, "        ") + "\n")
    tests = tests.rstrip("\n") + "\n"
    if rng.random() < 0.3:
        tests += (f"\n\n{_header(f'test_factory_call_{n}')}    llm = _build_{n}()\n"
                  + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    return Part(defs=defs, tests=tests)


def shape_stored_fixture(rng: random.Random, n: int, s: Style) -> Part:
    """A generator fixture storing its engine on the test class (``request.cls.llm``, a
    class-scoped autouse fixture method) or on ``self`` (a function-scoped one), built or from
    a factory helper of the module, cleaned up by hand after its ``yield`` (or in the
    ``finally`` of a ``try`` around it) or never; two tests use it through the attribute."""
    per_test = rng.random() < 0.4
    target = "self.llm" if per_test else "request.cls.llm"
    scope = "" if per_test else "scope=\"class\", "
    params = "self" if per_test else "self, request"
    defs = ""
    if rng.random() < 0.4:
        defs = f"def _stored_engine_{n}(size=64):\n    return {s.llm}(MODEL, max_model_len=size)\n"
        built = f"_stored_engine_{n}({rng.choice([32, 64])})"
    else:
        built = f"{s.llm}({_kwargs(rng)})"
    tests = (f"class TestStored{n}:\n    @pytest.fixture({scope}autouse=True)\n"
             f"    def stored_{n}({params}):\n        {target} = {built}\n")
    if rng.random() < 0.3:
        tests += ("        try:\n            yield\n        finally:\n"
                  + _cleanup(rng, target, "            "))
    else:
        tests += "        yield\n"
        if rng.random() < 0.8:
            tests += _cleanup(rng, target, "        ")
    tests += "\n"
    for i in range(2):
        tests += (f"    def test_stored_{i}(self):\n"
                  + _use(rng, "self.llm", s, "        ") + "\n")
    return Part(defs=defs, tests=tests.rstrip("\n") + "\n")


def shape_param_fixture(rng: random.Random, n: int, s: Style) -> Part:
    """A fixture with ``params`` building one engine per parameter, torn down in
    ``try``/``finally``."""
    defs = (f"@pytest.fixture(params=[32, 64])\ndef param_engine_{n}(request):\n"
            f"    llm = {s.llm}(MODEL, max_model_len=request.param)\n    try:\n"
            "        yield llm\n    finally:\n" + _cleanup(rng, "llm", "        "))
    body = _use(rng, f"param_engine_{n}", s)
    return Part(defs=defs, tests=_header(f"test_param_fixture_{n}", f"param_engine_{n}")
                + body)


def shape_class_fixture(rng: random.Random, n: int, s: Style) -> Part:
    """A class-scoped fixture shared by the methods of a test class."""
    defs = (f"@pytest.fixture(scope=\"class\")\ndef class_engine_{n}():\n"
            f"    llm = {s.llm}({_kwargs(rng)})\n    yield llm\n" + _cleanup(rng, "llm"))
    tests = f"class TestShared{n}:\n"
    for i in range(2):
        tests += (f"    def test_shared_{i}(self, class_engine_{n}):\n"
                  + _use(rng, f"class_engine_{n}", s, "        ") + "\n")
    return Part(defs=defs, tests=tests.rstrip("\n") + "\n")


def shape_lambda_finalizer(rng: random.Random, n: int, s: Style) -> Part:
    """``request.addfinalizer(lambda: llm.shutdown())``."""
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n"
            "    request.addfinalizer(lambda: llm.shutdown())\n" + _use(rng, "llm", s))
    return Part(tests=_header(f"test_lambda_finalizer_{n}", "request") + body)


def shape_freed_check(rng: random.Random, n: int, s: Style) -> Part:
    """A test that checks, with ``weakref.ref``, that its engine is freed by the cleanup."""
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s)
            + "    ref = weakref.ref(llm)\n    del llm\n    gc.collect()\n"
            "    assert ref() is None\n")
    return Part(tests=_header(f"test_freed_check_{n}") + body)


def shape_monkeypatch_context(rng: random.Random, n: int, s: Style) -> Part:
    """The engine built inside ``monkeypatch.context()`` with a variable set there."""
    body = ("    with monkeypatch.context() as m:\n"
            f"        m.setenv(\"VLLM_CONTEXT_{n}\", \"1\")\n"
            f"        llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s)
            + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_monkeypatch_context_{n}", "monkeypatch") + body)


def shape_pair_helper(rng: random.Random, n: int, s: Style) -> Part:
    """A helper returning the engine with its tokenizer, unpacked by the test."""
    defs = (f"def _engine_and_tokenizer_{n}(size):\n"
            f"    llm = {s.llm}(MODEL, max_model_len=size)\n"
            "    return llm, llm.get_tokenizer()\n")
    body = (f"    llm, tok = _engine_and_tokenizer_{n}(32)\n"
            "    assert tok.encode(\"a\") == [97]\n" + _use(rng, "llm", s)
            + "    del llm, tok\n    gc.collect()\n")
    return Part(defs=defs, tests=_header(f"test_pair_helper_{n}") + body)


def shape_tuple_helper(rng: random.Random, n: int, s: Style) -> Part:
    """A helper returning the engine in a tuple with a value the test uses: its tokenizer,
    read from the engine bound to a name first, or sampling parameters built beside the
    engine in the tuple (the engine second); the test unpacks it, uses both, and cleans the
    engine up by hand or shuts it down in a ``finally``, then reads the other value."""
    if rng.random() < 0.5:
        defs = (f"def _engine_and_tokenizer_{n}(size):\n"
                f"    llm = {s.llm}(MODEL, max_model_len=size)\n"
                "    tokenizer = llm.get_tokenizer()\n"
                "    return llm, tokenizer\n")
        unpack = f"    llm, tokenizer = _engine_and_tokenizer_{n}({rng.choice([32, 64])})\n"
        after = "    assert tokenizer.encode(\"a\") == [97]\n"
    else:
        defs = (f"def _params_and_engine_{n}(size):\n"
                f"    return {s.sp}(temperature=0.0, max_tokens=4), "
                f"{s.llm}(MODEL, max_model_len=size)\n")
        unpack = f"    params, llm = _params_and_engine_{n}({rng.choice([32, 64])})\n"
        after = "    assert params.max_tokens == 4\n"
    if rng.random() < 0.5:
        body = unpack + _use(rng, "llm", s) + _cleanup(rng, "llm")
    else:
        body = (unpack + "    try:\n" + _use(rng, "llm", s, "        ") + "    finally:\n"
                "        llm.llm_engine.engine_core.shutdown()\n")
    return Part(defs=defs, tests=_header(f"test_tuple_helper_{n}") + body + after)


def shape_engine_attribute_after(rng: random.Random, n: int, s: Style) -> Part:
    """``llm.llm_engine`` kept in a name and read after the cleanup, and an engine rebuilt
    with the same configuration whose texts must match the first one's."""
    kwargs = _kwargs(rng)
    body = (f"    llm = {s.llm}({kwargs})\n    engine = llm.llm_engine\n"
            f"    first = llm.generate(PROMPTS, GREEDY)\n" + _cleanup(rng, "llm")
            + "    assert engine.vllm_config.model_config.max_model_len > 0\n"
            f"    llm = {s.llm}({kwargs})\n    again = llm.generate(PROMPTS, GREEDY)\n"
            "    assert [o.outputs[0].text for o in first] == "
            "[o.outputs[0].text for o in again]\n" + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_engine_attribute_after_{n}") + body)


def shape_xfail(rng: random.Random, n: int, s: Style) -> Part:
    """A strict ``xfail`` test that fails after using and cleaning up its engine."""
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s) + _cleanup(rng, "llm")
            + "    assert False, \"expected\"\n")
    return Part(tests="@pytest.mark.xfail(strict=True)\n" + _header(f"test_xfail_{n}") + body)


def shape_annotated(rng: random.Random, n: int, s: Style) -> Part:
    """An annotated assignment, a backslash continuation and a one-line cleanup."""
    body = (f"    llm: {s.llm} = \\\n        {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s)
            + "    del llm; gc.collect()\n")
    return Part(tests=_header(f"test_annotated_{n}") + body)


def shape_shutdown_then_raises(rng: random.Random, n: int, s: Style) -> Part:
    """The engine shut down in the middle of the test, then ``pytest.raises(RuntimeError)``
    around a use."""
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s)
            + "    llm.llm_engine.engine_core.shutdown()\n"
            "    with pytest.raises(RuntimeError):\n        llm.generate(PROMPTS)\n")
    return Part(tests=_header(f"test_shutdown_then_raises_{n}") + body)


def shape_fixture_yields_runner(rng: random.Random, n: int, s: Style) -> Part:
    """A fixture that yields a runner built without ``with``."""
    defs = (f"@pytest.fixture\ndef runner_{n}(vllm_runner):\n"
            f"    runner = vllm_runner({_kwargs(rng)})\n    yield runner\n    del runner\n")
    body = (f"    outputs = runner_{n}.llm.generate(PROMPTS, {_sp(rng, s)})\n"
            "    assert len(outputs) == len(PROMPTS)\n")
    return Part(defs=defs, tests=_header(f"test_fixture_yields_runner_{n}", f"runner_{n}") + body)


def shape_runner_mapped_kwargs(rng: random.Random, n: int, s: Style) -> Part:
    """``tokenizer_name=`` (the runner maps it, ``LLM`` rejects it) inside
    ``pytest.raises``, and ``LLM(*args)``."""
    if rng.random() < 0.5:
        body = (f"    with pytest.raises(TypeError):\n"
                f"        llm = {s.llm}(MODEL, tokenizer_name=MODEL)\n"
                "        llm.generate(PROMPTS)\n")
    else:
        body = (f"    args = (MODEL,)\n    llm = {s.llm}(*args)\n" + _use(rng, "llm", s)
                + _cleanup(rng, "llm"))
    return Part(tests=_header(f"test_runner_mapped_kwargs_{n}") + body)


def shape_identity_in_helper(rng: random.Random, n: int, s: Style) -> Part:
    """The engine hashed or compared by identity in a helper or a fixture's consumer
    (``lru_cache`` keyed on it, a set of engines)."""
    defs = (f"@functools.lru_cache(maxsize=None)\ndef _tokenizer_{n}(llm):\n"
            "    return llm.get_tokenizer()\n")
    body = (f"    llm = {s.llm}({_kwargs(rng)})\n    tok = _tokenizer_{n}(llm)\n"
            "    assert tok.encode(\"a\") == [97]\n" + _use(rng, "llm", s)
            + _cleanup(rng, "llm"))
    return Part(defs=defs, tests=_header(f"test_identity_in_helper_{n}") + body)


def shape_environ_read_later(rng: random.Random, n: int, s: Style) -> Part:
    """``os.environ`` written by one test and read later in the module, or assigned an
    int-valued string read back."""
    var = f"VLLM_LATER_{n}"
    defs = ""
    body = (f"    os.environ[\"{var}\"] = \"1\"\n    llm = {s.llm}({_kwargs(rng)})\n"
            + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    tests = (_header(f"test_environ_set_{n}") + body + "\n\n"
             + _header(f"test_environ_reads_{n}")
             + f"    assert os.environ.get(\"{var}\") == \"1\"\n")
    return Part(defs=defs, tests=tests)


def shape_monkeypatch_instance(rng: random.Random, n: int, s: Style) -> Part:
    """A fixture (function, module or session scope) setting a variable through its own
    ``pytest.MonkeyPatch()`` that nothing undoes, returning or yielding; the test that
    requests it builds an engine and reads the variable, and a later test may read it too
    (it passes only while the change leaks: after a safe fix it must still pass)."""
    scope = rng.choice(["", '(scope="module")', '(scope="session")'])
    var = f"VLLM_INSTANCE_{n}"
    name = f"env_instance_{n}"
    ends = rng.choice(["", "    yield\n", "    yield\n    assert True\n"])
    defs = (f"@pytest.fixture{scope}\ndef {name}():\n    mp = pytest.MonkeyPatch()\n"
            f"    mp.setenv(\"{var}\", \"1\")\n" + ends)
    tests = (_header(f"test_uses_{name}", name) + f"    assert os.environ[\"{var}\"] == \"1\"\n"
             f"    llm = {s.llm}({_kwargs(rng)})\n" + _use(rng, "llm", s) + _cleanup(rng, "llm"))
    if rng.random() < 0.5:
        tests += ("\n\n" + _header(f"test_reads_after_{name}")
                  + f"    assert os.environ.get(\"{var}\") == \"1\"\n")
    return Part(defs=defs, tests=tests)


#: Every shape of the default generator, by name.
def shape_helper_try_finally(rng: random.Random, n: int, s: Style) -> Part:
    """A factory helper with keyword defaults returns the engine; the test that owns it shuts
    it down in a ``finally``, guarded by ``is not None`` or not, then deletes it."""
    defs = (f"def setup_engine_{n}(size, seed=0):\n"
            f"    return {s.llm}(model=MODEL, max_model_len=size, seed=seed)\n")
    guarded = rng.random() < 0.5
    body = ("    llm = None\n" if guarded else "") + (
        f"    llm = setup_engine_{n}({rng.choice([32, 64])})\n" if not guarded else "")
    if guarded:
        body += f"    try:\n        llm = setup_engine_{n}({rng.choice([32, 64])})\n"
    else:
        body += "    try:\n"
    body += _use(rng, "llm", s, "        ") + "    finally:\n"
    shutdown = rng.choice(["llm.llm_engine.engine_core.shutdown()", "llm.shutdown()"])
    if guarded:
        body += f"        if llm is not None:\n            {shutdown}\n"
    else:
        body += f"        {shutdown}\n"
    body += "        del llm\n" + rng.choice(["        gc.collect()\n", ""])
    return Part(defs=defs, tests=_header(f"test_helper_try_finally_{n}") + body)


def shape_fixture_from_helper(rng: random.Random, n: int, s: Style) -> Part:
    """A fixture that gets its engine from a helper of the module, yields it and cleans it
    up by hand; one or two tests use it."""
    name = f"helper_engine_{n}"
    defs = (f"def _make_{n}(**overrides):\n    kwargs = dict(max_model_len=32)\n"
            "    kwargs.update(overrides)\n"
            f"    return {s.llm}(MODEL, **kwargs)\n\n\n"
            f"@pytest.fixture\ndef {name}():\n"
            f"    llm = _make_{n}(seed={rng.choice([0, 1])})\n    yield llm\n"
            + _cleanup(rng, "llm"))
    tests = ""
    for i in range(rng.randint(1, 2)):
        tests += _header(f"test_uses_{name}_{i}", name) + _use(rng, name, s) + "\n\n"
    return Part(defs=defs, tests=tests.rstrip("\n") + "\n")


def shape_factory_method(rng: random.Random, n: int, s: Style) -> Part:
    """A method that builds the engine and returns it, of the test class or of a base class
    of the module; each test method gets its engine from it on ``self`` (or on a class
    that has it: ``TestX.build(self)``, or on an instance of one: ``maker.build()``) and
    cleans it up by hand or shuts it down in a ``finally``."""
    inherited = rng.random() < 0.5
    owner = f"EngineBase{n}" if inherited else f"TestFactoryMethod{n}"
    method = rng.choice(["_make_llm", "build"])
    factory = (f"    def {method}(self, size=32):\n"
               + rng.choice([f"        return {s.llm}(MODEL, max_model_len=size)\n",
                             f"        llm = {s.llm}(MODEL, max_model_len=size)\n"
                             "        return llm\n"]))
    tests = (f"class {owner}:\n{factory}\n\n" if inherited else "") + \
        (f"class TestFactoryMethod{n}({owner}):\n" if inherited else
         f"class {owner}:\n{factory}\n")
    for i in range(rng.randint(1, 2)):
        tests += f"    def test_method_{i}(self):\n"
        arguments = rng.choice(['', '64', 'size=64'])
        spelling = rng.random()
        call = f"self.{method}({arguments})" if spelling < 0.6 else \
            f"{rng.choice([owner, f'TestFactoryMethod{n}'])}.{method}(self" + \
            (f", {arguments})" if arguments else ")") if spelling < 0.8 else \
            f"maker.{method}({arguments})"
        if call.startswith("maker."):
            tests += f"        maker = {owner}()\n"
        if rng.random() < 0.5:
            tests += (f"        llm = {call}\n" + _use(rng, "llm", s, "        ")
                      + _cleanup(rng, "llm", "        ") + "\n")
        else:
            tests += (f"        llm = {call}\n        try:\n"
                      + _use(rng, "llm", s, "            ") + "        finally:\n"
                      "            llm.llm_engine.engine_core.shutdown()\n\n")
    return Part(tests=tests.rstrip("\n") + "\n")


SHAPES: dict[str, ShapeFn] = {
    "cleanup_by_hand": shape_cleanup_by_hand,
    "no_cleanup": shape_no_cleanup,
    "finalizer": shape_finalizer,
    "try_finally": shape_try_finally,
    "fixture": shape_fixture,
    "aliases": shape_aliases,
    "callables": shape_callables,
    "two_sequential": shape_two_sequential,
    "two_together": shape_two_together,
    "loop_rebind": shape_loop_rebind,
    "branch_rebind": shape_branch_rebind,
    "helper_builds": shape_helper_builds,
    "helper_receives": shape_helper_receives,
    "class": shape_class,
    "parametrize": shape_parametrize,
    "raises": shape_raises,
    "environ_write": shape_environ_write,
    "environ_read": shape_environ_read,
    "runner_without_with": shape_runner_without_with,
    "runner_with": shape_runner_with,
    "mapping_kwargs": shape_mapping_kwargs,
    "identity_in_test": shape_identity_in_test,
    "nested_function": shape_nested_function,
    "engine_cache": shape_engine_cache,
    "owner_class": shape_owner_class,
    "factory_fixture": shape_factory_fixture,
    "engine_group": shape_engine_group,
    "try_except_skip": shape_try_except_skip,
    "fixture_chain": shape_fixture_chain,
    "unittest_class": shape_unittest_class,
    "param_fixture": shape_param_fixture,
    "class_fixture": shape_class_fixture,
    "lambda_finalizer": shape_lambda_finalizer,
    "freed_check": shape_freed_check,
    "monkeypatch_context": shape_monkeypatch_context,
    "pair_helper": shape_pair_helper,
    "engine_attribute_after": shape_engine_attribute_after,
    "xfail": shape_xfail,
    "annotated": shape_annotated,
    "shutdown_then_raises": shape_shutdown_then_raises,
    "fixture_yields_runner": shape_fixture_yields_runner,
    "runner_mapped_kwargs": shape_runner_mapped_kwargs,
    "identity_in_helper": shape_identity_in_helper,
    "environ_read_later": shape_environ_read_later,
    "helper_try_finally": shape_helper_try_finally,
    "fixture_from_helper": shape_fixture_from_helper,
    "factory_method": shape_factory_method,
    "tuple_helper": shape_tuple_helper,
    "xunit_class": shape_xunit_class,
    "module_xunit": shape_module_xunit,
    "xunit_factory": shape_xunit_factory,
    "stored_fixture": shape_stored_fixture,
    "raises_rebound": shape_raises_rebound,
    "one_name_in_turn": shape_one_name_in_turn,
    "thread_after_del": shape_thread_after_del,
    "monkeypatch_instance": shape_monkeypatch_instance,
}

#: Shapes a module holds once at most: they define module-level functions of fixed names
#: (``setup_module``), which a second copy would replace.
ONCE_SHAPES = frozenset({"module_xunit"})

#: Shapes that hit a known defect of the fixer, with what the defect is; on only with
#: ``known_defects=True`` (``--known-defects`` of the campaign). A shape moves here when a
#: campaign finds a defect the fixer does not yet handle, and back to :data:`SHAPES` when it
#: does; none is known today.
KNOWN_DEFECT_SHAPES: dict[str, tuple[ShapeFn, str]] = {}

# -- noise ---------------------------------------------------------------------------------

_COMMENTS = ["# note: keep this", "# TODO(someone): flaky on some GPUs", "#", "# ünïcode ✓",
             "#: documented", "# " + "long comment " * 9, "# see also: x"]
_DECORATORS = ['@pytest.mark.filterwarnings("ignore::DeprecationWarning")',
               '@pytest.mark.skipif(False, reason="never skipped")', "@_passthrough"]


def _noise(rng: random.Random, text: str, level: float) -> str:
    """Comments and blank lines between lines, trailing comments, decorators on tests and a
    nested function now and then: none changes what the module does."""
    out: list[str] = []
    for line in text.split("\n"):
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if line.endswith("\\") or (out and out[-1].endswith("\\")):
            out.append(line)  # nothing may come between a backslash and its next line
            continue
        if stripped and rng.random() < level * 0.3:
            out.append(f"{indent}{rng.choice(_COMMENTS)}")
        if stripped and rng.random() < level * 0.1:
            out.append("")
        if stripped.startswith("def test_") and rng.random() < level * 0.4:
            out.append(f"{indent}{rng.choice(_DECORATORS)}")
        if stripped and not stripped.startswith(("@", "#")) and rng.random() < level * 0.15:
            line = f"{line}  {rng.choice(_COMMENTS)}"
        out.append(line)
        if stripped.startswith("def test_") and rng.random() < level * 0.2:
            out.append(f'{indent}    """Checks the engine ✓ (a docstring first)."""')
        if stripped.startswith("def test_") and rng.random() < level * 0.2:
            out.append(f"{indent}    def _inner_{len(out)}():\n{indent}        return None\n")
    return "\n".join(out)


def _tabs(source: str) -> str:
    """``source`` indented with tabs: each four leading spaces become one tab."""
    lines = []
    for line in source.split("\n"):
        spaces = len(line) - len(line.lstrip(" "))
        lines.append("\t" * (spaces // 4) + " " * (spaces % 4) + line[spaces:])
    return "\n".join(lines)


@dataclass
class Module:
    """A generated module.

    Attributes:
        seed: the seed it was generated from.
        source: its text (with ``\\r\\n`` line endings when ``crlf``).
        shapes: the shapes it combines, in order.
        crlf: whether its lines end in ``\\r\\n``.
    """

    seed: int
    source: str
    shapes: list[str]
    crlf: bool


def shape_table(known_defects: bool) -> dict[str, ShapeFn]:
    """The shapes to draw from: :data:`SHAPES`, plus :data:`KNOWN_DEFECT_SHAPES` when
    ``known_defects``."""
    table = dict(SHAPES)
    if known_defects:
        table.update({name: fn for name, (fn, _) in KNOWN_DEFECT_SHAPES.items()})
    return table


def generate_module(seed: int, *, known_defects: bool = False,
                    only: list[str] | None = None) -> Module:
    """The module of ``seed``: 1 to 4 shapes (or exactly ``only``) with noise.

    Args:
        seed: any int; the same seed gives the same module.
        known_defects: also draw from :data:`KNOWN_DEFECT_SHAPES`.
        only: the shapes to combine, in order, instead of drawing them.

    Raises:
        KeyError: a name in ``only`` is no shape.
    """
    rng = random.Random(seed)
    table = shape_table(known_defects or bool(only))
    names = list(only) if only else [rng.choice(sorted(table)) for _ in range(rng.randint(1, 4))]
    names = [name for i, name in enumerate(names)
             if name not in ONCE_SHAPES or name not in names[:i]]
    style = rng.choice(STYLES)
    parts = [table[name](rng, i, style) for i, name in enumerate(names)]
    extra = sorted({i for p in parts for i in p.imports})
    imports = ["import functools", "import gc", "import os", *extra, "import weakref", "",
               "import pytest", "import torch", style.import_line,
               "from vllm.distributed import cleanup_dist_env_and_memory"]
    head = (f'"""Generated by tests/differential (seed {seed}): {", ".join(names)}."""\n\n'
            + "\n".join(imports) + "\n\n" + 'MODEL = "stand-in/tiny-model"\n'
            + f"PROMPTS = {rng.choice(PROMPT_SETS)}\n"
            + f"GREEDY = {style.sp}(temperature=0.0, max_tokens=8)\n\n\n"
            + "def _passthrough(fn):\n    return fn\n")
    blocks = [p.defs for p in parts if p.defs] + [p.tests for p in parts]
    body = "\n\n".join(b.rstrip("\n") for b in blocks)
    level = rng.choice([0.0, 0.5, 1.0])
    source = head + "\n\n" + _noise(rng, body, level).rstrip("\n") + "\n"
    if rng.random() < 0.1:
        source = _tabs(source)
    crlf = rng.random() < 0.15
    if crlf:
        source = source.replace("\n", "\r\n")
    return Module(seed, source, names, crlf)

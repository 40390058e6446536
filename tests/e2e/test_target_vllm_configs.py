"""``target = "vllm"`` proven against vLLM itself: for each engine call, the configuration
vLLM resolves for the original ``LLM(...)`` and for the rewritten ``vllm_runner(...)`` (through
what vLLM's test runner hands to ``LLM``, ``vllm_test_runner.py``) must be the same where the
fix is safe. No engine is built: ``EngineArgs(...).create_engine_config()`` on the tiny model.
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import gpu_test_lint
from vllm_test_runner import config_summary, resolve_llm_call, runner_llm_kwargs

BASE = 'MODEL, max_model_len=256, enforce_eager=True, dtype="float32"'
# Without enforce_eager: vLLM resolves compilation on the CPU too, so a changed
# compilation_config shows in the resolved mode.
COMPILED = 'MODEL, max_model_len=256, dtype="float32"'

#: case -> the arguments of the original ``LLM(...)`` call.
CASES: dict[str, str] = {
    "model_defaults": "MODEL",
    "engine_basics": BASE,
    "seeded": f"{BASE}, seed=3",
    "model_keyword": 'model=MODEL, max_model_len=128, dtype="float32"',
    "trust_remote_code": f"{BASE}, trust_remote_code=True",
    "block_size": f"{BASE}, block_size=32",
    "chunked_prefill_off": f"{BASE}, enable_chunked_prefill=False",
    "chunked_prefill_on": f"{BASE}, enable_chunked_prefill=True",
    "max_num_batched_tokens": f"{BASE}, max_num_batched_tokens=512",
    "tokenizer": f"{BASE}, tokenizer=MODEL",
    "compiled_defaults": COMPILED,
    "compilation_config_none": f"{COMPILED}, compilation_config=None",
    "compilation_config_0": f"{COMPILED}, compilation_config=0",
    "compilation_config_false": f"{COMPILED}, compilation_config=False",
    "compilation_mode_none": f"{COMPILED}, compilation_config=CompilationMode.NONE",
    "compilation_config_3": f"{COMPILED}, compilation_config=3",
    "compilation_config_empty_dict": f"{COMPILED}, compilation_config={{}}",
    "compilation_config_dict": f'{COMPILED}, compilation_config={{"mode": 0}}',
    "compilation_config_object": f"{COMPILED}, compilation_config=CompilationConfig(mode=0)",
}

TEMPLATE = '''from vllm import LLM, SamplingParams
from vllm.config import CompilationConfig, CompilationMode

MODEL = "tiny-model"


def test_case():
    llm = LLM({args})
    assert llm.generate(["hello"], SamplingParams(max_tokens=2))
'''


def _calls(source: str, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name) and n.func.id == name]


def _evaluate(call: ast.Call, model: str) -> tuple[list[Any], dict[str, Any]]:
    from vllm.config import CompilationConfig, CompilationMode

    namespace = {"MODEL": model, "CompilationConfig": CompilationConfig,
                 "CompilationMode": CompilationMode}
    args = [eval(ast.unparse(a), namespace) for a in call.args]  # noqa: S307 - our own cases
    kwargs = {k.arg: eval(ast.unparse(k.value), namespace) for k in call.keywords if k.arg}
    return args, kwargs


#: The conftest of the trees: a `vllm_runner` fixture, as vLLM's own tests/conftest.py has.
CONFTEST = """\
import pytest


@pytest.fixture
def vllm_runner():
    from tests.conftest import VllmRunner

    return VllmRunner
"""


def _check_and_fix(tree: Path, modules: dict[str, str]) -> list[dict[str, Any]]:
    """Write ``modules`` (file name -> source) into ``tree`` with ``target = "vllm"``, return
    ``check``'s JSON report on them, then fix them in place with ``--unsafe-fixes``."""
    (tree / ".gpu-test-lint.toml").write_text('target = "vllm"\n')
    # vLLM's tests/conftest.py defines the `vllm_runner` fixture the rewrite requests; a
    # fix that requests a fixture no conftest defines is not made.
    (tree / "conftest.py").write_text(CONFTEST)
    for name, source in modules.items():
        (tree / name).write_text(source)
    report = subprocess.run([*gpu_test_lint(), "check", "--no-cache", "--output-format", "json",
                             "--exit-zero", "."], cwd=tree, capture_output=True, text=True)
    subprocess.run([*gpu_test_lint(), "check", "--no-cache", "--fix", "--unsafe-fixes",
                    "--exit-zero", "."], cwd=tree, capture_output=True, text=True, check=True)
    return list(json.loads(report.stdout))


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each case written as a test module, checked and fixed with ``target = "vllm"``."""
    tree = tmp_path_factory.mktemp("target-vllm")
    violations = _check_and_fix(tree, {f"test_{case}.py": TEMPLATE.format(args=args)
                                       for case, args in CASES.items()})
    out: dict[str, dict[str, Any]] = {}
    for case in CASES:
        name = f"test_{case}.py"
        gpu001 = [v for v in violations if Path(v["filename"]).name == name
                  and v["code"] == "GPU001"]
        fix = gpu001[0]["fix"] if gpu001 else None
        out[case] = {
            "applicability": fix["applicability"] if fix else None,
            "reason": (fix or {}).get("reason") or (gpu001[0].get("no_fix_reason")
                                                    if gpu001 else None),
            "after": (tree / name).read_text(),
        }
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_rewritten_call_resolves_the_same_config(fixed: dict[str, dict[str, Any]],
                                                 case: str, tiny_model: str) -> None:
    entry = fixed[case]
    if entry["applicability"] != "safe":
        pytest.skip(f"fix is {entry['applicability']}: {entry['reason']}")
    (original,) = _calls(TEMPLATE.format(args=CASES[case]), "LLM")
    (rewritten,) = _calls(entry["after"], "vllm_runner")
    args, kwargs = _evaluate(original, tiny_model)
    before = config_summary(resolve_llm_call(*args, **kwargs))
    r_args, r_kwargs = _evaluate(rewritten, tiny_model)
    after = config_summary(resolve_llm_call(**runner_llm_kwargs(*r_args, **r_kwargs)))
    assert after == before


# The model in a mapping, and a helper given the fixture by its
# callers. Each case is a whole module; the original runs with ``LLM`` replaced by a recorder,
# the rewritten one with a recording ``vllm_runner``, and both calls are resolved by vLLM.
MAPPING_HEAD = '''import pytest
from vllm import LLM, SamplingParams

MODEL = "tiny-model"
TABLE = {{
    "small": {{"model": MODEL, "max_model_len": 256, "enforce_eager": True, "dtype": "float32"}},
    "tuned": dict(model=MODEL, max_model_len=128, enforce_eager=True, dtype="float32",
                  trust_remote_code=False, block_size=32, enable_chunked_prefill=True),
}}

{body}
'''
MAPPING_CASES: dict[str, tuple[str, str]] = {
    "local_mapping": ("safe", '''def test_case():
    llm_kwargs = {"model": MODEL, "max_model_len": 256, "enforce_eager": True, "dtype": "float32"}
    llm = LLM(**llm_kwargs)
    assert llm.generate(["hello"], SamplingParams(max_tokens=2))
'''),
    "mapping_with_tokenizer": ("safe", '''def test_case():
    llm = LLM(**{"model": MODEL, "tokenizer": MODEL, "max_model_len": 256, "dtype": "float32"})
    assert llm.generate(["hello"], SamplingParams(max_tokens=2))
'''),
    "table_entry_sets_defaults": ("safe", '''def test_case():
    llm = LLM(**TABLE["tuned"])
    assert llm.generate(["hello"], SamplingParams(max_tokens=2))
'''),
    "table_entry_and_keyword": ("safe", '''def test_case():
    llm = LLM(**TABLE["small"], block_size=32, seed=7)
    assert llm.generate(["hello"], SamplingParams(max_tokens=2))
'''),
    "mapping_compiled": ("safe", '''def test_case():
    llm = LLM(**{"model": MODEL, "max_model_len": 256, "dtype": "float32"})
    assert llm.generate(["hello"], SamplingParams(max_tokens=2))
'''),
    "mapping_compilation_dict": ("safe", '''def test_case():
    config = {"model": MODEL, "max_model_len": 256, "dtype": "float32",
              "compilation_config": {"mode": 0}}
    llm = LLM(**config)
    assert llm.generate(["hello"], SamplingParams(max_tokens=2))
'''),
    "mapping_at_run_time": ("unsafe", '''def _config():
    return dict(TABLE["small"], seed=3)


def test_case():
    llm = LLM(**_config())
    assert llm.generate(["hello"], SamplingParams(max_tokens=2))
'''),
    "helper_given_the_fixture": ("safe", '''def _texts(prompt):
    llm = LLM(MODEL, max_model_len=256, enforce_eager=True, dtype="float32")
    texts = [o.outputs[0].text for o in llm.generate([prompt], SamplingParams(max_tokens=2))]
    return texts


def test_case():
    assert _texts("hello")
'''),
    "helper_with_mapping": ("safe", '''def _texts(name, prompt):
    llm = LLM(**TABLE[name])
    texts = [o.outputs[0].text for o in llm.generate([prompt], SamplingParams(max_tokens=2))]
    return texts


def test_case():
    assert _texts("tuned", "hello")
'''),
}


class _Called(Exception):
    """Raised by the recorders: the engine (runner) call's arguments, nothing built."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__("recorded")
        self.args_ = args
        self.kwargs = kwargs


def _record(*args: Any, **kwargs: Any) -> Any:
    raise _Called(args, kwargs)


def _engine_call(source: str, model: str, **params: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments ``test_case(**params)`` of ``source`` calls ``LLM`` or ``vllm_runner``
    with (``LLM`` replaced by the recorder after the imports ran)."""
    namespace: dict[str, Any] = {"__name__": "case"}
    exec(compile(source.replace('"tiny-model"', repr(model)), "case", "exec"), namespace)  # noqa: S102
    namespace["LLM"] = _record
    with pytest.raises(_Called) as called:
        namespace["test_case"](**params)
    return called.value.args_, called.value.kwargs


@pytest.fixture(scope="module")
def fixed_mappings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each mapping case checked and fixed with ``target = "vllm"`` (``--unsafe-fixes``)."""
    tree = tmp_path_factory.mktemp("target-vllm-mappings")
    violations = _check_and_fix(tree, {f"test_{case}.py": MAPPING_HEAD.format(body=body)
                                       for case, (_, body) in MAPPING_CASES.items()})
    out: dict[str, dict[str, Any]] = {}
    for case in MAPPING_CASES:
        name = f"test_{case}.py"
        (gpu001,) = [v for v in violations if Path(v["filename"]).name == name
                     and v["code"] == "GPU001"]
        out[case] = {"applicability": gpu001["fix"]["applicability"],
                     "after": (tree / name).read_text()}
    return out


@pytest.mark.parametrize("case", list(MAPPING_CASES))
def test_mapping_rewrite_resolves_the_same_config(fixed_mappings: dict[str, dict[str, Any]],
                                                  case: str, tiny_model: str) -> None:
    """Safe where the module shows the mapping; the run-time case is unsafe (a falsy
    ``compilation_config`` it might hold would change) yet resolves the same for this value."""
    expected, body = MAPPING_CASES[case]
    entry = fixed_mappings[case]
    assert entry["applicability"] == expected
    assert "vllm_runner(" in entry["after"] and " LLM(" not in entry["after"]
    args, kwargs = _engine_call(MAPPING_HEAD.format(body=body), tiny_model)
    before = config_summary(resolve_llm_call(*args, **kwargs))
    r_args, r_kwargs = _engine_call(entry["after"], tiny_model, vllm_runner=_record)
    after = config_summary(resolve_llm_call(**runner_llm_kwargs(*r_args, **r_kwargs)))
    assert after == before

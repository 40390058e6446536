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


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each case written as a test module, checked and fixed with ``target = "vllm"``."""
    tree = tmp_path_factory.mktemp("target-vllm")
    (tree / ".gpu-test-lint.toml").write_text('target = "vllm"\n')
    for case, args in CASES.items():
        (tree / f"test_{case}.py").write_text(TEMPLATE.format(args=args))
    report = subprocess.run([*gpu_test_lint(), "check", "--no-cache", "--output-format", "json",
                             "--exit-zero", "."], cwd=tree, capture_output=True, text=True)
    violations = json.loads(report.stdout)
    subprocess.run([*gpu_test_lint(), "check", "--no-cache", "--fix", "--unsafe-fixes",
                    "--exit-zero", "."], cwd=tree, capture_output=True, text=True, check=True)
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

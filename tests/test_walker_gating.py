"""The analysis walks the expressions of only the top-level statements that spell a name an
engine or runner call must spell; it records the same functions, engines and runner calls as
walking every statement."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lint_gpu_tests.analysis import analysis, process_targets
from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.config import Config
from lint_gpu_tests.parsing.source import decode_source
from lint_gpu_tests.rules import ALL_RULES

ROOT = Path(__file__).resolve().parent.parent
CRAFTED = {
    "alias_import": "from vllm import LLM as E\n\n\ndef test_a():\n    e = E('m')\n    del e\n",
    "local_alias_used_in_nested":
        "from vllm import LLM\n\n\ndef outer():\n    Engine = LLM\n\n    def inner():\n"
        "        return Engine('m')\n    return inner\n",
    "nfkc_identifier": "from vllm import LLM\n\n\ndef test_a():\n    e = \uff2c\uff2c\uff2d('m')\n",
    "cr_line_endings": "from vllm import LLM\r\rdef test_a():\r    e = LLM('m')\r    del e\r",
    "semicolons": "from vllm import LLM\nx = 1; e = LLM('m')\n",
    "runner_in_class": "class TestA:\n    def test_a(self, vllm_runner):\n"
                       "        with vllm_runner('m') as r:\n            pass\n",
    "main_guard": "import vllm\nif __name__ == '__main__':\n    e = vllm.LLM('m')\n",
    "process_target": "import multiprocessing as mp\nfrom vllm import LLM\n\n\ndef run():\n"
                      "    e = LLM('m')\n    del e\n\n\nCTX = mp.get_context('spawn')\n\n\n"
                      "def launch():\n    CTX.Process(target=run).start()\n",
    "decorated": "import pytest\nfrom vllm import LLM\n\n\n@pytest.fixture(params=[LLM])\n"
                 "def engine(request):\n    return request.param('m')\n",
}


def _facts(module: ModuleAnalysis) -> tuple[object, ...]:
    return (
        [(f.name, f.kind, f.fixture_scope, f.isolated, f.node.lineno) for f in module.functions],
        [(e.call.lineno, e.call.col_offset, e.bound_name, e.in_raises, e.under_main_guard,
          e.in_runner_class, e.function.name if e.function else None) for e in module.engines],
        [(r.call.lineno, r.call.col_offset, r.context, r.under_main_guard)
         for r in module.runner_calls],
    )


def _sources() -> list[tuple[str, bytes]]:
    files = sorted((*ROOT.glob("tests/fixtures/**/*.py"), *ROOT.glob("examples/**/*.py"),
                    *ROOT.glob("tests/e2e/suites/**/*.py")))
    examples = [(f"{rule.code}-{i}", example.source.encode())
                for rule in ALL_RULES
                for i, example in enumerate((*rule.INVALID, *rule.VALID))]
    return [(k, v.encode()) for k, v in CRAFTED.items()] + examples + [
        (str(p.relative_to(ROOT)), p.read_bytes()) for p in files]


@pytest.mark.parametrize(("name", "source"), _sources(), ids=[n for n, _ in _sources()])
def test_gated_walk_records_what_a_full_walk_does(name: str, source: bytes,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    text = decode_source(source)
    path = "test_module.py"
    gated = ModuleAnalysis.build(ast.parse(source), text, path, Config())
    def every_line(text: str, words: tuple[str, ...]) -> list[int]:
        return list(range(1, text.count("\n") + text.count("\r") + 2))

    monkeypatch.setattr(analysis, "lines_naming", every_line)
    monkeypatch.setattr(process_targets, "lines_naming", every_line)
    full = ModuleAnalysis.build(ast.parse(source), text, path, Config())
    assert _facts(gated) == _facts(full)


@pytest.mark.parametrize("name", ["alias_import", "local_alias_used_in_nested",
                                  "nfkc_identifier", "cr_line_endings", "semicolons",
                                  "main_guard"])
def test_crafted_engines_are_found(name: str) -> None:
    source = CRAFTED[name]
    module = ModuleAnalysis.build(ast.parse(source), source, "test_module.py", Config())
    assert len(module.engines) == 1

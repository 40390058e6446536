"""The differential generator's fixed-seed slice: generated modules, fixed with ``--fix`` and
``--fix --unsafe-fixes``, behave on the stand-in engine as before (``harness.py``).

The long campaign over many seeds is ``benchmarks/differential_campaign.py``
(``make campaign``); its figures are in docs/hardening.md.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from lint_gpu_tests.prove.compare import Difference, compare

from .generator import KNOWN_DEFECT_SHAPES, SHAPES, Module, generate_module
from .harness import (
    ModuleVerdict,
    UnsafeReason,
    allowed_fields,
    run_modules,
    run_pytest,
    summarize,
)

#: The slice run in ``make test``: the modules of these seeds, and every shape once, three
#: to a module (seeds from :data:`SHAPE_SEED`).
SLICE_SEEDS = range(0, 24)
SHAPE_SEED = 100_000


def slice_modules() -> list[Module]:
    """The slice's modules."""
    names = sorted(SHAPES)
    chunks = [names[i:i + 3] for i in range(0, len(names), 3)]
    return [generate_module(s) for s in SLICE_SEEDS] + [
        generate_module(SHAPE_SEED + i, only=chunk) for i, chunk in enumerate(chunks)]


@pytest.fixture(scope="module")
def slice_verdicts(tmp_path_factory: pytest.TempPathFactory) -> list[ModuleVerdict]:
    return run_modules(tmp_path_factory.mktemp("differential"), slice_modules())


def test_slice_behaves_the_same_after_the_fixes(slice_verdicts: list[ModuleVerdict]) -> None:
    summary = summarize(slice_verdicts)
    assert [(v.module, v.before_failures) for v in slice_verdicts if v.before_failures] == []
    assert [(v.module, [d.describe() for d in v.safe]) for v in slice_verdicts if v.safe] == []
    assert [(v.module, [d.describe() for d in v.unsafe])
            for v in slice_verdicts if v.unsafe] == []
    # what the slice exercises; the fixed counts change when the fixer fixes more or less
    assert (summary["modules"], summary["tests"]) == (43, 135)
    assert (summary["fixed_safe"], summary["fixed_unsafe"], summary["unsafe_allowed"]) == \
        (41, 41, 4)
    assert set(summary["shapes"]) == set(SHAPES)


def test_generation_is_deterministic_and_parses() -> None:
    for seed in range(200):
        module = generate_module(seed)
        assert generate_module(seed).source == module.source
        ast.parse(module.source)
        assert not set(module.shapes) & set(KNOWN_DEFECT_SHAPES)
    for name in KNOWN_DEFECT_SHAPES:
        ast.parse(generate_module(7, only=[name]).source)


MUTATED = '''import gc

from vllm import LLM, SamplingParams


def test_a():
    llm = LLM("m", max_model_len=32)
    assert llm.generate(["x"], SamplingParams(temperature=0))
    del llm
    gc.collect()


def test_b():
    assert True
'''


def test_harness_sees_each_kind_of_difference(tmp_path: Path) -> None:
    """A changed configuration, a leaked engine and a changed outcome are each reported."""
    for name, source in [("orig", MUTATED),
                         ("changed", MUTATED.replace("max_model_len=32", "max_model_len=64")
                          .replace("    gc.collect()\n", "")
                          .replace("assert True", "assert False"))]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "test_m.py").write_text(source, encoding="utf-8")
    before = run_pytest(tmp_path / "orig", tmp_path / "orig.json")
    after = run_pytest(tmp_path / "changed", tmp_path / "changed.json")
    found = [(d.test, d.field) for d in compare(before, after, texts="exact")]
    assert found == [("<end>::test_m.py", "leaked_at_start"),
                     ("test_m.py::test_a", "engines"),
                     ("test_m.py::test_a", "texts"),
                     ("test_m.py::test_b", "outcome"),
                     ("test_m.py::test_b", "leaked_at_start")]
    shutil.rmtree(tmp_path)


def test_unsafe_reasons_allow_only_what_they_name() -> None:
    identity = UnsafeReason("identity checks (`is`) on the engine see a `weakref.proxy`",
                            "test_a")
    scoped = UnsafeReason("a class-scoped fixture: the engine's lifetime follows the "
                          "fixture's scope and the runner must allow it", None)
    assert allowed_fields(identity.reason) == {"outcome", "texts"}
    assert allowed_fields(scoped.reason) == {"leaked_at_start"}
    assert allowed_fields("the runner takes other defaults") == frozenset()
    assert identity.allows(Difference("m.py::test_a[1-2]", "outcome", "passed", "failed"))
    assert not identity.allows(Difference("m.py::test_b", "outcome", "passed", "failed"))
    assert not identity.allows(Difference("m.py::test_a", "engines", [], [{}]))
    assert scoped.allows(Difference("<end>::m.py", "leaked_at_start", 0, 1))

"""Every fix proven by running it: the corpus in ``suites/`` on real vLLM, before and after.

One inner pytest session per variant (the original corpus, ``--fix``, and ``--fix
--unsafe-fixes`` for the modules where it writes something else), so the engines are built
once per test and variant. See ``harness.py`` for what is compared and ``suites/MANIFEST.toml``
for the leaks expected before the fix. The figures go to ``tests/e2e/work/differential.json``
(``docs/e2e.md`` is written from it).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import (
    CORPUS,
    E2E_DIR,
    Manifest,
    Run,
    apply_fix,
    check_report,
    compare,
    copy_corpus,
    engines_built,
    leaked_tests,
    module_of,
    run_suites,
)
from harness import (
    test_name as short_name,
)

MANIFEST = Manifest.load()
# GPU_TEST_LINT_E2E_MODULES="a.py,b.py" runs only those corpus modules (for work on one shape);
# unset, the whole corpus runs, in the manifest's order.
_ONLY = [m for m in os.environ.get("GPU_TEST_LINT_E2E_MODULES", "").split(",") if m]
MODULES: list[str] = [m for m in MANIFEST.order if not _ONLY or m in _ONLY]


@dataclass
class Variants:
    before: Run
    safe: Run
    unsafe: Run | None
    unsafe_modules: list[str]
    left_after_safe: list[dict[str, Any]]
    left_after_unsafe: list[dict[str, Any]]
    trees: dict[str, Path]


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory, tiny_model: str) -> Variants:
    base = tmp_path_factory.mktemp("differential")
    trees = {name: base / name for name in ("before", "safe", "unsafe")}
    for tree in trees.values():
        copied = copy_corpus(tree)
        assert sorted(copied) == sorted(MANIFEST.order), "MANIFEST.toml order lists every module"
    apply_fix(trees["safe"], unsafe=False)
    apply_fix(trees["unsafe"], unsafe=True)
    unsafe_modules = [m for m in MODULES
                      if (trees["unsafe"] / m).read_bytes() != (trees["safe"] / m).read_bytes()]
    before = run_suites(trees["before"], MODULES)
    safe = run_suites(trees["safe"], MODULES)
    unsafe = run_suites(trees["unsafe"], unsafe_modules) if unsafe_modules else None
    result = Variants(before, safe, unsafe, unsafe_modules, check_report(trees["safe"]),
                      check_report(trees["unsafe"]), trees)
    _write_summary(result)
    return result


def _write_summary(v: Variants) -> None:
    out = E2E_DIR / "work"
    out.mkdir(exist_ok=True)
    summary: dict[str, Any] = {
        "seconds": {"before": v.before.seconds, "safe": v.safe.seconds,
                    "unsafe": v.unsafe.seconds if v.unsafe else 0.0},
        "modules": {},
    }
    for module in MODULES:
        entry: dict[str, Any] = {
            "engines_built": {"before": engines_built(v.before.records, module),
                              "safe": engines_built(v.safe.records, module)},
            "leaked_before": leaked_tests(v.before.records, module),
            "leaked_after_safe": leaked_tests(v.safe.records, module),
            "safe_differences": [asdict(d) for d in compare(v.before.records,
                                                            v.safe.records, module)],
            "left_after_safe": sorted(f"{x['code']}:{x['location']['row']}"
                                      for x in v.left_after_safe
                                      if _names(x["filename"], module)),
            "configs": [r["engines"] for t, r in sorted(v.before.records.items())
                        if module_of(t) == module],
        }
        if v.unsafe and module in v.unsafe_modules:
            entry["engines_built"]["unsafe"] = engines_built(v.unsafe.records, module)
            entry["leaked_after_unsafe"] = leaked_tests(v.unsafe.records, module)
            entry["unsafe_differences"] = [asdict(d) for d in compare(
                v.before.records, v.unsafe.records, module)]
        summary["modules"][module] = entry
    (out / "differential.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    for name, tree in v.trees.items():
        for module in MODULES:
            target = out / name / module
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((tree / module).read_bytes())
        for extra in (".pytest.log",):
            if (tree / extra).exists():
                (out / name / extra.lstrip(".")).write_bytes((tree / extra).read_bytes())


def _names(filename: str, module: str) -> bool:
    """True when a report's ``filename`` (absolute or relative to its tree) is ``module``
    (``/``-separated, relative to the corpus: ``target_vllm/test_x.py``)."""
    path = Path(filename).as_posix()
    return path == module or path.endswith("/" + module)


@pytest.mark.parametrize("module", MODULES)
def test_the_fix_changes_the_module(variants: Variants, module: str) -> None:
    """Every corpus module exercises a fix: ``--fix --unsafe-fixes`` rewrites it."""
    original = (CORPUS / module).read_bytes()
    assert (variants.trees["unsafe"] / module).read_bytes() != original


@pytest.mark.parametrize("module", MODULES)
def test_the_original_fails_only_where_meant(variants: Variants, module: str) -> None:
    """Before the fix, only the manifest's ``fails_before`` tests fail or error: a corpus
    test broken for another reason (say, a block size the CPU backend rejects) would fail
    the same before and after and prove nothing."""
    failing = sorted(short_name(t) for t, r in variants.before.records.items()
                     if module_of(t) == module and r["outcome"] in ("failed", "error"))
    assert failing == sorted(MANIFEST.fails_before(module))


@pytest.mark.parametrize("module", MODULES)
def test_the_leak_is_there_before_the_fix(variants: Variants, module: str) -> None:
    """The hand-managed module leaks where the manifest says (measured, not assumed)."""
    expected = MANIFEST.leaks_before(module)
    leaked = leaked_tests(variants.before.records, module)
    assert [t for t in expected if t not in leaked] == []


@pytest.mark.parametrize("module", MODULES)
def test_safe_fix_keeps_behaviour(variants: Variants, module: str) -> None:
    """Same outcomes, resolved configurations and texts; no engine alive at a test's start."""
    assert variants.before.records, f"the original corpus did not run: {variants.before.log}"
    assert variants.safe.records, f"the fixed corpus did not run: {variants.safe.log}"
    assert compare(variants.before.records, variants.safe.records, module) == []


@pytest.mark.parametrize("module", MODULES)
def test_unsafe_fix_differs_only_as_stated(variants: Variants, module: str) -> None:
    """An unsafe fix may change only the fields its manifest entry names."""
    if module not in variants.unsafe_modules:
        pytest.skip("--unsafe-fixes writes the same as --fix here")
    assert variants.unsafe is not None
    unexpected = [d for d in compare(variants.before.records, variants.unsafe.records, module)
                  if d.field not in MANIFEST.unsafe_may_change(module, d.test.split("::", 1)[-1])]
    assert unexpected == []

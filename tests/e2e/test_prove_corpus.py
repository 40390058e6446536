"""``gpu-test-lint prove`` on the corpus, on the real engine: every module ``--fix`` (and
``--fix --unsafe-fixes``) changes is proven the same (or its leak fixed), and ``--apply``
writes exactly what ``check --fix`` writes.

``prove`` here keys its sessions as the differential runs do (this harness's digest, the
pinned environment, no pytest arguments) and reads them from a copy of
``tests/e2e/recordings/``: after ``test_differential.py`` has run (it runs first, and records
what had no recording) every session of the unsharded run is taken from a recording, and
this costs no engine time; run alone, it runs the sessions it finds no recording for, one at
a time. What it records is left in its temporary folder, never in the checkout, where a key
the differential runs do not make would be an orphan (``make test`` fails on one, and may be
running beside it). ``GPU_TEST_LINT_E2E_MODULES`` limits it as it limits the differential
runs.

The unsharded run is then proven again as two shards (``--shard 1/2`` and ``2/2``, one after
the other, so no more engines are alive than in the unsharded run), and their JSON reports
merged (``prove merge``) must give its verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from harness import CORPUS, E2E_DIR, Manifest, apply_fix, copy_corpus
from recordings import RECORDINGS, environment_id, harness_digest

from lint_gpu_tests.prove import ProveOptions, ProveResult, Status, prove_paths
from lint_gpu_tests.prove.merge import merge_reports
from lint_gpu_tests.prove.report import render_json

MANIFEST = Manifest.load()
_ONLY = [m for m in os.environ.get("GPU_TEST_LINT_E2E_MODULES", "").split(",") if m]
MODULES: list[str] = [m for m in MANIFEST.order if not _ONLY or m in _ONLY]


@pytest.mark.parametrize("unsafe", [False, True], ids=["fix", "unsafe-fixes"])
def test_prove_on_the_corpus_then_apply(tmp_path: Path, tiny_model: str, unsafe: bool) -> None:
    """A module whose manifest entry lets an unsafe fix change a field
    (``unsafe_differs``) is left out of the unsafe run."""
    modules = [m for m in MODULES
               if not unsafe or not MANIFEST.modules.get(m, {}).get("unsafe_differs")]
    tree, fixed = tmp_path / "tree", tmp_path / "fixed"
    copy_corpus(tree)
    copy_corpus(fixed)
    apply_fix(fixed, unsafe=unsafe)
    recordings = tmp_path / "recordings"
    shutil.copytree(RECORDINGS, recordings)
    options = ProveOptions(unsafe_fixes=unsafe, apply=True, texts="exact", strict_leaks=True,
                           recordings=str(recordings), harness=harness_digest(),
                           environment=environment_id(), python_path=(str(E2E_DIR),))
    lines: list[str] = []
    start = time.monotonic()
    shards_tree = tmp_path / "shards"  # the tree as it was, for the shards (the run applies)
    copy_corpus(shards_tree)
    result = prove_paths(modules, options, root=str(tree), progress=lines.append)
    print(f"prove on {len(modules)} corpus modules: {time.monotonic() - start:.1f} s")
    print("\n".join(lines))
    verdicts = {m.module: (m.status, m.note, [d.describe() for d in m.differences])
                for m in result.modules}
    assert {m: v for m, v in verdicts.items() if not v[0].proven} == {}
    changed = [m for m in modules if (fixed / m).read_bytes() != (CORPUS / m).read_bytes()]
    # a helper module or a conftest the fix rewrote with its callers (a fix unit across
    # modules) is written too; its callers are the modules proven for it, and no other
    # module imports it
    helpers = [h for h in _helper_modules(fixed)
               if (fixed / h).read_bytes() != (CORPUS / h).read_bytes()]
    assert sorted(verdicts) == sorted(changed)
    assert sorted(result.applied) == sorted(changed + helpers)
    assert result.withheld == []
    for module in [*modules, *helpers]:
        assert (tree / module).read_bytes() == (fixed / module).read_bytes(), module
    # the leaks the manifest names before the fix are there, and gone after it (a module
    # whose tests only may leak, as the garbage collector runs, may be either)
    assert {m for m in changed if MANIFEST.leaks_before(m)} <= \
        {m.module for m in result.modules if m.status is Status.LEAK_FIXED}

    # the same run as two shards, one after the other, merged: the unsharded verdict
    options.apply = False
    reports, shard_lines = [], []
    start = time.monotonic()
    for index in (1, 2):
        options.shard = (index, 2)
        part = prove_paths(modules, options, root=str(shards_tree), progress=shard_lines.append)
        reports.append(json.loads(render_json(part)))
    print(f"prove on them as two shards: {time.monotonic() - start:.1f} s")
    print("\n".join(shard_lines))
    merged = merge_reports(reports)
    assert sorted(m for r in reports for m in r["to_prove"]) == sorted(changed * 2)
    assert sorted(m["module"] for r in reports for m in r["modules"]) == sorted(changed)
    assert _verdict(merged) == _verdict(result)


def _helper_modules(tree: Path) -> list[str]:
    """The corpus copy's Python files other than test modules (helper modules and
    conftests), ``/``-separated."""
    return sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*.py")
                  if not p.name.startswith("test_"))


def _verdict(result: ProveResult) -> list[object]:
    """What a run concluded, per module: its verdict, differences, tests and outcomes."""
    return [result.proven, result.changed, result.unchanged, result.to_prove,
            [(m.module, m.status, [d.describe() for d in m.differences], m.tests, m.outcomes,
              m.leaked_before, m.leaked_after) for m in result.modules]]

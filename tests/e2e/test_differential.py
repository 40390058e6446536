"""Every fix proven by running it: the corpus in ``suites/`` on real vLLM, before and after.

Each corpus module runs in its own inner pytest session per variant (the original corpus,
``--fix``, and ``--fix --unsafe-fixes`` where it writes something else), two sessions side by
side within the machine's engine budget. A session's result is kept as a recording keyed by
exactly what it depends on (``recordings.py``): a module runs on the real engine when one of its
variants' keys has no recording, when it is this commit's sample (``sample_module``), or always
under ``make e2e-full``; the comparison is the same either way. See ``harness.py`` for what is
compared and ``suites/MANIFEST.toml`` for the leaks expected before the fix. The figures go to
``tests/e2e/work/differential.json`` (``docs/e2e.md`` is written from it).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
from harness import (
    CORPUS,
    E2E_DIR,
    Manifest,
    Run,
    check_report,
    compare,
    engines_built,
    leaked_tests,
    module_of,
)
from harness import (
    test_name as short_name,
)
from recordings import (
    VARIANTS,
    Job,
    Recording,
    Store,
    comparable_packages,
    corpus_inputs,
    default_workers,
    full_run,
    installed_environment,
    key_of,
    modules_to_run,
    run_jobs,
    sample_module,
)

from lint_gpu_tests.prove.session import SessionResult, run_session

MANIFEST = Manifest.load()
# GPU_TEST_LINT_E2E_MODULES="a.py,b.py" runs only those corpus modules (for work on one shape);
# unset, the whole corpus runs, in the manifest's order.
_ONLY = [m for m in os.environ.get("GPU_TEST_LINT_E2E_MODULES", "").split(",") if m]
MODULES: list[str] = [m for m in MANIFEST.order if not _ONLY or m in _ONLY]
#: Fields a recording made on another CPU may not reproduce: greedy texts come from float
#: kernels that differ between CPUs; outcomes, configurations and leaks do not.
CPU_DEPENDENT = ("texts",)


@dataclass
class Variants:
    before: Run
    safe: Run
    unsafe: Run | None
    unsafe_modules: list[str]
    left_after_safe: list[dict[str, Any]]
    left_after_unsafe: list[dict[str, Any]]
    trees: dict[str, Path]
    #: modules run on the real engine now, and those taken from their recordings
    rerun: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)
    sample: str | None = None
    #: (module, variant) -> the session run now / the recording kept (before this run)
    fresh: dict[tuple[str, str], SessionResult] = field(default_factory=dict)
    kept: dict[tuple[str, str], Recording] = field(default_factory=dict)
    pruned: list[str] = field(default_factory=list)
    seconds: float = 0.0


#: The last differential run of this process, for the terminal summary (``conftest.py``).
LAST: list[Variants] = []


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory, tiny_model: str) -> Variants:
    start = time.monotonic()
    trees, inputs = corpus_inputs(tmp_path_factory.mktemp("differential"), MANIFEST.order)
    unsafe_everywhere = [m for m in MANIFEST.order if (m, "unsafe") in inputs]
    # Every module's keys, whichever run: the store is pruned to exactly these.
    keys = {mv: key_of(i) for mv, i in inputs.items()}
    store = Store()
    sample = sample_module(MODULES)
    rerun = modules_to_run(keys, store, full=full_run(), sample=sample, only=MODULES)
    kept = {mv: rec for mv, k in keys.items() if mv[0] in MODULES
            and (rec := store.get(k)) is not None}
    jobs = [Job(m, v, trees[v], MANIFEST.peak_engines(m),
                kept[(m, v)].seconds if (m, v) in kept else 100.0)
            for (m, v) in keys if m in rerun]

    def run(job: Job) -> SessionResult:
        result = run_session(job.tree, job.module, python_path=[str(E2E_DIR)])
        # Kept as soon as it is complete (an interrupted run keeps what it finished); the
        # sample's recording stays as it was (its fresh run is compared with it below), except
        # in a full run.
        mv = (job.module, job.variant)
        if result.complete and (full_run() or mv not in kept):
            store.put(inputs[mv], result.records, result.seconds, result.returncode)
        return result

    done = run_jobs(jobs, run, workers=default_workers())
    fresh = {(job.module, job.variant): result for job, result in done.items()}
    pruned = store.prune(keys.values())
    runs = {v: Run() for v in VARIANTS}
    for (m, v) in keys:
        if m not in MODULES:
            continue
        run = runs[v]
        if (m, v) in fresh:
            run.records.update(fresh[(m, v)].records)
            run.seconds += fresh[(m, v)].seconds
            run.logs[m] = fresh[(m, v)].log
        elif (m, v) in kept:
            run.records.update(kept[(m, v)].records)
            run.seconds += kept[(m, v)].seconds
    unsafe_modules = [m for m in unsafe_everywhere if m in MODULES]
    result = Variants(runs["before"], runs["safe"], runs["unsafe"] if unsafe_modules else None,
                      unsafe_modules, check_report(trees["safe"]),
                      check_report(trees["unsafe"]), trees, rerun,
                      [m for m in MODULES if m not in rerun], sample, fresh, kept, pruned,
                      time.monotonic() - start)
    _write_summary(result)
    LAST.append(result)
    return result


def _write_summary(v: Variants) -> None:
    out = E2E_DIR / "work"
    out.mkdir(exist_ok=True)
    summary: dict[str, Any] = {
        "seconds": {"before": v.before.seconds, "safe": v.safe.seconds,
                    "unsafe": v.unsafe.seconds if v.unsafe else 0.0, "wall": v.seconds},
        "rerun": v.rerun, "from_recordings": v.recorded, "sample": v.sample,
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
        run = {"before": v.before, "safe": v.safe, "unsafe": v.unsafe}[name]
        for module, log in (run.logs if run else {}).items():
            target = out / name / f"{module}.log"
            target.write_bytes(log.read_bytes())


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
    for run, name in ((variants.before, "original"), (variants.safe, "fixed")):
        assert any(module_of(t) == module for t in run.records), \
            f"the {name} module did not run: {run.logs.get(module)}"
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


@pytest.mark.parametrize("module", MODULES)
def test_the_engine_budget_holds(variants: Variants, module: str) -> None:
    """No variant had more engines alive at once than ``peak_engines`` in the manifest, which
    the scheduler relied on to keep the machine within 3 engines."""
    runs = [r for r in (variants.before, variants.safe, variants.unsafe) if r is not None]
    peak = max((r.get("cores_peak") or 0 for run in runs for t, r in run.records.items()
                if module_of(t) == module), default=0)
    assert peak <= MANIFEST.peak_engines(module)


def test_every_session_run_now_completed(variants: Variants) -> None:
    """Each inner session run now ended normally (pytest's status 0 or 1, records written);
    an incomplete one is not kept as a recording."""
    broken = {f"{m} ({v})": (r.returncode, str(r.log)) for (m, v), r in variants.fresh.items()
              if not r.complete}
    assert broken == {}


def test_recordings_were_made_in_this_environment(variants: Variants) -> None:
    """Every recording used was made with the packages, Python and machine installed here: one
    made elsewhere is stale (``make e2e-full`` makes them anew). The installers (pip,
    setuptools, wheel: ``recordings.INSTALLERS``, which ``pip freeze`` and so
    ``constraints.txt`` leave out, and ``make install-e2e`` upgrades) are not compared."""
    here = installed_environment()
    stale = {}
    for rec in variants.kept.values():
        differs = sorted(comparable_packages(rec.environment["packages"])
                         ^ comparable_packages(here["packages"]))
        if rec.environment["python"] != here["python"]:
            differs.append(f"python {rec.environment['python']} != {here['python']}")
        if rec.environment["machine"] != here["machine"]:
            differs.append(f"machine {rec.environment['machine']} != {here['machine']}")
        if differs:
            stale[rec.path.name] = differs
    assert stale == {}


def reproduction_differences(recorded: dict[str, dict[str, Any]],
                             fresh: dict[str, dict[str, Any]], module: str, *,
                             same_cpu: bool) -> list[str]:
    """How a fresh run of one variant of ``module`` differs from its recording: outcomes,
    configurations and leaks at each test's start (not for the manifest's ``may_leak_before``
    tests, which leak only until the garbage collector runs), and texts when both ran on the
    same CPU model (:data:`CPU_DEPENDENT`)."""
    fields = ["outcome", "engines", "leaked_at_start"]
    if same_cpu:
        fields += list(CPU_DEPENDENT)
    gc_dependent = set(MANIFEST.modules.get(module, {}).get("may_leak_before", []))
    out = []
    for test_id in sorted({t for t in (*recorded, *fresh) if module_of(t) == module}):
        r, f = recorded.get(test_id), fresh.get(test_id)
        if r is None or f is None:
            out.append(f"{test_id}: recorded {r is not None}, run now {f is not None}")
            continue
        for name in fields:
            if name == "leaked_at_start" and short_name(test_id) in gc_dependent:
                continue
            if r.get(name) != f.get(name):
                out.append(f"{test_id} {name}: recorded {r.get(name)!r}, now {f.get(name)!r}")
    return out


def test_fresh_runs_reproduce_their_recordings(variants: Variants) -> None:
    """Every module and variant run now that also had a recording (this commit's sample, a
    module whose other variant changed, every module under ``make e2e-full``) gives what the
    recording says. A recording the real engine no longer reproduces fails here."""
    if not any(mv in variants.kept for mv in variants.fresh):
        pytest.skip("no module run now had a recording to reproduce")
    here = installed_environment()["cpu"]
    differences = {f"{m} ({v})": diffs for (m, v), rec in variants.kept.items()
                   if (m, v) in variants.fresh and (diffs := reproduction_differences(
                       rec.records, variants.fresh[(m, v)].records, m,
                       same_cpu=rec.environment["cpu"] == here))}
    assert differences == {}


def test_every_module_is_run_or_recorded(variants: Variants) -> None:
    """Every module is run now or taken from a recording, never neither."""
    assert sorted(variants.rerun + variants.recorded) == sorted(MODULES)

"""The differential runs' recordings, keyed by exactly what a run's result depends on.

An inner session (``session.py``) runs one corpus module of one tree (the original, the
``--fix`` copy or the ``--fix --unsafe-fixes`` copy) on the real engine. What it records
depends on, and only on:

- the module's bytes in that tree, and the files pytest reads beside it there (``pytest.ini``
  and every ``conftest.py`` from the tree's root down to the module's folder);
- the code (:func:`code_digest`: comments and docstrings aside) of the harness's files
  that decide what a session records (:data:`HARNESS_FILES`: the tiny model's recipe, the
  engines' arguments and environment, ``tiny_model.ENGINE_ENV``, which ``conftest.py`` sets
  for the inner sessions to inherit, and what vLLM's test runner hands to ``LLM``);
- the code of the runtime (``lint_gpu_tests/runtime/`` and the package's ``__init__.py``:
  the recorder, the ``vllm_runner`` fixture, isolation; the original corpus uses it too) and
  of ``gpu-test-lint prove``'s session (``lint_gpu_tests/prove/session.py``: the inner
  session's command line);
- the environment: Python's version and machine, and the e2e venv's pinned packages
  (``constraints.txt``: vLLM, torch and all they pull).

It does not depend on the fixer: the fixer only decides the fixed bytes. Each recording is a
JSON file ``recordings/<key>.json`` where ``key`` is the SHA-256 (first 24 hex digits) of those
inputs (:func:`recording_inputs`, which are ``gpu-test-lint prove``'s:
:mod:`lint_gpu_tests.prove.store`), written only by the harness after a real, complete run.
A refactor that leaves every fixed module byte-identical re-proves with no engine time; a fix
that changes one module's output makes that module (and only it) run again.

A recording no current input set names is an orphan and fails ``make test``
(``tests/test_e2e_recordings.py``); a recording made in another environment than the installed
one fails ``make e2e``; ``make e2e-full`` (``GPU_TEST_LINT_E2E_FULL=1``) ignores them all, runs
every module and writes them anew.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from lint_gpu_tests.prove import schedule
from lint_gpu_tests.prove import store as prove_store
from lint_gpu_tests.prove.schedule import Job
from lint_gpu_tests.prove.store import (
    Platform,
    Recording,
    code_digest,
    code_files_digest,
    digest,
    installed_environment,
    key_of,
    records_digest,
    this_platform,
)
from lint_gpu_tests.prove.store import recording_inputs as prove_inputs

__all__ = ["Job", "Recording", "code_digest", "installed_environment", "key_of",
           "records_digest"]

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]
RECORDINGS = E2E_DIR / "recordings"
CONSTRAINTS = E2E_DIR / "constraints.txt"

#: The harness files whose code can change what an inner session records (not the
#: comparison, the scheduler or this store, which read recordings and never make them; the
#: recorder and the session's command line are the package's, in the key's ``runtime``).
HARNESS_FILES = ("tiny_model.py", "vllm_test_runner.py")

#: What the variants of a module are called; ``before`` is the original corpus.
VARIANTS = ("before", "safe", "unsafe")

#: Engines the machine runs at once at most (2 cores, 24 GiB; an engine is 2.3 GB in two
#: processes): the scheduler keeps the sum of the running sessions' peaks within it.
ENGINE_BUDGET = 3

FULL_ENV = "GPU_TEST_LINT_E2E_FULL"
JOBS_ENV = "GPU_TEST_LINT_E2E_JOBS"
SAMPLE_ENV = "GPU_TEST_LINT_E2E_SAMPLE"


def harness_digest() -> str:
    """Digest of the code of :data:`HARNESS_FILES` (in ``tests/e2e/``; :func:`code_digest`)."""
    return code_files_digest([E2E_DIR / name for name in HARNESS_FILES], E2E_DIR)


def environment_id(on: Platform | None = None) -> dict[str, str]:
    """The environment a recording is valid for: Python's ``major.minor`` and the machine
    (``on``, default :func:`this_platform`), and the digest of ``constraints.txt``, which pins
    every package of the e2e venv."""
    python, machine = on or this_platform()
    return {"python": python, "machine": machine,
            "constraints": digest(CONSTRAINTS.read_bytes())}


def recording_inputs(tree: Path, module: str, on: Platform | None = None) -> dict[str, Any]:
    """Everything ``module`` of ``tree`` run on the real engine depends on (module docstring):
    ``prove``'s inputs (:func:`lint_gpu_tests.prove.store.recording_inputs`) with this
    harness's code and the e2e venv's pins.

    Args:
        tree: a corpus copy (``harness.copy_corpus``), original or fixed.
        module: the module's ``/``-separated path inside it.
        on: the Python and machine the recording is for (default: this interpreter's).

    The modules beside it that it may import (:func:`sibling_modules`) count by their bytes
    too, as ``prove``'s ``helpers``.

    Returns:
        A JSON-able dict; :func:`key_of` turns it into the recording's key.
    """
    return prove_inputs(tree, module, harness=harness_digest(), environment=environment_id(on),
                        helpers=sibling_modules(tree, module))


def sibling_modules(tree: Path, module: str) -> list[str]:
    """The modules beside ``module`` in its folder of ``tree`` that it may run code of: those
    that are neither test modules nor a ``conftest.py`` (``xunit/engine_helpers.py``, which the
    module imports and a fix across modules rewrites with it), and the test modules its
    import statements name (``from test_xunit_owner import build_engine``),
    ``/``-separated: inputs of its recording."""
    folder = (tree / module).parent
    imports = " ".join(line for line in (tree / module).read_text().splitlines()
                       if line.lstrip().startswith(("import ", "from ")))
    words = set(re.findall(r"\w+", imports))
    return sorted(p.relative_to(tree).as_posix() for p in folder.glob("*.py")
                  if p.name != "conftest.py" and p.name != Path(module).name and (
                      not p.name.startswith("test_") or p.stem in words))


#: Packaging tools in the e2e venv that ``pip freeze`` (and so ``constraints.txt``) leaves
#: out, and that ``make install-e2e`` takes at their newest (``pip install --upgrade pip``):
#: not compared between a recording's environment and the installed one.
INSTALLERS = frozenset({"pip", "setuptools", "wheel"})


def comparable_packages(packages: Iterable[str]) -> set[str]:
    """``name==version`` entries of an environment, the :data:`INSTALLERS` left out."""
    return {p for p in packages if p.split("==", 1)[0] not in INSTALLERS}


def corpus_inputs(base: Path, modules: list[str], on: Platform | None = None
                  ) -> tuple[dict[str, Path], dict[tuple[str, str], dict[str, Any]]]:
    """Make the corpus's variant trees under ``base`` (``before``: the copy as it is; ``safe``:
    fixed with ``check --fix``; ``unsafe``: with ``--fix --unsafe-fixes``) and the recording
    inputs of every module and variant; ``unsafe`` only where it writes other bytes than
    ``safe`` (the same bytes would have the same key).

    Args:
        base: an empty folder.
        modules: every corpus module (``MANIFEST.toml``'s ``order``).
        on: the Python and machine of the inputs (default: this interpreter's).

    Returns:
        ``variant -> tree`` and ``(module, variant) -> inputs``, modules in ``modules``' order.

    Raises:
        AssertionError: when the fixer exits with 2, or the corpus holds a module
            ``modules`` does not list.
    """
    from harness import apply_fix, copy_corpus

    trees = {name: base / name for name in VARIANTS}
    for tree in trees.values():
        copied = copy_corpus(tree)
        assert sorted(copied) == sorted(modules), "MANIFEST.toml order lists every module"
    apply_fix(trees["safe"], unsafe=False)
    apply_fix(trees["unsafe"], unsafe=True)
    unsafe = {m for m in modules
              if (trees["unsafe"] / m).read_bytes() != (trees["safe"] / m).read_bytes()}
    inputs = {(m, v): recording_inputs(trees[v], m, on) for m in modules for v in VARIANTS
              if v != "unsafe" or m in unsafe}
    return trees, inputs


def stale_recordings(store: Store, current: Iterable[str]) -> dict[str, str]:
    """What is wrong with the store, given the keys of the corpus as it is now: file name ->
    why (an orphan: no current module and variant has its inputs; or not a valid recording of
    its key: renamed, or edited by hand)."""
    wanted = set(current)
    problems: dict[str, str] = {}
    for key in store.keys():
        name = store.path(key).name
        if key not in wanted:
            problems[name] = ("orphan: no corpus module's inputs hash to this key (a module, "
                              "the fix, the harness, the runtime or the environment changed; "
                              "`make e2e` runs what changed and removes it)")
            continue
        try:
            store.get(key)
        except (ValueError, KeyError, json.JSONDecodeError) as error:
            problems[name] = str(error)
    return problems


class Store(prove_store.Store):
    """The recordings folder (``tests/e2e/recordings/`` by default), one JSON file a key."""

    def __init__(self, folder: Path = RECORDINGS) -> None:
        super().__init__(folder)


def modules_to_run(keys: dict[tuple[str, str], str], store: Store, *, full: bool,
                   sample: str | None, only: Iterable[str] | None = None) -> list[str]:
    """The modules that must run on the real engine, in ``keys``' order.

    A module runs as a whole (every variant of it, so its comparison is always between runs
    of one machine) when any of its variants' keys has no recording, when it is the
    ``sample``, or always under ``full``.

    Args:
        keys: ``(module, variant)`` -> key, for every module and variant of the corpus.
        store: the recordings.
        full: run everything (``make e2e-full``).
        sample: the module run for real whatever the recordings say (or None).
        only: when given, only these modules may run (``GPU_TEST_LINT_E2E_MODULES``).
    """
    allowed = None if only is None else set(only)
    kept = set(store.keys())
    modules: list[str] = []
    for module, _variant in keys:
        if module in modules or (allowed is not None and module not in allowed):
            continue
        missing = any(k not in kept for (m, _), k in keys.items() if m == module)
        if full or missing or module == sample:
            modules.append(module)
    return modules


def sample_module(modules: list[str]) -> str | None:
    """The corpus module that runs for real in every CI run, whatever its recordings:
    ``$GPU_TEST_LINT_E2E_SAMPLE`` (a module, or ``none``), else the one the commit's hash
    picks (``git rev-parse HEAD`` as a number, modulo the corpus size: it rotates as commits
    land), else the one the day of the year picks (no git)."""
    chosen = os.environ.get(SAMPLE_ENV)
    if chosen:
        if chosen == "none":
            return None
        if chosen not in modules:
            raise ValueError(f"{SAMPLE_ENV}={chosen!r} is not a corpus module: {modules}")
        return chosen
    if not modules:
        return None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
        number = int(head, 16)
    except (OSError, subprocess.SubprocessError, ValueError):
        number = time.gmtime().tm_yday
    return modules[number % len(modules)]


def run_jobs(jobs: list[Job], run: Callable[[Job], Any], *, workers: int,
             engine_budget: int = ENGINE_BUDGET) -> dict[Job, Any]:
    """:func:`lint_gpu_tests.prove.schedule.run_jobs` within this machine's engine budget."""
    return schedule.run_jobs(jobs, run, workers=workers, engine_budget=engine_budget)


def default_workers() -> int:
    """Inner sessions side by side: ``$GPU_TEST_LINT_E2E_JOBS``, else 2 (this machine's
    cores; an engine build is mostly its two spawned children importing vLLM and torch)."""
    return int(os.environ.get(JOBS_ENV) or min(2, os.cpu_count() or 1))


def full_run() -> bool:
    """True under ``make e2e-full`` (``GPU_TEST_LINT_E2E_FULL=1``)."""
    return os.environ.get(FULL_ENV, "") not in ("", "0")


def _main() -> None:
    """``python tests/e2e/recordings.py``: the kept recordings, one line each: key, module,
    ``original`` or ``fixed`` (its bytes against the corpus's), tests, seconds, platform."""
    from harness import CORPUS

    store = Store()
    for key in store.keys():
        rec = store.get(key)
        assert rec is not None
        module = rec.inputs["module"]
        original = (CORPUS / module).is_file() and \
            rec.inputs["source"] == digest((CORPUS / module).read_bytes())
        env = rec.inputs["environment"]
        print(f"{key}  {module:36}  {'original' if original else 'fixed':8}  "
              f"{len(rec.records):3} tests  {rec.seconds:6.1f} s  "
              f"Python {env['python']} {env['machine']}")


if __name__ == "__main__":
    try:
        sys.exit(_main())
    except BrokenPipeError:  # `| head`
        sys.exit(0)

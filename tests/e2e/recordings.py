"""The differential runs' recordings, keyed by exactly what a run's result depends on.

An inner session (``session.py``) runs one corpus module of one tree (the original, the
``--fix`` copy or the ``--fix --unsafe-fixes`` copy) on the real engine. What it records
depends on, and only on:

- the module's bytes in that tree, and the files pytest reads beside it there (``pytest.ini``
  and every ``conftest.py`` from the tree's root down to the module's folder);
- the code (:func:`code_digest`: comments and docstrings aside) of the harness that runs and
  records it (:data:`HARNESS_FILES`: the inner session's command
  line, the recorder, the tiny model's recipe, the engines' arguments and environment,
  ``tiny_model.ENGINE_ENV``, which ``conftest.py`` sets for the inner sessions to inherit);
- the code of the runtime the module's tests use (``lint_gpu_tests/runtime/`` and the
  package's ``__init__.py``: the ``vllm_runner`` fixture, isolation; the original corpus uses
  it too);
- the environment: Python's version and machine, and the e2e venv's pinned packages
  (``constraints.txt``: vLLM, torch and all they pull).

It does not depend on the fixer: the fixer only decides the fixed bytes. Each recording is a
JSON file ``recordings/<key>.json`` where ``key`` is the SHA-256 (first 24 hex digits) of those
inputs (:func:`recording_inputs`), written only by the harness after a real, complete run.
A refactor that leaves every fixed module byte-identical re-proves with no engine time; a fix
that changes one module's output makes that module (and only it) run again.

A recording no current input set names is an orphan and fails ``make test``
(``tests/test_e2e_recordings.py``); a recording made in another environment than the installed
one fails ``make e2e``; ``make e2e-full`` (``GPU_TEST_LINT_E2E_FULL=1``) ignores them all, runs
every module and writes them anew.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]
RECORDINGS = E2E_DIR / "recordings"
CONSTRAINTS = E2E_DIR / "constraints.txt"

#: The harness files whose bytes can change what an inner session records (not the
#: comparison, the scheduler or this store, which read recordings and never make them).
HARNESS_FILES = ("engine_procs.py", "recorder.py", "session.py", "sitecustomize.py",
                 "tiny_model.py", "vllm_test_runner.py")

#: What the variants of a module are called; ``before`` is the original corpus.
VARIANTS = ("before", "safe", "unsafe")

#: Engines the machine runs at once at most (2 cores, 24 GiB; an engine is 2.3 GB in two
#: processes): the scheduler keeps the sum of the running sessions' peaks within it.
ENGINE_BUDGET = 3

FULL_ENV = "GPU_TEST_LINT_E2E_FULL"
JOBS_ENV = "GPU_TEST_LINT_E2E_JOBS"
SAMPLE_ENV = "GPU_TEST_LINT_E2E_SAMPLE"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code_digest(source: bytes) -> str:
    """Digest of what a Python file does, not how it is written: its syntax tree with the
    docstrings dropped, no positions (``ast.dump``). A comment, a docstring, blank lines or a
    re-wrapped line leave it as it is; any change to code changes it. (``ast.dump`` may differ
    between Python versions, and Python's ``major.minor`` is a key input.)"""
    tree = ast.parse(source)
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        if not isinstance(node, scopes) or not node.body:
            continue
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                and isinstance(first.value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
    return _digest(ast.dump(tree, include_attributes=False).encode())


def _code_files_digest(paths: Iterable[Path], root: Path) -> str:
    """One digest of ``paths``' names (relative to ``root``) and :func:`code_digest`."""
    h = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.relative_to(root).as_posix()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(code_digest(path.read_bytes()).encode() + b"\n")
    return h.hexdigest()


def harness_digest() -> str:
    """Digest of the code of :data:`HARNESS_FILES` (in ``tests/e2e/``; :func:`code_digest`)."""
    return _code_files_digest([E2E_DIR / name for name in HARNESS_FILES], E2E_DIR)


def runtime_digest() -> str:
    """Digest of the code of the runtime (:func:`code_digest`): ``lint_gpu_tests/__init__.py``
    (imported first by any of its modules) and every ``*.py`` under ``lint_gpu_tests/runtime/``."""
    package = REPO_ROOT / "lint_gpu_tests"
    files = [package / "__init__.py", *(package / "runtime").rglob("*.py")]
    return _code_files_digest([f for f in files if "__pycache__" not in f.parts], REPO_ROOT)


Platform = tuple[str, str]


def this_platform() -> Platform:
    """This interpreter's Python ``major.minor`` and machine (the e2e venv is made from the
    interpreter that runs the suite)."""
    return ".".join(platform.python_version_tuple()[:2]), platform.machine()


def environment_id(on: Platform | None = None) -> dict[str, str]:
    """The environment a recording is valid for: Python's ``major.minor`` and the machine
    (``on``, default :func:`this_platform`), and the digest of ``constraints.txt``, which pins
    every package of the e2e venv."""
    python, machine = on or this_platform()
    return {"python": python, "machine": machine,
            "constraints": _digest(CONSTRAINTS.read_bytes())}


def support_files(tree: Path, module: str) -> list[Path]:
    """The files pytest reads beside ``module`` of ``tree``: ``pytest.ini`` and each
    ``conftest.py`` from the tree's root down to the module's folder."""
    folder = tree
    files = [tree / "pytest.ini", folder / "conftest.py"]
    for part in Path(module).parent.parts:
        folder = folder / part
        files.append(folder / "conftest.py")
    return [f for f in files if f.is_file()]


def recording_inputs(tree: Path, module: str, on: Platform | None = None) -> dict[str, Any]:
    """Everything ``module`` of ``tree`` run on the real engine depends on (module docstring).

    Args:
        tree: a corpus copy (``harness.copy_corpus``), original or fixed.
        module: the module's ``/``-separated path inside it.
        on: the Python and machine the recording is for (default: this interpreter's).

    Returns:
        A JSON-able dict; :func:`key_of` turns it into the recording's key.
    """
    return {"module": module,
            "source": _digest((tree / module).read_bytes()),
            "support": {f.relative_to(tree).as_posix(): _digest(f.read_bytes())
                        for f in support_files(tree, module)},
            "harness": harness_digest(),
            "runtime": runtime_digest(),
            "environment": environment_id(on)}


def key_of(inputs: dict[str, Any]) -> str:
    """The recording key of ``inputs``: the first 24 hex digits of the SHA-256 of their
    canonical JSON."""
    return _digest(json.dumps(inputs, sort_keys=True).encode())[:24]


def records_digest(records: dict[str, Any]) -> str:
    """Digest of a recording's records, kept in the file: a hand edit shows."""
    return _digest(json.dumps(records, sort_keys=True).encode())


def installed_environment() -> dict[str, Any]:
    """What this interpreter's environment really is, stored in each recording and compared
    with the installed one by ``make e2e``: Python's full version and machine, the CPU's model
    (``/proc/cpuinfo``; float kernels, and so greedy texts, may differ between CPUs), and the
    installed distributions as ``name==version`` (this project excluded)."""
    packages = sorted({f"{d.metadata['Name'].lower()}=={d.version}"
                       for d in metadata.distributions()
                       if d.metadata["Name"] and d.metadata["Name"].lower() != "gpu-test-lint"})
    return {"python": platform.python_version(), "machine": platform.machine(),
            "cpu": cpu_model(), "packages": packages}


#: Packaging tools in the e2e venv that ``pip freeze`` (and so ``constraints.txt``) leaves
#: out, and that ``make install-e2e`` takes at their newest (``pip install --upgrade pip``):
#: not compared between a recording's environment and the installed one.
INSTALLERS = frozenset({"pip", "setuptools", "wheel"})


def comparable_packages(packages: Iterable[str]) -> set[str]:
    """``name==version`` entries of an environment, the :data:`INSTALLERS` left out."""
    return {p for p in packages if p.split("==", 1)[0] not in INSTALLERS}


def cpu_model() -> str:
    """The CPU's ``model name`` from ``/proc/cpuinfo`` (``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


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


@dataclass(frozen=True)
class Recording:
    """One stored recording.

    Attributes:
        key: its key (:func:`key_of` of ``inputs``), also its file name.
        inputs: what it was recorded from (:func:`recording_inputs`).
        environment: :func:`installed_environment` where it was recorded.
        records: the recorder's JSON, by test id.
        seconds: the session's wall time, in seconds.
        returncode: the session's pytest exit status (0 or 1).
        path: the file it was read from or written to.
    """

    key: str
    inputs: dict[str, Any]
    environment: dict[str, Any]
    records: dict[str, dict[str, Any]]
    seconds: float
    returncode: int
    path: Path


class Store:
    """The recordings folder (``tests/e2e/recordings/`` by default), one JSON file a key."""

    def __init__(self, folder: Path = RECORDINGS) -> None:
        self.folder = folder

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def keys(self) -> list[str]:
        """Keys of the recordings kept, sorted."""
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.json"))

    def get(self, key: str) -> Recording | None:
        """The recording of ``key``, or None when there is none.

        Raises:
            ValueError: when the file is not a recording of ``key`` (its inputs hash to another
                key, or its records do not match their digest: edited by hand).
        """
        path = self.path(key)
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        problem = recording_problem(data, key)
        if problem:
            raise ValueError(f"{path}: {problem}")
        return Recording(key, data["inputs"], data["environment"], data["records"],
                         float(data["seconds"]), int(data["returncode"]), path)

    def put(self, inputs: dict[str, Any], records: dict[str, dict[str, Any]], seconds: float,
            returncode: int) -> Recording:
        """Write the recording of one complete session (atomically); returns it."""
        key = key_of(inputs)
        environment = installed_environment()
        data = {"key": key, "inputs": inputs, "environment": environment,
                "seconds": round(seconds, 1), "returncode": returncode,
                "records_digest": records_digest(records), "records": records}
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(key)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return Recording(key, inputs, environment, records, seconds, returncode, path)

    def orphans(self, current: Iterable[str]) -> list[str]:
        """Keys kept that no current input set has, sorted."""
        wanted = set(current)
        return [k for k in self.keys() if k not in wanted]

    def platform_of(self, key: str) -> Platform:
        """The Python and machine the recording of ``key`` was made for (its inputs')."""
        data = json.loads(self.path(key).read_text(encoding="utf-8"))
        env = data.get("inputs", {}).get("environment", {})
        return str(env.get("python")), str(env.get("machine"))

    def platforms(self) -> set[Platform]:
        """The Pythons and machines the kept recordings were made for."""
        return {self.platform_of(key) for key in self.keys()}

    def prune(self, current: Iterable[str], on: Platform | None = None) -> list[str]:
        """Remove the orphans (:meth:`orphans`) made for the Python and machine ``on``
        (default: this interpreter's); recordings made for another platform are not this
        run's to judge. Returns the keys removed."""
        platform_ = on or this_platform()
        gone = [key for key in self.orphans(current) if self.platform_of(key) == platform_]
        for key in gone:
            self.path(key).unlink()
        return gone


def recording_problem(data: dict[str, Any], key: str) -> str | None:
    """Why ``data`` (a recording file's JSON) is not a valid recording of ``key``, or None."""
    for name in ("key", "inputs", "environment", "records", "records_digest", "seconds",
                 "returncode"):
        if name not in data:
            return f"no {name!r}"
    if data["key"] != key or key_of(data["inputs"]) != key:
        return (f"its inputs hash to {key_of(data['inputs'])}, not {key}: the file was "
                "renamed or its inputs edited")
    if records_digest(data["records"]) != data["records_digest"]:
        return "its records do not match their digest: edited by hand"
    return None


@dataclass(frozen=True)
class Job:
    """One inner session to run: ``module`` of the ``variant`` tree.

    Attributes:
        module: ``/``-separated path of the module in the corpus.
        variant: one of :data:`VARIANTS`.
        tree: the corpus copy it runs in.
        peak: engines it may have alive at once (``MANIFEST.toml``'s ``peak_engines``).
        cost: its expected seconds (its last recording's), to start the longest first.
    """

    module: str
    variant: str
    tree: Path
    peak: int = 1
    cost: float = 100.0


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
    """Run ``jobs`` with ``run`` on ``workers`` threads (each an inner pytest process), never
    starting one whose ``peak`` would take the engines of the running jobs past
    ``engine_budget`` (a job whose peak alone exceeds it runs alone). The jobs of the highest
    peak go first, the longest of them first, so that the lighter jobs are left to run beside
    them (under a budget of 3, two jobs of peak 2 cannot run together, a 2 and a 1 can).

    Returns:
        ``job -> run(job)``.

    Raises:
        Whatever ``run`` raised, after every started job has ended.
    """
    pending = sorted(jobs, key=lambda j: (-j.peak, -j.cost))
    results: dict[Job, Any] = {}
    errors: list[BaseException] = []
    lock = threading.Condition()
    in_use = [0, 0]  # engines, jobs

    def take() -> Job | None:
        with lock:
            while True:
                if not pending or errors:
                    return None
                for job in pending:
                    if in_use[1] == 0 or in_use[0] + job.peak <= engine_budget:
                        pending.remove(job)
                        in_use[0] += job.peak
                        in_use[1] += 1
                        return job
                lock.wait()

    def worker() -> None:
        while (job := take()) is not None:
            try:
                results[job] = run(job)
            except BaseException as error:  # noqa: BLE001 - re-raised by the caller's thread
                errors.append(error)
            finally:
                with lock:
                    in_use[0] -= job.peak
                    in_use[1] -= 1
                    lock.notify_all()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


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
            rec.inputs["source"] == _digest((CORPUS / module).read_bytes())
        env = rec.inputs["environment"]
        print(f"{key}  {module:36}  {'original' if original else 'fixed':8}  "
              f"{len(rec.records):3} tests  {rec.seconds:6.1f} s  "
              f"Python {env['python']} {env['machine']}")


if __name__ == "__main__":
    try:
        sys.exit(_main())
    except BrokenPipeError:  # `| head`
        sys.exit(0)

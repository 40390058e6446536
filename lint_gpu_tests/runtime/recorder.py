"""pytest plugin recording what each test did with its engines, for ``gpu-test-lint prove``.

``prove`` loads it in its inner pytest sessions with ``-p lint_gpu_tests.runtime.recorder``,
the same way in the original tree and in the fixed one; it does nothing unless
``$GPU_TEST_LINT_RECORD`` names the file to write, as JSON, when the session ends. Per test id
it records:

- ``outcome``: ``passed``, ``failed``, ``skipped``, ``xfailed``, ``xpassed``, or ``error``
  (set-up raised), with ``+teardown-error`` appended when the teardown raised;
- ``engines``: the configuration every ``vllm.LLM`` built during the test (set-up included)
  really resolved, read off ``llm.llm_engine.vllm_config`` after ``LLM.__init__`` returns
  (not the keyword arguments: a rewrite that changes a default shows here);
- ``texts``: the generated texts of every ``LLM.generate`` call, in call order, and
  ``sampling``: per call, ``greedy`` (temperature 0), ``seeded`` (every request has a seed)
  or ``random`` (:func:`sampling_kind`), which says whether its texts can be compared exactly;
- ``cores_at_start`` / ``leaked_at_start``: ``VLLM::EngineCore`` processes alive when the
  test's set-up starts, and how many of them no active fixture accounts for (an engine a
  still-cached module fixture holds is the fixture's, not a leak);
- ``cores_peak``: the most ``VLLM::EngineCore`` processes seen alive during the test (at its
  start and right after each engine it built).

Engines built at import time (module-level engines) are recorded under
``<import>::<module file>``. Where vLLM is not installed only the outcomes (and the process
counts, 0) are recorded: any pytest suite can be recorded.

A test isolated with ``create_new_process_for_each_test`` builds its engines in a child
process (spawned or forked). While a test runs, ``$GPU_TEST_LINT_RECORD_CHILD`` names a file:
the isolation's child (:mod:`lint_gpu_tests.runtime.isolation`) calls :func:`install_child`
when it is set, which appends the child's engines and texts to that file as JSON lines, and
the test's record takes them when it ends, in the order they happened.

Under pytest-xdist each worker writes its own file, ``<record>.<worker id>``
(:func:`read_records` merges them with the controller's).

This module imports nothing of the linter.
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import json
import os
import weakref
from collections.abc import Callable, Generator
from typing import Any

import pytest

from lint_gpu_tests.runtime.procs import engine_processes

__all__ = [
    "CHILD_ENV",
    "RECORD_ENV",
    "Recorder",
    "config_summary",
    "install_child",
    "merge_child_records",
    "read_records",
    "resolved_config",
    "sampling_kind",
]

RECORD_ENV = "GPU_TEST_LINT_RECORD"
"""The file the recorder writes its JSON to when the session ends."""
CHILD_ENV = "GPU_TEST_LINT_RECORD_CHILD"
"""Set while a test runs: the file its spawned isolated children append their records to."""

#: vLLM's ``_SAMPLING_EPS``: a temperature below it samples greedily.
SAMPLING_EPS = 1e-5


def config_summary(config: Any) -> dict[str, Any]:
    """The resolved fields of a ``VllmConfig`` a rewrite must not change."""
    model = config.model_config
    return {
        "max_model_len": model.max_model_len,
        "block_size": config.cache_config.block_size,
        "enable_chunked_prefill": config.scheduler_config.enable_chunked_prefill,
        "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
        "trust_remote_code": model.trust_remote_code,
        "dtype": str(model.dtype),
        "seed": model.seed,
        "enforce_eager": model.enforce_eager,
        "compilation_mode": int(config.compilation_config.mode),
        "cudagraph_capture_sizes": config.compilation_config.cudagraph_capture_sizes,
        "tokenizer": str(model.tokenizer),
    }


def resolved_config(llm: Any) -> dict[str, Any]:
    """What ``llm`` really resolved: :func:`config_summary` of ``llm.llm_engine.vllm_config``
    (the model's path in it written ``<model>``, so a recording made in one checkout holds in
    another) and the model's folder name."""
    config = llm.llm_engine.vllm_config
    model = str(config.model_config.model)
    summary = {name: value.replace(model, "<model>") if isinstance(value, str) else value
               for name, value in config_summary(config).items()}
    return {"model": os.path.basename(model), **summary}


def _one_kind(params: Any) -> str:
    temperature = getattr(params, "temperature", None)
    if temperature is not None and temperature < SAMPLING_EPS:
        return "greedy"
    if getattr(params, "seed", None) is not None:
        return "seeded"
    return "random"


def sampling_kind(llm: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """``greedy``, ``seeded`` or ``random``: how one ``llm.generate(*args, **kwargs)`` call
    samples. Its sampling parameters are ``sampling_params=`` or the second positional
    argument, one for every prompt or a list; none means the engine's defaults
    (``llm.get_default_sampling_params()``). A list is as random as its most random member."""
    params = kwargs.get("sampling_params", args[1] if len(args) > 1 else None)
    if params is None:
        default = getattr(llm, "get_default_sampling_params", None)
        params = default() if callable(default) else None
    if params is None:
        return "random"
    kinds = {_one_kind(p) for p in (params if isinstance(params, (list, tuple)) else [params])}
    for kind in ("random", "seeded", "greedy"):
        if kind in kinds:
            return kind
    return "random"


def _texts(outputs: Any) -> list[str]:
    return [str(o.outputs[0].text) if o.outputs else "" for o in outputs]


def patch_engines(on_engine: Callable[[Any], None],
                  on_texts: Callable[[list[str], str], None]) -> bool:
    """Wrap ``vllm.LLM.__init__`` and ``vllm.LLM.generate`` (the class, not a name, so
    ``from vllm import LLM`` and a runner's own import are both seen): ``on_engine(llm)``
    after each construction, ``on_texts(texts, sampling kind)`` after each generate.

    Returns:
        False (nothing patched) when vLLM is not installed.
    """
    if importlib.util.find_spec("vllm") is None:
        return False
    vllm: Any = importlib.import_module("vllm")

    orig_init = vllm.LLM.__init__
    orig_generate = vllm.LLM.generate

    def __init__(llm: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(llm, *args, **kwargs)
        on_engine(llm)

    def generate(llm: Any, *args: Any, **kwargs: Any) -> Any:
        outputs = orig_generate(llm, *args, **kwargs)
        on_texts(_texts(outputs), sampling_kind(llm, args, kwargs))
        return outputs

    vllm.LLM.__init__ = __init__
    vllm.LLM.generate = generate
    return True


class Recorder:
    """Collects per-test records; see the module docstring for what each holds."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        self.current: str | None = None
        # fixture engines set up and not yet finalised (id -> (fixture name, weak reference)):
        # they are expected to be alive.
        self.active_fixture_engines: dict[int, tuple[str, weakref.ref[Any]]] = {}
        self.creating_fixture: str | None = None

    def install(self) -> None:
        """Hook engine construction and generation (:func:`patch_engines`) into this
        recorder's current entry."""
        recorder = self

        def on_engine(llm: Any) -> None:
            entry = recorder._entry()
            entry["engines"].append(resolved_config(llm))
            entry["cores_peak"] = max(entry["cores_peak"] or 0, _engine_cores())
            if recorder.creating_fixture is not None:
                recorder.active_fixture_engines[id(llm)] = (
                    recorder.creating_fixture, weakref.ref(llm))

        def on_texts(texts: list[str], kind: str) -> None:
            entry = recorder._entry()
            entry["texts"].append(texts)
            entry["sampling"].append(kind)

        patch_engines(on_engine, on_texts)

    def _entry(self, nodeid: str | None = None) -> dict[str, Any]:
        key = nodeid or self.current or "<import>"
        return self.records.setdefault(key, new_entry())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector: Any) -> Generator[None, None, None]:
        """Engines built while a module is imported (collected) are the module's."""
        path = getattr(collector, "path", None)
        if isinstance(collector, pytest.Module) and path is not None:
            self.current = f"<import>::{os.path.relpath(str(path)).replace(os.sep, '/')}"
        yield
        self.current = None

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any
                                ) -> Generator[None, None, None]:
        """Count the engine cores alive at the test's start, and take its children's
        records at its end."""
        self.current = item.nodeid
        entry = self._entry(item.nodeid)
        cores = _engine_cores()
        expected = sum(1 for _, ref in self.active_fixture_engines.values()
                       if ref() is not None)
        entry["cores_at_start"] = cores
        entry["cores_peak"] = max(entry["cores_peak"] or 0, cores)
        entry["leaked_at_start"] = max(0, cores - expected)
        child = f"{self.path}.child"
        os.environ[CHILD_ENV] = child
        try:
            yield
        finally:
            os.environ.pop(CHILD_ENV, None)
            merge_child_records(entry, child)
            self.current = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any
                             ) -> Generator[None, None, None]:
        """Engines built while a fixture sets up are that fixture's."""
        previous = self.creating_fixture
        self.creating_fixture = fixturedef.argname
        yield
        self.creating_fixture = previous

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: Any) -> None:
        """A finalised fixture's engines are no longer expected alive."""
        for key, (name, _) in list(self.active_fixture_engines.items()):
            if name == fixturedef.argname:
                del self.active_fixture_engines[key]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The test's outcome, from its reports."""
        entry = self._entry(report.nodeid)
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if hasattr(report, "wasxfail"):
                entry["outcome"] = "xfailed" if report.skipped else "xpassed"
            elif report.when == "setup" and report.failed:
                entry["outcome"] = "error"
            else:
                entry["outcome"] = report.outcome
        elif report.when == "teardown" and report.failed:
            entry["outcome"] = f"{entry['outcome']}+teardown-error"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the records (atomically)."""
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.records, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def new_entry() -> dict[str, Any]:
    """An empty record of one test."""
    return {"outcome": None, "engines": [], "texts": [], "sampling": [],
            "cores_at_start": None, "leaked_at_start": None, "cores_peak": None}


def install_child(path: str) -> None:
    """In an isolated child: append each engine's resolved configuration
    (``{"engines": ...}``) and each generate's texts (``{"texts": ..., "sampling": ...}``)
    to ``path`` as one JSON line, flushed at once (a child that dies later keeps what it
    wrote)."""

    def write(line: dict[str, Any]) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    patch_engines(lambda llm: write({"engines": resolved_config(llm)}),
                  lambda texts, kind: write({"texts": texts, "sampling": kind}))


def merge_child_records(entry: dict[str, Any], path: str) -> None:
    """Append what isolated children of the test wrote to ``path`` (:func:`install_child`)
    to the test's ``entry``, in order, and remove the file."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            for key, value in json.loads(line).items():
                entry.setdefault(key, []).append(value)
    os.unlink(path)


def read_records(path: str) -> dict[str, dict[str, Any]]:
    """The records of one session: ``path`` and, under pytest-xdist, each worker's
    ``path.<worker id>``, merged per test id (a field empty in one file is taken from
    another). ``{}`` when none was written."""
    merged: dict[str, dict[str, Any]] = {}
    for name in [path, *sorted(glob.glob(glob.escape(path) + ".gw*"))]:
        if not os.path.exists(name):
            continue
        with open(name, encoding="utf-8") as f:
            records = json.load(f)
        for test_id, record in records.items():
            entry = merged.setdefault(test_id, {})
            for key, value in record.items():
                if entry.get(key) in (None, []):
                    entry[key] = value
    return merged


def _engine_cores() -> int:
    """``VLLM::EngineCore`` processes alive below this process."""
    return sum(1 for p in engine_processes() if "EngineCore" in p.name)


def pytest_configure(config: pytest.Config) -> None:
    """Register the recorder when ``$GPU_TEST_LINT_RECORD`` is set."""
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    recorder = Recorder(f"{path}.{worker}" if worker else path)
    recorder.install()
    config.pluginmanager.register(recorder, "gpu-test-lint-recorder")

"""pytest plugin for the differential runs: what each test did with real engines.

Loaded in the inner pytest runs with ``-p recorder`` (``tests/e2e`` on ``PYTHONPATH``), the
same way before and after a fix, and written as JSON to ``$GPU_TEST_LINT_RECORD`` when the
session ends. Per test id it records:

- ``outcome``: ``passed``, ``failed``, ``skipped``, ``xfailed``, ``xpassed``, or ``error``
  (set-up or teardown raised), from pytest's reports;
- ``engines``: the configuration every engine built during the test (set-up included)
  really resolved, read off ``llm.llm_engine.vllm_config`` after ``LLM.__init__`` returns
  (not the keyword arguments: a rewrite that changes a default shows here);
- ``texts``: the generated texts of every ``LLM.generate`` call, in call order;
- ``cores_at_start`` / ``leaked_at_start``: ``VLLM::EngineCore`` processes alive when the
  test's set-up starts, and how many of them no active fixture accounts for (an engine a
  still-cached module fixture holds is the fixture's, not a leak);
- ``cores_peak``: the most ``VLLM::EngineCore`` processes seen alive during the test (at its
  start and right after each engine it built), which the harness's scheduler keeps within
  the machine's engine budget (``MANIFEST.toml``'s ``peak_engines``).

Engines built at import time (module-level engines) are recorded under
``<import>::<module file>``.

A test isolated with ``create_new_process_for_each_test("spawn")`` builds its engines in a
child interpreter, where this plugin is not loaded. While a test runs,
``$GPU_TEST_LINT_RECORD_CHILD`` names a file: ``sitecustomize.py`` (beside this file, on the
inner run's ``PYTHONPATH``) calls :func:`install_child` in such a child, which appends the
child's engines and texts to that file as JSON lines, and the test's record takes them when it
ends, in the order they happened.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Generator
from typing import Any

import pytest
from engine_procs import engine_processes
from vllm_test_runner import config_summary

RECORD_ENV = "GPU_TEST_LINT_RECORD"
CHILD_ENV = "GPU_TEST_LINT_RECORD_CHILD"


def resolved_config(llm: Any) -> dict[str, Any]:
    """What ``llm`` really resolved (``llm.llm_engine.vllm_config``, vLLM 0.32's
    ``VllmConfig``): the fields of :func:`vllm_test_runner.config_summary` (the model's path
    in them written ``<model>``) and the model's folder name."""
    config = llm.llm_engine.vllm_config
    model = str(config.model_config.model)
    # The model's folder is this checkout's cache (``.e2e-cache/``): a path that names it is
    # recorded relative to it, so that a recording made in one checkout holds in another.
    summary = {name: value.replace(model, "<model>") if isinstance(value, str) else value
               for name, value in config_summary(config).items()}
    return {"model": os.path.basename(model), **summary}


class Recorder:
    """Collects per-test records; see the module docstring for what each holds."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        self.current: str | None = None
        # (fixture name, weak reference to its engine) for fixtures set up and not yet
        # finalised: their engines are expected to be alive.
        self.active_fixture_engines: dict[int, tuple[str, weakref.ref[Any]]] = {}
        self.creating_fixture: str | None = None
        self._orig_init: Any = None
        self._orig_generate: Any = None

    # -- engine hooks -------------------------------------------------------------------

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

        def on_texts(texts: list[str]) -> None:
            recorder._entry()["texts"].append(texts)

        patch_engines(on_engine, on_texts)

    def _entry(self, nodeid: str | None = None) -> dict[str, Any]:
        key = nodeid or self.current or "<import>"
        return self.records.setdefault(key, {
            "outcome": None, "engines": [], "texts": [],
            "cores_at_start": None, "leaked_at_start": None, "cores_peak": None,
        })

    # -- pytest hooks -------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector: Any) -> Generator[None, None, None]:
        # Modules are imported when their collector collects; engines built then are the
        # module's, not a test's.
        path = getattr(collector, "path", None)
        if isinstance(collector, pytest.Module) and path is not None:
            self.current = f"<import>::{os.path.relpath(str(path)).replace(os.sep, '/')}"
        yield
        self.current = None

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any
                                ) -> Generator[None, None, None]:
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
            del os.environ[CHILD_ENV]
            merge_child_records(entry, child)
            self.current = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any
                             ) -> Generator[None, None, None]:
        previous = self.creating_fixture
        self.creating_fixture = fixturedef.argname
        yield
        self.creating_fixture = previous

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: Any) -> None:
        for key, (name, _) in list(self.active_fixture_engines.items()):
            if name == fixturedef.argname:
                del self.active_fixture_engines[key]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
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
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.records, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def patch_engines(on_engine: Any, on_texts: Any) -> None:
    """Wrap ``vllm.LLM.__init__`` and ``vllm.LLM.generate`` (the class, not a name, so
    ``from vllm import LLM`` and the runner's own import are both seen): ``on_engine(llm)``
    after each construction, ``on_texts(list of generated texts)`` after each generate."""
    import vllm

    orig_init = vllm.LLM.__init__
    orig_generate = vllm.LLM.generate

    def __init__(llm: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(llm, *args, **kwargs)
        on_engine(llm)

    def generate(llm: Any, *args: Any, **kwargs: Any) -> Any:
        outputs = orig_generate(llm, *args, **kwargs)
        on_texts([o.outputs[0].text for o in outputs])
        return outputs

    vllm.LLM.__init__ = __init__  # type: ignore[method-assign]
    vllm.LLM.generate = generate  # type: ignore[method-assign]


def install_child(path: str) -> None:
    """In a spawned isolated child: append each engine's resolved configuration
    (``{"engines": ...}``) and each generate's texts (``{"texts": ...}``) to ``path`` as one
    JSON line, flushed at once (a child that dies later keeps what it wrote)."""

    def write(key: str, value: Any) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({key: value}) + "\n")

    patch_engines(lambda llm: write("engines", resolved_config(llm)),
                  lambda texts: write("texts", texts))


def merge_child_records(entry: dict[str, Any], path: str) -> None:
    """Append what isolated children of the test wrote to ``path`` (:func:`install_child`)
    to the test's ``entry``, in order, and remove the file."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            for key, value in json.loads(line).items():
                entry[key].append(value)
    os.unlink(path)


def _engine_cores() -> int:
    """``VLLM::EngineCore`` processes alive below this process."""
    return sum(1 for p in engine_processes() if "EngineCore" in _name(p))


def _name(process: Any) -> str:
    try:
        return str(process.name())
    except Exception:
        return ""


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    recorder = Recorder(path)
    recorder.install()
    config.pluginmanager.register(recorder, "gpu-test-lint-recorder")

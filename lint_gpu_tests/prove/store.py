"""Recordings of ``prove``'s sessions, keyed by exactly what a session's result depends on.

One session runs one test module of one tree (the original or the fixed copy) with the
recorder. What it records depends on, and only on:

- the module's bytes in that tree, and the files pytest reads beside it there
  (:func:`support_files`: the tree's ``pytest.ini``, ``pyproject.toml``, ``tox.ini``,
  ``setup.cfg`` and every ``conftest.py`` from the tree's root down to the module's folder),
  and the other files of the tree the fix changed that the session may run (``helpers``:
  those the module or its conftests import, through any files of the tree, and any the
  fix changed that no import of the tree names);
- the code (:func:`code_digest`: comments and docstrings aside) of what runs and records it:
  the runtime (``lint_gpu_tests/runtime/``, the recorder included, and the package's
  ``__init__.py``) and the session's command line (``prove/session.py``), and whatever the
  caller adds (``harness``: this repository's e2e suite adds its tiny model's recipe);
- the pytest arguments, and the environment (Python's ``major.minor``, the machine, and the
  installed packages or what pins them).

The fixer is not an input: it only decides the fixed bytes. A recording is
``<folder>/<key>.json``, ``key`` the first 24 hex digits of the SHA-256 of those inputs'
canonical JSON (:func:`key_of`); it is written only after a complete session.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1]

#: Files at a tree's root that configure pytest.
PYTEST_CONFIGS = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

Platform = tuple[str, str]


def digest(data: bytes) -> str:
    """SHA-256 of ``data``, in hex."""
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
    return digest(ast.dump(tree, include_attributes=False).encode())


def code_files_digest(paths: Iterable[Path], root: Path) -> str:
    """One digest of ``paths``' names (relative to ``root``) and :func:`code_digest`."""
    h = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.relative_to(root).as_posix()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(code_digest(path.read_bytes()).encode() + b"\n")
    return h.hexdigest()


def runtime_digest() -> str:
    """Digest of the code of the runtime (:func:`code_digest`): ``lint_gpu_tests/__init__.py``
    (imported first by any of its modules), every ``*.py`` under ``lint_gpu_tests/runtime/``
    (the recorder among them) and ``prove/session.py`` (the sessions' command line)."""
    files = [PACKAGE / "__init__.py", *(PACKAGE / "runtime").rglob("*.py"),
             PACKAGE / "prove" / "session.py"]
    return code_files_digest([f for f in files if "__pycache__" not in f.parts],
                             PACKAGE.parent)


def this_platform() -> Platform:
    """This interpreter's Python ``major.minor`` and machine."""
    return ".".join(platform.python_version_tuple()[:2]), platform.machine()


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


def installed_environment() -> dict[str, Any]:
    """What this interpreter's environment really is, stored in each recording: Python's
    full version and machine, the CPU's model (float kernels, and so texts, may differ
    between CPUs), and the installed distributions as ``name==version`` (this project
    excluded: its runtime is an input by its code)."""
    packages = sorted({f"{d.metadata['Name'].lower()}=={d.version}"
                       for d in metadata.distributions()
                       if d.metadata["Name"] and d.metadata["Name"].lower() != "gpu-test-lint"})
    return {"python": platform.python_version(), "machine": platform.machine(),
            "cpu": cpu_model(), "packages": packages}


def environment_id(packages: Iterable[str] | None = None,
                   on: Platform | None = None) -> dict[str, str]:
    """The environment a recording is valid for: Python's ``major.minor`` and the machine
    (``on``, default this interpreter's), and the digest of the installed packages
    (``packages``, default :func:`installed_environment`'s)."""
    python, machine = on or this_platform()
    names = installed_environment()["packages"] if packages is None else sorted(packages)
    return {"python": python, "machine": machine,
            "packages": digest("\n".join(names).encode())}


def support_files(tree: Path, module: str) -> list[Path]:
    """The files pytest reads beside ``module`` of ``tree``: the tree's pytest configuration
    files (:data:`PYTEST_CONFIGS`) and each ``conftest.py`` from the tree's root down to the
    module's folder."""
    folder = tree
    files = [tree / name for name in PYTEST_CONFIGS] + [folder / "conftest.py"]
    for part in Path(module).parent.parts:
        folder = folder / part
        files.append(folder / "conftest.py")
    return [f for f in files if f.is_file()]


def imported_files(tree: Path, start: Iterable[Path]) -> set[str] | None:
    """The files of ``tree`` that the files ``start`` import, directly or through other files
    of the tree (``import a.b``, ``from a import b``, ``from . import b``, at any depth of the
    file; a package's ``__init__.py`` counts for each package an import passes through),
    resolved as pytest's imports find them: from the importer's directory and each one above
    it up to the tree's root (:func:`~lint_gpu_tests.checking.helper_index.resolve_import`).

    Returns:
        The imported files' ``/``-separated paths inside ``tree``; None when one of the files
        reached does not parse (what it imports is then unknown).
    """
    from lint_gpu_tests.checking.helper_index import resolve_import

    root = str(tree.resolve())
    seen: set[str] = set()
    todo = [str(p.resolve()) for p in start]
    found: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            syntax = ast.parse(Path(path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            return None
        for node in ast.walk(syntax):
            names: list[str] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    names += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
            elif isinstance(node, ast.ImportFrom):
                dots = "." * node.level
                parts = (node.module or "").split(".") if node.module else []
                names += [dots + ".".join(parts[:i]) for i in range(1, len(parts) + 1)]
                if not parts:
                    names.append(dots)
                base = dots + ".".join(parts)
                names += [base + ("." if parts else "") + a.name for a in node.names
                          if a.name != "*"]
            for name in names:
                target = resolve_import(name, path, root)
                if target is not None:
                    found.add(Path(target).relative_to(root).as_posix())
                    todo.append(target)
    return found


def helpers_of(tree: Path, module: str, helpers: Iterable[str]) -> list[str]:
    """Which of ``helpers`` (changed files of ``tree`` other than conftests and ``module``,
    ``/``-separated) the session of ``module`` may run: those it imports, or its
    conftests and pytest configuration (:func:`support_files`) import, through any files of
    the tree (:func:`imported_files`). All of them when what it imports is unknown (a file
    reached does not parse). (A helper no module's import reaches, one loaded by ``importlib``
    or read as data, is for the caller to count as every module's.)"""
    wanted = sorted(set(helpers))
    if not wanted:
        return []
    reached = imported_files(tree, [tree / module, *(f for f in support_files(tree, module)
                                                      if f.suffix == ".py")])
    if reached is None:
        return wanted
    return [h for h in wanted if h in reached]


def recording_inputs(tree: Path, module: str, *, harness: str, environment: dict[str, str],
                     helpers: Iterable[str] = (), pytest_args: Iterable[str] | None = None
                     ) -> dict[str, Any]:
    """Everything ``module`` of ``tree`` run with the recorder depends on (module docstring).

    Args:
        tree: the original copy or the fixed one.
        module: the module's ``/``-separated path inside it.
        harness: the digest of what else decides what the session records.
        environment: :func:`environment_id` (or the caller's own pins).
        helpers: other files of ``tree`` (``/``-separated) the fix changed that the session
            may run (:func:`helpers_of`).
        pytest_args: the user's pytest arguments (left out of the inputs when None: a session
            without any has the key this repository's e2e recordings have).

    Returns:
        A JSON-able dict; :func:`key_of` turns it into the recording's key.
    """
    inputs: dict[str, Any] = {
        "module": module,
        "source": digest((tree / module).read_bytes()),
        "support": {f.relative_to(tree).as_posix(): digest(f.read_bytes())
                    for f in support_files(tree, module)},
        "harness": harness,
        "runtime": runtime_digest(),
        "environment": environment,
    }
    if helpers:
        inputs["helpers"] = {h: digest((tree / h).read_bytes()) for h in sorted(helpers)}
    if pytest_args is not None:
        inputs["pytest_args"] = list(pytest_args)
    return inputs


def key_of(inputs: dict[str, Any]) -> str:
    """The recording key of ``inputs``: the first 24 hex digits of the SHA-256 of their
    canonical JSON."""
    return digest(json.dumps(inputs, sort_keys=True).encode())[:24]


def records_digest(records: dict[str, Any]) -> str:
    """Digest of a recording's records, kept in the file: a hand edit shows."""
    return digest(json.dumps(records, sort_keys=True).encode())


@dataclass(frozen=True)
class Recording:
    """One stored recording.

    Attributes:
        key: its key (:func:`key_of` of ``inputs``), also its file name.
        inputs: what it was recorded from (:func:`recording_inputs`).
        environment: :func:`installed_environment` where it was recorded.
        records: the recorder's JSON, by test id.
        seconds: the session's wall time, in seconds.
        returncode: the session's pytest exit status.
        path: the file it was read from or written to.
    """

    key: str
    inputs: dict[str, Any]
    environment: dict[str, Any]
    records: dict[str, dict[str, Any]]
    seconds: float
    returncode: int
    path: Path


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


class Store:
    """A folder of recordings, one JSON file a key."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, key: str) -> Path:
        """The file of ``key``'s recording."""
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

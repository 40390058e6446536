"""The differential harness: run a corpus of hand-managed test modules on real vLLM, fix a
copy with ``gpu-test-lint check --fix`` (and another with ``--unsafe-fixes``), run again and
compare what each test did, with the machinery of ``gpu-test-lint prove``
(``lint_gpu_tests/runtime/recorder.py`` records it; ``lint_gpu_tests/prove/session.py`` runs
one module; ``lint_gpu_tests/prove/compare.py`` compares; ``recordings.py`` keeps what the runs
recorded, keyed by their inputs).

A safe fix must give, per test id, the same outcome, the same resolved engine configurations,
the same generated texts, and leave no engine process alive at any test's start that no
active fixture accounts for. The corpus's ``MANIFEST.toml`` says, per module, which tests leak
before the fix (so the harness shows the leak the fix exists for) and where an unsafe fix may
differ, with its reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from lint_gpu_tests.prove.compare import Difference
from lint_gpu_tests.prove.compare import compare as prove_compare
from lint_gpu_tests.prove.compare import engines_built as prove_engines_built
from lint_gpu_tests.prove.compare import leaked_tests as prove_leaked_tests

E2E_DIR = Path(__file__).resolve().parent
CORPUS = E2E_DIR / "suites"

__all__ = ["Difference", "Manifest", "Run", "compare", "copy_corpus"]


@dataclass
class Run:
    """One variant's runs of the corpus: every module's inner session, run now or taken from
    its recording (``recordings.py``).

    Attributes:
        records: the recorder's JSON, by test id, over all modules.
        seconds: the sessions' wall times added up, in seconds (a recording's as recorded).
        logs: module -> path of the captured stdout/stderr of the sessions run now.
    """

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    logs: dict[str, Path] = field(default_factory=dict)


@dataclass
class Manifest:
    """``suites/MANIFEST.toml``: per module, ``fails_before`` (tests that fail on purpose),
    ``leaks_before`` (test names whose start sees a leaked engine before the fix) and
    ``unsafe_differs`` (test name -> list of fields an unsafe fix may change, with
    ``reason``)."""

    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path = CORPUS / "MANIFEST.toml") -> Manifest:
        with open(path, "rb") as f:
            data = tomllib.load(f)
        return cls(dict(data.get("modules", {})), list(data.get("order", [])))

    def fails_before(self, module: str) -> list[str]:
        """Tests of ``module`` that fail on purpose (``failed`` or ``error``) before the fix."""
        return list(self.modules.get(module, {}).get("fails_before", []))

    def leaks_before(self, module: str) -> list[str]:
        return list(self.modules.get(module, {}).get("leaks_before", []))

    def peak_engines(self, module: str) -> int:
        """The most engines ``module`` has alive at once in any variant (default 1)."""
        return int(self.modules.get(module, {}).get("peak_engines", 1))

    def unsafe_may_change(self, module: str, test: str) -> set[str]:
        entry = self.modules.get(module, {}).get("unsafe_differs", {}).get(test, {})
        return set(entry.get("fields", []))


def copy_corpus(destination: Path, source: Path = CORPUS) -> list[str]:
    """Copy the corpus's ``*.py`` files and ``.gpu-test-lint.toml`` configs, sub-folders
    included (a sub-folder with its own config holds modules fixed under other settings, such as
    ``target`` or ``fix-strategy``), into ``destination`` with a ``pytest.ini`` of its own (so no
    outer configuration applies).

    Returns:
        The test modules' paths relative to ``destination``, ``/``-separated
        (``test_a.py``, ``isolate/test_b.py``); their base names must be unique (pytest's
        default import mode).
    """
    destination.mkdir(parents=True, exist_ok=True)
    modules = []
    for path in sorted([*source.rglob("*.py"), *source.rglob(".gpu-test-lint.toml")]):
        relative = path.relative_to(source)
        if "__pycache__" in relative.parts:
            continue
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination / relative)
        if path.name.startswith("test_"):
            modules.append(relative.as_posix())
    (destination / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return modules


def gpu_test_lint() -> list[str]:
    """The command line of the installed ``gpu-test-lint`` of this interpreter."""
    script = Path(sys.executable).with_name("gpu-test-lint")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from lint_gpu_tests.interfaces.cli import main; main()"]


def apply_fix(tree: Path, *, unsafe: bool) -> subprocess.CompletedProcess[str]:
    """Run ``gpu-test-lint check --fix [--unsafe-fixes] --no-cache`` over ``tree``.

    Raises:
        AssertionError: when the tool exits with 2 (an internal or usage error).
    """
    cmd = [*gpu_test_lint(), "check", "--fix", "--no-cache", "--show-fixes", "--exit-zero"]
    if unsafe:
        cmd.append("--unsafe-fixes")
    proc = subprocess.run([*cmd, "."], cwd=tree, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n"
                             f"{proc.stderr}")
    return proc


def check_report(tree: Path) -> list[dict[str, Any]]:
    """``gpu-test-lint check --output-format json`` over ``tree``: what is left after a fix."""
    proc = subprocess.run([*gpu_test_lint(), "check", "--no-cache", "--output-format", "json",
                           "--exit-zero", "."], cwd=tree, capture_output=True, text=True,
                          timeout=300)
    return list(json.loads(proc.stdout or "[]"))


def module_of(test_id: str) -> str:
    """``test_a.py`` for ``test_a.py::TestX::test_y[p]`` and ``<import>::test_a.py``."""
    if test_id.startswith("<import>::"):
        return test_id.split("::", 1)[1]
    return test_id.split("::", 1)[0]


def test_name(test_id: str) -> str:
    """``TestX::test_y[p]`` for ``test_a.py::TestX::test_y[p]``; ``<import>`` for imports."""
    if test_id.startswith("<import>::"):
        return "<import>"
    return test_id.split("::", 1)[1]


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
            module: str) -> list[Difference]:
    """Behaviour differences of ``module``'s tests between two runs: ``prove``'s comparison
    (:func:`lint_gpu_tests.prove.compare`), texts compared exactly (the CPU engine is
    deterministic) and any engine alive after the fix at a test's start that no active
    fixture accounts for a difference (every leak of the corpus is one the fix must end)."""
    return prove_compare(_of(before, module), _of(after, module), texts="exact",
                         strict_leaks=True)


def _of(records: dict[str, dict[str, Any]], module: str) -> dict[str, dict[str, Any]]:
    return {t: r for t, r in records.items() if module_of(t) == module}


def leaked_tests(records: dict[str, dict[str, Any]], module: str) -> list[str]:
    """Names of ``module``'s tests that started with a leaked engine alive."""
    return [test_name(t) for t in prove_leaked_tests(_of(records, module))]


def engines_built(records: dict[str, dict[str, Any]], module: str) -> int:
    """How many engines ``module``'s tests (and its import) built."""
    return prove_engines_built(_of(records, module))

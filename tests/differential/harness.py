"""Run generated modules before and after ``gpu-test-lint check --fix`` and compare.

:func:`run_batch` writes the modules of some seeds (:func:`~generator.generate_module`) into
``orig/``, copies them to ``safe/`` and ``unsafe/``, fixes those with ``check --fix`` and
``check --fix --unsafe-fixes``, runs each folder in one pytest session on the stand-in engine
(``stand_in/``, first on the child's ``sys.path``; ``stand_in_torch/`` too when torch is not
installed) with the recorder ``differential_recorder``, and compares the records test by test
with :func:`lint_gpu_tests.prove.compare.compare` (texts exactly: the stand-in is
deterministic).

After the safe fix any difference is a finding. After the unsafe fixes a difference is allowed
only in a module where an unsafe fix's reason (``fix.reason`` of the JSON report of the
original) says that field may change (:func:`allowed_fields`).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lint_gpu_tests.prove.compare import Difference, compare
from lint_gpu_tests.runtime.recorder import RECORD_ENV, read_records

from .generator import Module, generate_module

HERE = Path(__file__).resolve().parent
STAND_IN = HERE / "stand_in"
STAND_IN_TORCH = HERE / "stand_in_torch"
VARIANTS = ("orig", "safe", "unsafe")

#: Words of a reason that speaks of the tests after the fixed one (GPU008's "reads
#: `VLLM_X` (line 13), which today sees what this change leaves behind"): what it allows may
#: change in any test of the module.
MODULE_WIDE_WORDS = ("leaves behind",)

#: What an unsafe fix's reason says may change: (words in the reason, fields of
#: :class:`~lint_gpu_tests.prove.compare.Difference`). A field no reason names stays a
#: finding.
REASON_FIELDS: list[tuple[tuple[str, ...], frozenset[str]]] = [
    (("`id()`", "`is`", "`type()`", "identity", "hash", "ProxyType", "proxy"),
     frozenset({"outcome", "texts"})),
    (("closure", "thread", "escapes", "captured"), frozenset({"outcome", "texts"})),
    (("weakref.ref", "freed"), frozenset({"outcome"})),
    (("scoped fixture", "module- or session-scoped", "lifetime"),
     frozenset({"leaked_at_start"})),
    (("run time", "runtime"), frozenset({"engines", "texts"})),
    (MODULE_WIDE_WORDS, frozenset({"outcome", "texts", "engines"})),
]


def allowed_fields(reason: str) -> frozenset[str]:
    """The difference fields ``reason`` (an unsafe fix's ``fix.reason``) says may change."""
    allowed: set[str] = set()
    for words, fields in REASON_FIELDS:
        if any(w in reason for w in words):
            allowed |= fields
    return frozenset(allowed)


@dataclass
class ModuleVerdict:
    """One module's comparison.

    Attributes:
        module: its file name.
        seed: its seed.
        shapes: its shapes.
        before_failures: tests that failed or errored on the original (a generator defect).
        safe: differences after the safe fix.
        unsafe: differences after the unsafe fixes that no unsafe reason allows.
        unsafe_allowed: differences after the unsafe fixes that a reason allows.
        reasons: the unsafe fixes' reasons in the original's report.
        fixed_safe: whether the safe fix changed the file; ``fixed_unsafe`` the same.
        tests: tests recorded in the original's run.
    """

    module: str
    seed: int
    shapes: list[str]
    before_failures: list[str] = field(default_factory=list)
    safe: list[Difference] = field(default_factory=list)
    unsafe: list[Difference] = field(default_factory=list)
    unsafe_allowed: list[Difference] = field(default_factory=list)
    reasons: list[UnsafeReason] = field(default_factory=list)
    fixed_safe: bool = False
    fixed_unsafe: bool = False
    tests: int = 0


def module_name(seed: int) -> str:
    """The file name of ``seed``'s module."""
    return f"test_gen_{seed}.py"


def _module_of(test_id: str) -> str:
    return test_id.split("::", 1)[1] if test_id.startswith("<") else test_id.split("::", 1)[0]


def _child_env(record: Path) -> dict[str, str]:
    paths = [str(STAND_IN)]
    if importlib.util.find_spec("torch") is None:
        paths.append(str(STAND_IN_TORCH))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "GPU_TEST_LINT_")) and k != "PYTHONPATH"}
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONHASHSEED="0",
               PYTHONDONTWRITEBYTECODE="1")
    env[RECORD_ENV] = str(record)
    return env


def run_pytest(folder: Path, record: Path, timeout: float = 600.0) -> dict[str, dict[str, Any]]:
    """Run ``folder``'s modules in one pytest session on the stand-in engine; its records.

    Raises:
        subprocess.TimeoutExpired: the session ran past ``timeout`` seconds.
    """
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "differential_recorder", "-W", "ignore", "--tb=no", "-o",
           "console_output_style=classic", "."]
    subprocess.run(cmd, cwd=folder, env=_child_env(record), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=timeout, check=False)
    return read_records(str(record))


def _lint(args: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "lint_gpu_tests", "check", "--no-cache", "--exit-zero",
           "-q", "-j", "1", *args, "."]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_TEST_LINT_")}
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                          check=False)


def _enclosing(source: bytes, row: int) -> str | None:
    """The test function or class around line ``row`` of ``source``; None when the line is
    in a fixture, a helper or at module level (its fix may change any test of the module)."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.name.startswith(("test", "Test")) and \
                node.lineno <= row <= (node.end_lineno or node.lineno):
            return node.name
    return None


@dataclass(frozen=True)
class UnsafeReason:
    """An unsafe fix's reason and where it applies.

    Attributes:
        reason: ``fix.reason`` of the JSON report.
        scope: the test function or class it is in, or None for the whole module.
    """

    reason: str
    scope: str | None

    def allows(self, diff: Difference) -> bool:
        """Whether this reason allows ``diff``: the field is one the reason names
        (:func:`allowed_fields`), in the test the fix is in (any test when ``scope`` is
        None)."""
        if diff.field not in allowed_fields(self.reason):
            return False
        if self.scope is None or any(w in self.reason for w in MODULE_WIDE_WORDS):
            return True
        parts = diff.test.split("::")
        return len(parts) > 1 and parts[1].split("[")[0] == self.scope


def unsafe_reasons(folder: Path) -> dict[str, list[UnsafeReason]]:
    """Per module file name, every unsafe fix's reason in ``folder``'s JSON report
    (``check --unsafe-fixes --output-format json``)."""
    done = _lint(["--unsafe-fixes", "--output-format", "json"], folder)
    reasons: dict[str, list[UnsafeReason]] = {}
    for violation in json.loads(done.stdout or "[]"):
        fix = violation.get("fix") or {}
        if fix.get("applicability") == "unsafe" and fix.get("reason"):
            path = Path(violation["filename"])
            source = (folder / path.name).read_bytes()
            scope = _enclosing(source, violation["location"]["row"])
            reasons.setdefault(path.name, []).append(UnsafeReason(fix["reason"], scope))
    return reasons


def _by_module(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    grouped: dict[str, dict[str, dict[str, Any]]] = {}
    for test_id, record in records.items():
        grouped.setdefault(_module_of(test_id), {})[test_id] = record
    return grouped


def write_modules(root: Path, modules: Iterable[Module]) -> dict[str, Module]:
    """Write ``modules`` into ``root/orig`` (bytes as generated); by file name."""
    orig = root / "orig"
    orig.mkdir(parents=True, exist_ok=True)
    written = {}
    for module in modules:
        name = module_name(module.seed)
        (orig / name).write_bytes(module.source.encode("utf-8"))
        written[name] = module
    return written


def run_batch(root: Path, seeds: Iterable[int], *, known_defects: bool = False
              ) -> list[ModuleVerdict]:
    """Generate, fix, run and compare the modules of ``seeds`` under ``root`` (emptied
    first); one :class:`ModuleVerdict` per module, in seed order."""
    return run_modules(root, [generate_module(s, known_defects=known_defects) for s in seeds])


def run_modules(root: Path, generated: list[Module]) -> list[ModuleVerdict]:
    """Fix, run and compare ``generated`` (distinct seeds) under ``root`` (emptied first);
    one :class:`ModuleVerdict` per module, in the order given."""
    shutil.rmtree(root, ignore_errors=True)
    modules = write_modules(root, generated)
    for variant in ("safe", "unsafe"):
        shutil.copytree(root / "orig", root / variant)
    reasons = unsafe_reasons(root / "orig")
    _lint(["--fix"], root / "safe")
    _lint(["--fix", "--unsafe-fixes"], root / "unsafe")
    runs = {v: _by_module(run_pytest(root / v, root / f"{v}.json")) for v in VARIANTS}
    verdicts = []
    for name, module in modules.items():
        before = runs["orig"].get(name, {})
        verdict = ModuleVerdict(name, module.seed, module.shapes,
                                reasons=reasons.get(name, []))
        verdict.tests = sum(1 for t in before if not t.startswith("<"))
        verdict.before_failures = sorted(
            t for t, r in before.items()
            if not t.startswith("<") and r.get("outcome") not in ("passed", "skipped", "xfailed"))
        original = (root / "orig" / name).read_bytes()
        verdict.fixed_safe = (root / "safe" / name).read_bytes() != original
        verdict.fixed_unsafe = (root / "unsafe" / name).read_bytes() != original
        verdict.safe = compare(before, runs["safe"].get(name, {}), texts="exact")
        for diff in compare(before, runs["unsafe"].get(name, {}), texts="exact"):
            allowed = any(r.allows(diff) for r in verdict.reasons)
            (verdict.unsafe_allowed if allowed else verdict.unsafe).append(diff)
        verdicts.append(verdict)
    return verdicts


def summarize(verdicts: list[ModuleVerdict]) -> dict[str, Any]:
    """Figures of a run: modules, tests, modules fixed, differences and per shape counts."""
    shapes: dict[str, int] = {}
    for v in verdicts:
        for s in v.shapes:
            shapes[s] = shapes.get(s, 0) + 1
    return {
        "modules": len(verdicts),
        "tests": sum(v.tests for v in verdicts),
        "fixed_safe": sum(v.fixed_safe for v in verdicts),
        "fixed_unsafe": sum(v.fixed_unsafe for v in verdicts),
        "generator_failures": sum(bool(v.before_failures) for v in verdicts),
        "safe_differences": sum(len(v.safe) for v in verdicts),
        "safe_modules_differing": sum(bool(v.safe) for v in verdicts),
        "unsafe_differences": sum(len(v.unsafe) for v in verdicts),
        "unsafe_allowed": sum(len(v.unsafe_allowed) for v in verdicts),
        "shapes": dict(sorted(shapes.items())),
    }


def timed_batch(root: Path, seeds: list[int], *, known_defects: bool = False
                ) -> tuple[list[ModuleVerdict], float]:
    """:func:`run_batch` and its wall seconds."""
    start = time.monotonic()
    verdicts = run_batch(root, seeds, known_defects=known_defects)
    return verdicts, time.monotonic() - start

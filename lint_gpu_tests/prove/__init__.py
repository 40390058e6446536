"""``gpu-test-lint prove``: prove the fixes on the user's own tests and engine.

The tree is copied twice, one copy fixed as ``check --fix`` fixes it; each test module the
fix changed runs in both copies, in a pytest session of its own with the recorder plugin
(:mod:`lint_gpu_tests.runtime.recorder`); per test, the outcome, the engines' resolved
configurations, the generated texts and the engines alive at its start that nothing holds
are compared (:mod:`.compare`). Sessions are kept as recordings keyed by their inputs
(:mod:`.store`), so a re-run runs only what changed. ``docs/prove.md`` is the user's guide.

Layers inside: :mod:`.compare` (records in, verdicts out), :mod:`.store`, :mod:`.session`,
:mod:`.schedule`, then :mod:`.pipeline` (copies, fix, sessions, verdicts, ``--apply``) and
:mod:`.report` (text, JSON, SARIF).
"""

from __future__ import annotations

from lint_gpu_tests.prove.compare import (
    TEXT_MODES,
    Difference,
    ModuleResult,
    Status,
    compare,
    judge,
)
from lint_gpu_tests.prove.pipeline import ProveOptions, ProveResult, prove_paths

__all__ = [
    "TEXT_MODES",
    "Difference",
    "ModuleResult",
    "ProveOptions",
    "ProveResult",
    "Status",
    "compare",
    "judge",
    "prove_paths",
]

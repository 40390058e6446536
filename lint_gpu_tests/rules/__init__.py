"""All rules, one module each. ``ALL_RULES`` is ordered by code."""

from __future__ import annotations

from lint_gpu_tests.rule import Rule
from lint_gpu_tests.rules.gpu001_engine_outside_runner import EngineOutsideRunner
from lint_gpu_tests.rules.gpu002_fixture_yields_engine import FixtureYieldsEngine
from lint_gpu_tests.rules.gpu003_finalizer_shutdown import FinalizerShutdown
from lint_gpu_tests.rules.gpu004_manual_engine_cleanup import ManualEngineCleanup
from lint_gpu_tests.rules.gpu005_runner_without_with import RunnerWithoutWith
from lint_gpu_tests.rules.gpu006_strong_engine_alias import StrongEngineAlias
from lint_gpu_tests.rules.gpu007_engines_oversubscribe_device import EnginesOversubscribeDevice
from lint_gpu_tests.rules.gpu008_environment_mutated_without_isolation import (
    EnvironmentMutatedWithoutIsolation,
)

ALL_RULES: list[type[Rule]] = [
    EngineOutsideRunner,
    FixtureYieldsEngine,
    FinalizerShutdown,
    ManualEngineCleanup,
    RunnerWithoutWith,
    StrongEngineAlias,
    EnginesOversubscribeDevice,
    EnvironmentMutatedWithoutIsolation,
]


def rule_by_code(code: str) -> type[Rule] | None:
    """Return the rule class for ``code`` (case-insensitive), or ``None``."""
    code = code.upper()
    return next((rule for rule in ALL_RULES if rule.code == code), None)

"""A rule registered from outside the package (``tests/scratch_rule.py``, added as
``docs/architecture.md`` says a project adds its own) that fires on every line GPU001 reports
leaves the rules' test suite passing: no test of the rules, of their examples, of the
registry or of the documentation depends on the registry holding the package's rules alone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lint_gpu_tests import codes, rules
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, config_from_table
from lint_gpu_tests.rule import Rule

TESTS = Path(__file__).resolve().parent
#: The test modules that must pass with the scratch rule registered: the rules' suite
#: (every rule's examples, each rule's own tests, the registry's), the prefilter's example
#: checks, the documentation and the layers (both read the registry).
SUITE = ("tests/rules", "tests/test_prefilter.py", "tests/test_docs.py", "tests/test_layers.py",
         "tests/test_rule_registry.py",
         "tests/test_cli_readme.py::test_rule_urls_point_to_anchors_in_the_docs_that_ship")


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Rule]]:
    """The scratch rule, registered for one test (the registry is restored after)."""
    monkeypatch.setattr(rules, "ALL_RULES", list(rules.ALL_RULES))
    monkeypatch.setattr(codes, "RULE_CODES", dict(codes.RULE_CODES))
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.delitem(sys.modules, "scratch_rule", raising=False)
    import scratch_rule

    yield scratch_rule.ScratchEngineLine
    sys.modules.pop("scratch_rule", None)


def test_the_scratch_rule_fires_on_the_lines_of_gpu001s_examples(
        scratch: type[Rule]) -> None:
    assert rules.rule_by_code("GPU050") is scratch
    assert scratch not in rules.package_rules()
    gpu001 = rules.rule_by_code("GPU001")
    assert gpu001 is not None and gpu001.INVALID
    for example in gpu001.INVALID:
        source, path = example.source.encode(), example.path
        config = config_from_table(dict(example.config), "t") if example.config else Config()
        marked = [line for line, code in example.expected() if code == "GPU001"]
        alone = check_source(source, path, config.with_overrides(select=("GPU050",)))
        assert sorted(v.location.row for v in alone) == marked
        together = check_source(source, path, config)
        assert sorted(v.location.row for v in together if v.code == "GPU050") == marked


def test_the_rules_suite_passes_with_the_scratch_rule_registered() -> None:
    """The suite runs in a new pytest process that loads ``scratch_rule`` as a plugin, so the
    rule is registered before any test module is imported; its examples are run there too,
    by ``tests/rules/test_every_rule.py`` (it has no test file of its own)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, (str(TESTS), os.environ.get("PYTHONPATH", ""))))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "scratch_rule", "-m", "not e2e",
         "-p", "no:randomly", *SUITE],
        cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=600, check=False)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.fullmatch(r"\d+ passed in [\d.]+s(?: \(\d+:\d+:\d+\))?", summary), summary

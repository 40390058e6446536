"""The package's layers import one way: no import cycle, function-level imports
included, and nothing lower imports anything higher. The runtime imports none of the linter.

Layers, bottom to top: data types, codes and the whole-run answers (standard library
only: the console script replays one before importing anything else); configuration;
source parsing; analysis; fix planning (rules rate their fixes with it; the modules of its
subpackage have layers of their own); rules; the checker that runs them; the codemods; the
fix loop; discovery and the cache; fixes as edits and diffs; the run (pipeline, pool,
caches); rule docs; output; baselines (over output's fingerprints); the report of a check
(present); the API (a facade over the run); prove (over the API); then the CLI (its options
and commands), the language server and the flake8 plugin.
"""

from __future__ import annotations

import ast
from pathlib import Path

from lint_gpu_tests.codes import RULE_CODES
from lint_gpu_tests.rules import ALL_RULES

PACKAGE = Path(__file__).resolve().parents[1] / "lint_gpu_tests"

LAYERS: list[set[str]] = [
    {"codes", "ftypes", "running.answers"},
    {"config"},
    {"parsing.source", "parsing.writer", "parsing.prefilter", "parsing.noqa", "parsing"},
    {"parsing.syntax"},
    {"analysis.scopes", "analysis.process_targets", "analysis"},
    {"analysis.analysis", "analysis.mappings", "analysis.helper_calls", "analysis.env_mutations"},
    # Fix planning (lint_gpu_tests/fixplan/), one concern a module, bottom to top.
    {"fixplan", "fixplan.groups", "fixplan.blocks"},
    {"fixplan.plan", "fixplan.flow"},
    {"fixplan.cleanup", "fixplan.safety", "fixplan.runner_target", "fixplan.stored"},
    {"fixplan.planner"},
    {"fixplan.isolate", "fixplan.classes", "fixplan.proxy", "fixplan.env"},
    {"fixplan.xunit"},
    {"fixplan.factories"},
    {"fixplan.factory_fixtures"},
    {"rule", "rules"},
    {"checking.checker", "checking.conftest_index", "checking.helper_index", "checking"},
    {"codemods"},
    {"fixing.fixloop", "fixing.tree_units", "fixing"},
    {"running.discovery", "running.cache", "running.leaks", "running"},
    {"fixing.edits", "fixing.unit_edits"},
    {"running.run"},
    {"report.docs", "report"},
    {"report.output"},
    {"report.baseline"},
    {"report.present"},
    {"api"},
    # prove (lint_gpu_tests/prove/): fixes proven on the user's tests, over the API.
    {"prove.compare", "prove.store", "prove.schedule", "prove.session"},
    {"prove", "prove.pipeline"},
    {"prove.report"},
    {"interfaces.cli", "interfaces.cli_options", "interfaces.commands", "interfaces.flake8_plugin",
     "__main__", "interfaces.server", "interfaces", "interfaces.entry"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Modules of the package that ``path`` imports anywhere (top level or in a function)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("lint_gpu_tests")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if not target.startswith("lint_gpu_tests"):
                continue
            found.add(target)
            # ``from lint_gpu_tests import rules`` imports the submodule ``rules``.
            found |= {f"{target}.{a.name}" for a in node.names
                      if (PACKAGE.parent / f"{target}.{a.name}".replace(".", "/")).exists()
                      or (PACKAGE.parent / (f"{target}.{a.name}".replace(".", "/") + ".py")
                          ).exists()}
    return found - {name}


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def _layer(module: str) -> int | None:
    """The layer of ``module``: a subpackage's module by its own entry (``fixplan.flow``)
    where LAYERS has one, else by its top-level name (``rules``)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    for key in dict.fromkeys((".".join(parts[1:3]), parts[1])):
        for index, names in enumerate(LAYERS):
            if key in names:
                return index
    return None


def test_rule_codes_are_the_registry() -> None:
    assert RULE_CODES == {rule.code: rule.name for rule in ALL_RULES}


def test_every_linter_module_has_a_layer() -> None:
    unplaced = sorted(m for m in _graph() if m.count(".") >= 1 and _layer(m) is None
                      and not m.startswith("lint_gpu_tests.runtime"))
    assert unplaced == []


def test_no_import_cycle() -> None:
    graph = _graph()
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str], done: set[str]) -> None:
        for target in sorted(graph.get(node, ())):
            if target in stack:
                cycles.append([*stack[stack.index(target):], target])
            elif target not in done and target in graph:
                done.add(target)
                visit(target, [*stack, target], done)

    for start in sorted(graph):
        visit(start, [start], {start})
    assert cycles == []


def test_nothing_lower_imports_anything_higher() -> None:
    upward = []
    for module, targets in sorted(_graph().items()):
        own = _layer(module)
        if own is None:
            continue
        for target in sorted(targets):
            other = _layer(target)
            if other is not None and other > own:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_the_runtime_imports_none_of_the_linter() -> None:
    bad = [f"{m} -> {t}" for m, ts in sorted(_graph().items())
           if m.startswith("lint_gpu_tests.runtime")
           for t in sorted(ts) if not t.startswith("lint_gpu_tests.runtime")]
    assert bad == []


def test_no_private_name_crosses_modules() -> None:
    """A module imports only public names of another (``_name`` stays in its module); a
    private module of a subpackage (``rules/_common.py``) serves its siblings with public
    names."""
    crossing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "lint_gpu_tests"):
                crossing += [f"{_module_name(path)}: {node.module}.{alias.name}"
                             for alias in node.names
                             if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert crossing == []

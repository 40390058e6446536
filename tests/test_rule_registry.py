"""The rule registry: a rule declares itself, and a rule added from outside the package is
checked, prefiltered, fixed and documented like the package's own."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from lint_gpu_tests import api, codes, rules
from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.checking.checker import check_module, check_source
from lint_gpu_tests.codemods.driver import ORDER
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source
from lint_gpu_tests.fixplan.plan import CleanupPlan
from lint_gpu_tests.ftypes import Applicability, FixInfo, FixKind
from lint_gpu_tests.interfaces.cli import cli
from lint_gpu_tests.rule import Example, Hit, Rule


class SynchronizeByHand(Rule):
    """A rule of a project's own: ``torch.cuda.synchronize()`` as a statement in a test,
    removed by the package's manual-cleanup codemod."""

    code = "GPU090"
    name = "synchronize-by-hand"
    summary = "`torch.cuda.synchronize()` called by hand in a test"
    message = "`torch.cuda.synchronize()` by hand; the runner's teardown synchronizes"
    fix_title = "Remove the call"
    fix_kinds = (FixKind.REMOVE_MANUAL_CLEANUP,)
    triggers = ("synchronize",)
    what_it_does = "Checks for `torch.cuda.synchronize()` statements in tests."
    why_bad = "The runner already waits for the device when its block ends."
    fix_safety = "Safe: the call has no result and the runner synchronizes."
    INVALID = (Example('import torch\n\n\ndef test_x():\n'
                       '    torch.cuda.synchronize()  # error: GPU090\n'),)
    VALID = (Example("def test_x():\n    pass\n"),)

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                    ast.unparse(node.value.func) == "torch.cuda.synchronize":
                fix = FixInfo(Applicability.SAFE, self.fix_title, "",
                              FixKind.REMOVE_MANUAL_CLEANUP, CleanupPlan(node.lineno))
                yield Hit(node.lineno, node.col_offset, node.end_lineno or node.lineno,
                          node.end_col_offset or node.col_offset, self.message, fix)


SOURCE = b'''import torch


def test_sync():
    x = 1
    torch.cuda.synchronize()
    assert x
'''
FIXED = b'''def test_sync():
    x = 1
    assert x
'''


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register :class:`SynchronizeByHand` for one test (the registry is restored after)."""
    monkeypatch.setattr(rules, "ALL_RULES", list(rules.ALL_RULES))
    monkeypatch.setattr(codes, "RULE_CODES", dict(codes.RULE_CODES))
    monkeypatch.setattr(codes, "OPT_IN_CODES", set(codes.OPT_IN_CODES))
    rules.register(SynchronizeByHand)


#: The package's rules and the one from outside, which only its code in full selects.
MINE = Config(extend_select=("GPU090",))


def test_a_rule_from_outside_is_checked(registered: None) -> None:
    found = check_source(SOURCE, "tests/test_sync.py", MINE)
    assert [(v.code, v.location.row, v.location.column) for v in found] == [("GPU090", 6, 5)]
    assert rules.rule_by_code("gpu090") is SynchronizeByHand
    assert list(codes.RULE_CODES)[-1] == "GPU090"
    assert codes.RULE_CODES["GPU090"] == "synchronize-by-hand"
    for example in SynchronizeByHand.INVALID:
        assert [(v.location.row, v.code) for v in check_source(
            example.source.encode(), example.path, MINE)] == example.expected()


@pytest.mark.parametrize(("config", "selected"), [
    (Config(), False),
    (Config(select=("GPU",)), False),
    (Config(select=("GPU09",)), False),
    (Config(select=("GPU0",), extend_select=("GPU",)), False),
    (Config(select=("GPU090",)), True),
    (Config(extend_select=("GPU090",)), True),
    (Config(select=("GPU001",), extend_select=("GPU090",)), True),
    (Config(select=("GPU090",), ignore=("GPU09",)), True),
    (Config(select=("GPU090",), ignore=("GPU090",)), False),
])
def test_a_rule_from_outside_runs_only_where_its_code_is_named(
        registered: None, config: Config, selected: bool) -> None:
    """Off by default, as flake8's off-by-default extensions and ruff's preview rules: a
    prefix (``GPU``, which ``ALL`` stands for) does not select it, its code in full does, and
    the longest selector wins over ``ignore`` as for every rule."""
    assert config.is_code_enabled("GPU090") is selected
    found = check_source(SOURCE, "tests/test_sync.py", config)
    assert [v.code for v in found] == (["GPU090"] if selected else [])


def test_a_rule_from_outside_is_selected_and_prefiltered(registered: None) -> None:
    alone = Config(select=("GPU090",))
    assert api.may_hold_violation(SOURCE, "tests/test_sync.py", alone)
    elsewhere = b"import torch\n\n\ndef test_sync():\n    torch.cuda.empty_cache()\n"
    assert not api.may_hold_violation(elsewhere, "tests/test_sync.py", alone)
    # With the package's rules too, the engine words let a file through as before.
    assert api.may_hold_violation(b"from vllm import LLM\n", "tests/test_x.py", MINE)
    assert not api.may_hold_violation(elsewhere, "tests/test_x.py", MINE)
    # Off by default, its words let no file through.
    assert not api.may_hold_violation(SOURCE, "tests/test_sync.py", Config())


def test_a_rule_from_outside_is_fixed(registered: None, tmp_path: Path) -> None:
    outcome = fix_source(SOURCE, "tests/test_sync.py", MINE)
    assert outcome.new_source == FIXED
    assert [v.code for v in outcome.fixed] == ["GPU090"]
    assert outcome.remaining == []
    path = tmp_path / "tests" / "test_sync.py"
    path.parent.mkdir()
    path.write_bytes(SOURCE)
    result = api.check_paths([str(path)], Config(select=("GPU090",)), fix=True, cache=False)
    assert path.read_bytes() == FIXED
    assert [v.code for v in result.fixed] == ["GPU090"]


def test_a_rule_from_outside_is_documented(registered: None) -> None:
    shown = CliRunner().invoke(cli, ["rule", "GPU090"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0] == "# synchronize-by-hand (GPU090)"
    assert "The runner already waits for the device when its block ends." in shown.output
    table = CliRunner().invoke(cli, ["rule", "--all"])
    assert "# synchronize-by-hand (GPU090)" in table.output


def test_a_taken_code_is_refused(registered: None) -> None:
    class Other(SynchronizeByHand):
        pass

    with pytest.raises(ValueError, match="code GPU090 is taken"):
        rules.register(Other)


def test_the_driver_has_one_codemod_for_each_plan_class_in_the_kinds_order() -> None:
    kinds = [kind for command in ORDER for kind in command.KINDS]
    assert kinds == [kind for kind in FixKind if kind is not FixKind.WITH_ANOTHER]
    assert [command.PLAN.__name__ for command in ORDER] == [
        "WrapPlan", "IsolatePlan", "ClassPlan", "FactoryPlan", "XunitPlan", "ProxyPlan",
        "CleanupPlan", "EnvFixPlan", "UndoPlan"]


def test_each_rule_declares_the_kinds_of_its_fixes() -> None:
    """Every fix a rule's examples get is of a kind the rule declares, and each declared
    kind occurs (the example configurations cover every transformation)."""
    from lint_gpu_tests.config import config_from_table

    for rule in rules.ALL_RULES:
        seen: set[FixKind] = set()
        for example in rule.INVALID:
            config = config_from_table(dict(example.config), "example") if example.config \
                else Config()
            for variant in (config, config.with_overrides(fix_strategy="isolate")):
                for violation in check_module(example.source.encode(), example.path,
                                              variant).violations:
                    if violation.code == rule.code and violation.fix is not None and \
                            violation.fix.kind is not None:
                        seen.add(violation.fix.kind)
        assert seen <= set(rule.fix_kinds), rule.code
        assert seen == set(rule.fix_kinds), (rule.code, set(rule.fix_kinds) - seen)


def test_the_cache_keys_on_the_registered_rules(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with a project's own rule and one without never share cached results."""
    path = tmp_path / "tests" / "test_sync.py"
    path.parent.mkdir()
    path.write_bytes(SOURCE)
    config = Config(root=str(tmp_path), extend_select=("GPU090",))
    cache_dir = str(tmp_path / "cache")
    plain = api.check_paths([str(path)], config, cache=True, cache_dir=cache_dir)
    assert (plain.violations, plain.cache_hits) == ([], 0)
    with monkeypatch.context() as patch:
        patch.setattr(rules, "ALL_RULES", list(rules.ALL_RULES))
        patch.setattr(codes, "RULE_CODES", dict(codes.RULE_CODES))
        patch.setattr(codes, "OPT_IN_CODES", set(codes.OPT_IN_CODES))
        rules.register(SynchronizeByHand)
        mine = api.check_paths([str(path)], config, cache=True, cache_dir=cache_dir)
        assert ([v.code for v in mine.violations], mine.cache_hits) == (["GPU090"], 0)
        again = api.check_paths([str(path)], config, cache=True, cache_dir=cache_dir)
        assert ([v.code for v in again.violations], again.cache_hits) == (["GPU090"], 1)
    after = api.check_paths([str(path)], config, cache=True, cache_dir=cache_dir)
    assert (after.violations, after.cache_hits) == ([], 1)


def test_workers_see_the_registered_rules_whatever_the_start_method(
        registered: None, tmp_path: Path) -> None:
    """Workers start by fork when a rule is registered here (Python 3.14's default start
    method is forkserver, macOS's spawn: a worker started so would not know the rule)."""
    import multiprocessing

    for index in range(6):
        (tmp_path / f"test_sync_{index}.py").write_bytes(SOURCE)
    before = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method("forkserver", force=True)
    try:
        result = api.check_paths([str(tmp_path)], MINE.with_overrides(root=str(tmp_path)),
                                 jobs=2, parallel_threshold=2, cache=False)
    finally:
        multiprocessing.set_start_method(before, force=True)
    assert [v.code for v in result.violations] == ["GPU090"] * 6

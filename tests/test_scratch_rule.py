"""A rule registered from outside the package (``tests/scratch_rule.py``, added as
``docs/architecture.md`` says a project adds its own) that fires on every line GPU001
reports. ``tests/conftest.py`` registers it for the whole test session, so every test runs
with it present: off by default, it changes no output until a configuration or ``--select``
names its code, and here it is selected and fires on exactly the lines of GPU001's examples.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from click.testing import CliRunner
from scratch_rule import ScratchEngineLine

from lint_gpu_tests import codes, rules
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, config_from_table
from lint_gpu_tests.interfaces.cli import cli


def test_the_scratch_rule_is_registered_for_the_session_and_off_by_default() -> None:
    assert rules.rule_by_code("GPU050") is ScratchEngineLine
    assert ScratchEngineLine in rules.outside_rules()
    assert ScratchEngineLine not in rules.package_rules()
    assert codes.RULE_CODES["GPU050"] == "scratch-engine-line"
    assert "GPU050" in codes.OPT_IN_CODES
    assert not Config().is_code_enabled("GPU050")
    assert Config(extend_select=("GPU050",)).is_code_enabled("GPU050")


def test_the_scratch_rule_fires_on_the_lines_of_gpu001s_examples() -> None:
    gpu001 = rules.rule_by_code("GPU001")
    assert gpu001 is not None and gpu001.INVALID
    for example in gpu001.INVALID:
        source = example.source.encode()
        config = config_from_table(dict(example.config), "t") if example.config else Config()
        marked = [line for line, code in example.expected() if code == "GPU001"]
        assert marked, example.title
        with tempfile.TemporaryDirectory() as directory:
            # An example with other modules is checked laid out beside them.
            path = example.lay_out(directory) if example.modules else example.path
            alone = check_source(source, path, config.with_overrides(select=("GPU050",)))
            assert [(v.code, v.location.row) for v in alone] == [
                ("GPU050", line) for line in marked]
            default = check_source(source, path, config)
            assert [v for v in default if v.code == "GPU050"] == []
            extended = check_source(source, path,
                                    config.with_overrides(extend_select=("GPU050",)))
            assert sorted(v.location.row for v in extended if v.code == "GPU050") == marked
            assert [v for v in extended if v.code != "GPU050"] == default


def test_the_scratch_rule_is_selected_from_the_command_line(tmp_path: Path) -> None:
    gpu001 = rules.rule_by_code("GPU001")
    assert gpu001 is not None
    example = next(e for e in gpu001.INVALID if not e.config)
    marked = [line for line, code in example.expected() if code == "GPU001"]
    target = tmp_path / "tests" / "test_scratch.py"
    target.parent.mkdir()
    target.write_text(example.source)
    runner = CliRunner()
    plain = runner.invoke(cli, ["check", "--no-cache", "--select", "GPU", str(target)])
    assert "GPU050" not in plain.output
    chosen = runner.invoke(cli, ["check", "--no-cache", "--select", "GPU050",
                                 "--output-format", "concise", str(target)])
    assert chosen.exit_code == 1, chosen.output
    rows = [int(line.split(":")[1]) for line in chosen.output.splitlines()
            if " GPU050 " in line]
    assert rows == marked
    sarif = [json.loads(runner.invoke(cli, ["check", "--no-cache", *select, "--output-format",
                                            "sarif", str(target)]).output)
             for select in ((), ("--select", "GPU050"))]
    described = [[rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]]
                 for log in sarif]
    assert described == [[*(r.code for r in rules.package_rules()), "GPU900"],
                         [*(r.code for r in rules.package_rules()), "GPU050", "GPU900"]]

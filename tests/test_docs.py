"""Rule docs come from the rule classes: docs/rules.md must be current, and every rule
renders every section ruff's docs have."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lint_gpu_tests.interfaces import cli
from lint_gpu_tests.report import docs
from lint_gpu_tests.rule import MARKER_RE
from lint_gpu_tests.rules import ALL_RULES, package_rules

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules.md"
README = DOCS.parents[1] / "README.md"


def test_docs_rules_md_is_current() -> None:
    assert DOCS.read_text(encoding="utf-8") == docs.render_rules_markdown(package_rules()), (
        "docs/rules.md is stale: run `python -m lint_gpu_tests.report.docs > docs/rules.md`")


def test_readme_rules_table_is_current() -> None:
    text = README.read_text(encoding="utf-8")
    assert text == docs.update_readme(text, package_rules()), (
        "README.md's table of rules is stale: run `python -m lint_gpu_tests.report.docs --readme "
        "README.md`")


def test_readme_rules_table_has_a_row_per_registered_rule() -> None:
    rows = [line for line in docs.render_readme_rules().splitlines()
            if line.startswith("| [GPU")]
    assert [row.split("|")[2].strip() for row in rows] == [
        *(rule.name for rule in ALL_RULES), "syntax-error", "internal-error"]


def test_update_readme_rewrites_only_between_the_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{docs.README_START}\nold\n{docs.README_END}\nafter\n",
                      encoding="utf-8")
    assert docs.main(["--readme", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == (
        f"# x\n\n{docs.README_START}\n{docs.render_readme_rules()}{docs.README_END}\nafter\n")
    with pytest.raises(ValueError, match="no table-of-rules markers"):
        docs.update_readme("# x\n")


def test_cli_markdown_matches_docs_module() -> None:
    result = CliRunner().invoke(cli.cli, ["rules", "--format", "markdown"])
    assert result.exit_code == 0
    assert result.stdout == docs.render_rules_markdown()


def test_every_rule_has_an_anchor_and_table_row() -> None:
    text = docs.render_rules_markdown()
    for rule in ALL_RULES:
        anchor = rule.code.lower()
        assert f'<a id="{anchor}"></a>' in text
        assert f"| [{rule.code}](#{anchor}) | {rule.name} |" in text
    assert '<a id="gpu900"></a>' in text


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_rule_page_sections(rule: type) -> None:
    text = CliRunner().invoke(cli.cli, ["rule", rule.code]).stdout
    assert text == docs.render_rule(rule)
    assert text.startswith(f"# {rule.name} ({rule.code})\n\n")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:4] == ["## What it does", "## Why is this bad?", "## Example",
                            "## Use instead"]
    if rule.fix_title:
        assert "## Fix safety" in headings
    assert not any(MARKER_RE.search(line) for line in text.splitlines())
    assert "# error:" not in text


def test_rule_all_prints_every_rule() -> None:
    """Every rule, then the two codes that are not rules, as ``rule CODE`` prints them."""
    text = CliRunner().invoke(cli.cli, ["rule", "--all"]).stdout
    assert [line for line in text.splitlines() if line.startswith("# ")] == [
        *(f"# {rule.name} ({rule.code})" for rule in ALL_RULES),
        "# syntax-error (GPU900)", "# internal-error (GPU999)"]
    assert text.endswith(CliRunner().invoke(cli.cli, ["rule", "GPU999"]).stdout)


def test_rules_page_lists_the_codes_that_are_not_rules() -> None:
    """``docs/rules.md`` has a row and a section, under its anchor, for GPU900 and GPU999."""
    page = docs.render_rules_markdown()
    for code, name in (("GPU900", "syntax-error"), ("GPU999", "internal-error")):
        assert f"| [{code}](#{code.lower()}) | {name} |" in page
        assert f'<a id="{code.lower()}"></a>\n\n## {name} ({code})' in page
    assert ("| [GPU999](#gpu999) | internal-error | | The flake8 plugin's report of invalid "
            "settings or of a rule that failed on a file |") in page

"""Rule documentation, rendered from the rule classes (the only source of truth).

``gpu-test-lint rule CODE`` prints :func:`render_rule`; ``gpu-test-lint rules`` prints
:func:`render_rules_table`; ``docs/rules.md`` is :func:`render_rules_markdown`, and the
README's table of rules (between :data:`README_START` and :data:`README_END`) is
:func:`render_readme_rules`, regenerated with::

    python -m lint_gpu_tests.report.docs > docs/rules.md
    python -m lint_gpu_tests.report.docs --readme README.md

and a test fails when a committed file differs from what this module renders.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from lint_gpu_tests.rule import Example, Rule

GENERATED_NOTE = (
    "<!-- Generated from the rule classes by `python -m lint_gpu_tests.report.docs > "
    "docs/rules.md`; "
    "do not edit by hand. -->"
)


def _rules() -> list[type[Rule]]:
    from lint_gpu_tests.rules import ALL_RULES

    return list(ALL_RULES)


def fix_availability(rule: type[Rule]) -> str:
    """One sentence saying whether the rule has a fix, and its title."""
    if rule.fix_title:
        return f"Fix is available: {rule.fix_title}."
    return "Fix is not available."


def _example_block(example: Example) -> str:
    title = f"{example.title.strip()}\n\n" if example.title.strip() else ""
    return f"{title}```python\n{example.clean_source().rstrip()}\n```"


def _sections(rule: type[Rule]) -> list[tuple[str, str]]:
    sections: list[tuple[str, str]] = [
        ("What it does", rule.what_it_does.strip()),
        ("Why is this bad?", rule.why_bad.strip()),
    ]
    if rule.INVALID:
        sections.append(("Example", _example_block(rule.INVALID[0])))
    if rule.VALID:
        sections.append(("Use instead", _example_block(rule.VALID[0])))
    if rule.fix_safety.strip():
        sections.append(("Fix safety", rule.fix_safety.strip()))
    if rule.options:
        sections.append(("Options", "\n".join(f"- `{option}`" for option in rule.options)))
    if rule.references:
        sections.append(("References", "\n".join(f"- {ref}" for ref in rule.references)))
    return sections


def render_rule(rule: type[Rule], *, level: int = 1) -> str:
    """The rule's explanation in ruff's sections (Markdown), as ``gpu-test-lint rule`` prints.

    Args:
        rule: a rule class.
        level: heading level of the title; sections are one level below.
    """
    head = "#" * level
    sub = "#" * (level + 1)
    parts = [f"{head} {rule.name} ({rule.code})", fix_availability(rule)]
    parts += [f"{sub} {title}\n{body}" for title, body in _sections(rule)]
    return "\n\n".join(parts) + "\n"


def render_rules_table(rules: Sequence[type[Rule]] | None = None) -> str:
    """Plain-text table: code, name, fix availability, summary (``gpu-test-lint rules``)."""
    whole = rules is None  # the whole set: the two reports that are not rules go with it
    rules = _rules() if rules is None else list(rules)
    rows = [("Code", "Name", "Fix", "Summary")]
    rows += [(r.code, r.name, "yes" if r.fix_title else "no", r.summary) for r in rules]
    if whole:
        from lint_gpu_tests.codes import INTERNAL_ERROR_CODE, PARSE_ERROR_CODE, PARSE_ERROR_NAME

        rows += [(PARSE_ERROR_CODE, PARSE_ERROR_NAME, "no",
                  "A file that does not parse (reported for analysed files, never rewritten)"),
                 (INTERNAL_ERROR_CODE, "internal-error", "no", INTERNAL_ERROR_SUMMARY)]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "".join(
        f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}"
        .rstrip() + "\n"
        for row in rows
    )


def render_rules_markdown(rules: Sequence[type[Rule]] | None = None) -> str:
    """The whole of ``docs/rules.md``: a table of rules, then each rule's sections under an
    ``#gpuNNN`` anchor (the ``url`` of JSON output points there)."""
    from lint_gpu_tests.codes import INTERNAL_ERROR_CODE, PARSE_ERROR_CODE, PARSE_ERROR_NAME

    rules = _rules() if rules is None else list(rules)
    out = ["# Rules", "", GENERATED_NOTE, "",
           "`[*]` in the fix column: `gpu-test-lint check --fix` can rewrite the code "
           "(see each rule's *Fix safety*).", "",
           "| Code | Name | Fix | Summary |", "| --- | --- | --- | --- |"]
    for rule in rules:
        fix = "[*]" if rule.fix_title else ""
        out.append(f"| [{rule.code}](#{rule.code.lower()}) | {rule.name} | {fix} | "
                   f"{rule.summary} |")
    out.append(f"| [{PARSE_ERROR_CODE}](#{PARSE_ERROR_CODE.lower()}) | {PARSE_ERROR_NAME} | | "
               "The file does not parse |")
    out.append(f"| [{INTERNAL_ERROR_CODE}](#{INTERNAL_ERROR_CODE.lower()}) | internal-error | | "
               f"{INTERNAL_ERROR_SUMMARY} |")
    out.append("")
    for rule in rules:
        out += [f'<a id="{rule.code.lower()}"></a>', "", render_rule(rule, level=2)]
    for code in PSEUDO_RULES:
        out += [f'<a id="{code.lower()}"></a>', "", pseudo_rule(code, level=2).rstrip("\n"), ""]
    return "\n".join(out)


INTERNAL_ERROR_SUMMARY = ("The flake8 plugin's report of invalid settings or of a rule that "
                          "failed on a file")
"""``GPU999``'s line in the tables of rules."""

PSEUDO_RULES: dict[str, tuple[str, str]] = {
    "GPU900": ("syntax-error",
               "A file that is not valid Python (or cannot be decoded) is reported with the "
               "parser's line, column and message. It is never rewritten, and the rest of the "
               "run goes on. Only files that are analysed are parsed, so only they get "
               "`GPU900`: a file whose bytes name nothing an enabled rule starts from (an "
               "engine class, a runner, an engine fixture of its conftests, a change of "
               "`os.environ` in a file that names a configured variable such as `VLLM_...`; "
               "see `lint_gpu_tests/parsing/prefilter.py`) is not parsed, as ruff's `E9` "
               "and flake8's `E999` already report syntax errors. With `--select GPU900` "
               "alone, the files every rule would analyse are parsed. The flake8 plugin leaves "
               "this to flake8's own `E999`."),
    "GPU999": ("internal-error",
               "Reported by the flake8 plugin only, on line 1 of a file: "
               "`GPU999 configuration error: ...` when the `[tool.gpu-test-lint]` settings that "
               "govern the file are invalid (an unknown key, a bad value), `GPU999 internal "
               "error: ...` when a rule fails on the file. The command line reports the same "
               "as an `error:` line on stderr and exits 2."),
}
"""Codes that are not rules: the parse error and the flake8 plugin's internal error."""


def pseudo_rule(code: str, *, level: int = 1) -> str:
    """The explanation of ``GPU900`` or ``GPU999`` (``gpu-test-lint rule GPU900``).

    Raises:
        KeyError: for any other code.
    """
    name, text = PSEUDO_RULES[code.upper()]
    return f"{'#' * level} {name} ({code.upper()})\n\n{text}\n"


README_START = ("<!-- The table of rules is generated from the rule classes by "
                "`python -m lint_gpu_tests.report.docs --readme README.md`; do not edit it by "
                "hand. -->")
README_END = "<!-- End of the generated table of rules. -->"


def render_readme_rules(rules: Sequence[type[Rule]] | None = None) -> str:
    """The README's table of rules (Markdown, one row a rule plus ``GPU900`` and
    ``GPU999``): code (linked to its section of ``docs/rules.md``), name, summary and the
    fix's title."""
    from lint_gpu_tests.codes import INTERNAL_ERROR_CODE, PARSE_ERROR_CODE, PARSE_ERROR_NAME

    rules = _rules() if rules is None else list(rules)
    rows = [(r.code, r.name, r.summary, r.fix_title or "none") for r in rules]
    rows.append((PARSE_ERROR_CODE, PARSE_ERROR_NAME, "The file does not parse (reported for "
                 "analysed files, never rewritten)", "none"))
    rows.append((INTERNAL_ERROR_CODE, "internal-error", INTERNAL_ERROR_SUMMARY, "none"))
    out = ["| code | name | flags | fix |", "| --- | --- | --- | --- |"]
    out += [f"| [{code}](docs/rules.md#{code.lower()}) | {name} | {summary} | {fix} |"
            for code, name, summary, fix in rows]
    return "\n".join(out) + "\n"


def update_readme(text: str, rules: Sequence[type[Rule]] | None = None) -> str:
    """``text`` (a README) with the part between :data:`README_START` and
    :data:`README_END` replaced by :func:`render_readme_rules`.

    Raises:
        ValueError: when ``text`` lacks either marker line.
    """
    start, end = text.find(README_START + "\n"), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError("the README has no table-of-rules markers")
    body_start = start + len(README_START) + 1
    return text[:body_start] + render_readme_rules(rules) + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    """Print ``docs/rules.md`` to stdout (``python -m lint_gpu_tests.report.docs``), or, with
    ``--readme PATH``, rewrite the table of rules in the README at ``PATH``
    (:func:`update_readme`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--readme"] and len(args) == 2:
        with open(args[1], encoding="utf-8", newline="") as handle:
            text = handle.read()
        with open(args[1], "w", encoding="utf-8", newline="") as handle:
            handle.write(update_readme(text))
        return 0
    if args:
        sys.stderr.write("usage: python -m lint_gpu_tests.report.docs [--readme README.md]\n")
        return 2
    sys.stdout.write(render_rules_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

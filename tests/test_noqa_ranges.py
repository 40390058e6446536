"""``parse_noqa`` with the module's tree (only the top-level statements holding a ``noqa``
are tokenised) reads the same directives as tokenising the whole text."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lint_gpu_tests.parsing.noqa import parse_noqa
from lint_gpu_tests.parsing.source import decode_source

ROOT = Path(__file__).resolve().parent.parent
CRAFTED = [
    'x = """\nsome text # noqa: GPU001\n"""\ny = 1  # noqa\n',
    '@decorate(  # noqa: GPU002\n    1)\ndef f():\n    return 1\n',
    'a = 1; b = (  # noqa\n    2)\n',
    '# a comment # noqa: GPU003\n\nx = 1 \\\n    + 2  # noqa: GPU004\n',
    'if True:\n    s = """\n  # noqa\n"""\n# noqa: GPU001 trailing comment\n',
    'class C:  # noqa\n    x = f"""{1}\n    # noqa: GPU005\n    """\n',
    'x = 1\r\ny = 2  # noqa\r\nz = """\r\n# noqa\r\n"""\r\n',
    'def f():\n    pass\n    # noqa: GPU006 indented comment after the body\nx = 1\n',
]


def _sources() -> list[tuple[str, str]]:
    files = sorted((*ROOT.glob("tests/fixtures/**/*.py"), *ROOT.glob("examples/**/*.py"),
                    *ROOT.glob("tests/e2e/suites/**/*.py")))
    found = [(str(p.relative_to(ROOT)), decode_source(p.read_bytes())) for p in files]
    return [(f"crafted-{i}", text) for i, text in enumerate(CRAFTED)] + [
        (name, text) for name, text in found if "noqa" in text.lower()]


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_the_tree_gives_the_same_directives(name: str, text: str) -> None:
    tree = ast.parse(text)
    assert parse_noqa(text, tree) == parse_noqa(text)


def test_crafted_cases_find_directives() -> None:
    """The crafted cases are not vacuous: each has a line-level directive."""
    assert all(parse_noqa(text).lines for text in CRAFTED)

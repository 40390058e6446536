"""codemods._printer.Printer prints a module as LibCST does, reusing the code of the
top-level statements it printed before (differential: ``tree.code`` decides)."""

from __future__ import annotations

import libcst as cst
import pytest
from cst_samples import sample_modules

from lint_gpu_tests.codemods._printer import Printer

SHAPES = {
    "empty": "",
    "only_a_comment": "# nothing else\n",
    "no_trailing_newline": "import os\n\n\ndef f():\n    return os.sep",
    "crlf": "import os\r\n\r\n\r\ndef f():\r\n    return os.sep\r\n",
    "tabs": "def f():\n\tif 1:\n\t\treturn 2\n",
    "header_footer": "#!/usr/bin/env python\n# header\n\nx = 1\n\n# footer\n",
    "blank_lines_only": "\n\n\n",
}
SAMPLES = sample_modules(SHAPES)


@pytest.mark.parametrize(("name", "source"), SAMPLES, ids=[n for n, _ in SAMPLES])
def test_prints_as_libcst_and_shares_statements(name: str, source: bytes) -> None:
    tree = cst.parse_module(source)
    printer = Printer()
    assert printer.code(tree) == tree.code
    # A rewrite rebuilds some statements and keeps the rest (the same objects): the kept
    # ones are printed from memory, and the whole still equals LibCST's code.
    changed = tree.with_changes(body=[
        stmt.with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment("# moved"))])
        if index % 2 else stmt for index, stmt in enumerate(tree.body)])
    assert printer.code(changed) == changed.code
    assert printer.code(changed.with_changes(body=changed.body[::-1])) == \
        changed.with_changes(body=changed.body[::-1]).code


def test_a_statement_is_printed_once() -> None:
    tree = cst.parse_module("import os\n\n\ndef f():\n    return os.sep\n")
    printer = Printer()
    printer.code(tree)
    expected = tree.code
    calls: list[object] = []
    real = cst.FunctionDef._codegen_impl

    def counted(self: cst.FunctionDef, state: object, *args: object) -> None:
        calls.append(self)
        real(self, state, *args)  # type: ignore[arg-type]

    cst.FunctionDef._codegen_impl = counted  # type: ignore[method-assign]
    try:
        assert printer.code(tree.with_changes(header=[])) == expected
    finally:
        cst.FunctionDef._codegen_impl = real  # type: ignore[method-assign]
    assert calls == []


def test_the_defaults_are_part_of_what_is_kept() -> None:
    # A statement built without its own whitespace takes the module's default newline.
    stmt = cst.SimpleStatementLine(body=[cst.Pass()])
    printer = Printer()
    lf = cst.Module(body=[stmt], default_newline="\n")
    crlf = cst.Module(body=[stmt], default_newline="\r\n")
    assert (printer.code(lf), printer.code(crlf)) == ("pass\n", "pass\r\n")

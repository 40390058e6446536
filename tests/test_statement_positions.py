"""StatementPositions gives LibCST's PositionProvider's range for every node, computing one
top-level statement at a time (differential: the provider over the whole module decides)."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from cst_samples import sample_modules
from libcst.metadata import MetadataWrapper, PositionProvider

from lint_gpu_tests.codemods._positions import ReachedStatements, StatementPositions
from lint_gpu_tests.codemods._printer import Printer
from lint_gpu_tests.codemods._wrap import _identifiers, ast_identifiers

SHAPES = {
    "header_and_footer": "# header\n\n'''doc'''\nimport os\n\nx = 1  # c\n# footer\n",
    "decorators_with_comments": (
        "import pytest\n\n\n# before\n@pytest.fixture(\n    scope='module',\n)\n"
        "# between\n@other\n\n# after decorators\ndef f(\n    a,\n):\n    return a\n"),
    "backslash_after_at": "@\\\ndeco\ndef f():\n    pass\n",
    "semicolons": "a = 1; b = 2\nif a: b = 3; c = 4\nclass C: pass\n",
    "crlf_and_tabs": "def f():\r\n\tif 1:\r\n\t\treturn 2\r\n\r\n\r\nasync def g():\r\n\tpass\r\n",
    "no_trailing_newline": "def f():\n    x = (1,\n         2)\n    return x",
    "block_footer_comments": (
        "def f():\n    x = 1\n    # end of f\n\n# dedented\nclass C:\n    def m(self):\n"
        "        pass\n        # end of m\n    # end of C\n"),
    "compound_heads": (
        "with open('a') as a, open('b') as b:\n    pass\nfor i in range(3):\n    pass\n"
        "else:\n    pass\ntry:\n    pass\nexcept (ValueError,\n        TypeError):\n    pass\n"
        "finally:\n    pass\nwhile False:\n    break\n"),
    "every_compound": (
        "async def f(x):\n    async with a() as b:\n        async for i in b:\n"
        "            pass\n        else:\n            pass\n    if x: y = 1; z = 2\n"
        "    elif x > 1:\n        pass\n    elif x > 2: pass\n    else:\n        pass\n"
        "    while x:\n        break\n    else:\n        pass\n"
        "    try:\n        pass\n    except* ValueError:\n        pass\n"
        "    except* (TypeError, KeyError) as e:\n        pass\n    else:\n        pass\n"
        "    finally:\n        pass\n"
        "    match x:\n        case [1, *rest]:\n            pass\n"
        "        case {'k': v, **kw}:\n            pass\n        case _: pass\n"
        "    class C:\n        @property\n        def p(self): return 1\n"),
    "every_name_token": (
        "import a.b as c, d\nfrom .e.f import (g as h, i)\nfrom . import j\n"
        "from k import *\n"
        "@deco(key=True)\nasync def f(p, /, q: int = None, *r, s=False, **t) -> m.n:\n"
        "    global u\n    nonlocal_ = lambda v, *w: v\n    try:\n        pass\n"
        "    except E as x:\n        del x\n    with open(y) as (z1, z2):\n"
        "        print(f'{z1!r:>{z2}} {aa=}', *bb, **cc)\n    [dd for dd in ee if (ff := dd)]\n"
        "    match gg:\n        case Point(x=0, y=hh) | [*ii] | {'k': 1, **jj}:\n"
        "            pass\n        case None | True | kk.ll:\n            pass\n"
        "        case _:\n            pass\n"
        "class Mm(Base, metaclass=Meta):\n    def g(self):\n        nonlocal_ = 1\n"
        "        return self.attr.other\n"),
    "strings_over_lines": 's = """a\nb\nc"""\nt = f"""{s}\n{s}"""\ndef f():\n    return s\n',
}
SAMPLES = sample_modules(SHAPES)


@pytest.mark.parametrize(("name", "text"), SAMPLES, ids=[n for n, _ in SAMPLES])
def test_every_node_has_the_providers_position(name: str, text: bytes) -> None:
    tree = cst.parse_module(text)
    expected = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    printer = Printer()
    positions = StatementPositions(tree, ast.parse(text), printer)
    inside = _nodes_of_statements(tree)
    for node in inside:
        assert positions[node] == expected[node], (name, type(node).__name__)
        if node in tree.body:
            where = expected[node]
            assert (positions.start_line(node), positions.start_column(node)) == \
                (where.start.line, where.start.column)
    assert positions._resolved_all is False  # each statement was computed on its own
    statements = [n for n in inside
                  if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement))]
    assert all(positions.source_lines(n) is not None for n in statements), name  # paired
    for node in statements:  # any depth, from the ast tree: LibCST's lines and columns
        where = expected[node]
        assert (positions.start_line(node), positions.start_column(node)) == \
            (where.start.line, where.start.column), (name, type(node).__name__)
        assert positions.span(node) == (where.start.line, where.end.line), name
        nodes = positions.ast_of(node)
        assert nodes is not None
        assert ast_identifiers(nodes) == _identifiers([node]), (name, type(node).__name__)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and name != "backslash_after_at":
            first = min([where.start.line, *(expected[d].start.line for d in node.decorators)])
            assert positions.with_decorators(node) == (first, where.end.line), name
    # The code each statement's positions were computed from is the printer's.
    assert all(id(stmt) in printer._parts for stmt in tree.body)
    assert printer.code(tree) == tree.code
    for node, where in expected.items():  # the header and footer: the provider's answer
        assert positions[node] == where


class _Collect(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True


def _nodes_of_statements(tree: cst.Module) -> list[cst.CSTNode]:
    collect = _Collect()
    for stmt in tree.body:
        stmt.visit(collect)
    return collect.nodes


def test_one_statement_is_computed_alone() -> None:
    text = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    tree = cst.parse_module(text)
    positions = StatementPositions(tree, ast.parse(text))
    g = tree.body[1]
    assert isinstance(g, cst.FunctionDef)
    assert positions.lines_of(g) == (5, 6)
    positions.prepare(g)
    assert positions[g.body.body[0]].start.line == 6
    f = tree.body[0]
    assert isinstance(f, cst.FunctionDef)
    assert f not in positions._computed
    assert positions[f.body] == \
        MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)[f.body]
    assert positions._resolved_all  # a node of a statement not prepared: the whole module


def test_trees_that_do_not_pair_fall_back_to_the_provider() -> None:
    text = "a = 1\nb = 2\n"
    tree = cst.parse_module(text)
    positions = StatementPositions(tree, ast.parse("a = 1\n"))
    expected = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    assert positions[tree.body[1]] == expected[tree.body[1]]
    with pytest.raises(KeyError):
        positions.lines_of(tree.body[0])


class _Recorder(ReachedStatements):
    def __init__(self, positions: StatementPositions, lines: set[int],
                 expressions: bool) -> None:
        super().__init__(positions, lines, expressions)
        self.visited: list[str] = []
        self.left: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.visited.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.left.append(original_node.name.value)
        return updated_node


@pytest.mark.parametrize("expressions", [False, True])
def test_reached_statements_visit_only_what_spans_a_line(expressions: bool) -> None:
    """Only the statements around the edit's line are descended into (their decorators
    count); the others' ``visit_`` and ``leave_`` still run. No code is generated for
    positions unless expressions are asked for, and then only for the reached top-level
    statement."""
    text = ("def a():\n    return 1\n\n\n@deco\nclass B:\n    def b(self):\n"
            "        def inner():\n            pass\n        return 2\n\n\n"
            "def c():\n    return 3\n")
    tree = cst.parse_module(text)
    positions = StatementPositions(tree, ast.parse(text))
    recorder = _Recorder(positions, {10}, expressions)
    assert tree.visit(recorder) is not None
    assert recorder.visited == ["a", "b", "inner", "c"]
    assert recorder.left == ["a", "inner", "b", "c"]
    assert positions._prepared == ({id(tree.body[1])} if expressions else set())
    assert positions.reach(tree.body[1]) == (5, 10)
    decorated = _Recorder(positions, {5}, expressions)  # the decorator's line reaches B
    tree.visit(decorated)
    assert decorated.visited == ["a", "b", "c"]

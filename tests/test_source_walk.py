"""The fast tree walks in lint_gpu_tests/source.py give exactly what the ``ast`` module's
generators give (the analysis relies on their order)."""

from __future__ import annotations

import ast
from pathlib import Path

from lint_gpu_tests.source import parent_index, walk_nodes

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _reference_walk(roots: list[ast.AST], stop: tuple[type[ast.AST], ...]) -> list[ast.AST]:
    out: list[ast.AST] = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        out.append(node)
        if not (stop and isinstance(node, stop)):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def _modules() -> list[ast.Module]:
    package = Path(__file__).resolve().parents[1] / "lint_gpu_tests"
    return [ast.parse(p.read_text(encoding="utf-8")) for p in sorted(package.glob("*.py"))]


def test_walk_nodes_matches_the_ast_generators() -> None:
    for tree in _modules():
        for stop in ((), SCOPES):
            assert walk_nodes(tree.body, stop) == _reference_walk(list(tree.body), stop)


def test_parent_index_matches_iter_child_nodes() -> None:
    for tree in _modules():
        expected = {id(child): parent for parent in ast.walk(tree)
                    for child in ast.iter_child_nodes(parent)
                    if not isinstance(child, (ast.expr_context, ast.operator, ast.unaryop,
                                              ast.boolop, ast.cmpop))}  # shared singletons
        index = parent_index(tree)
        assert {key: index[key] for key in expected} == expected
        assert len(index) >= len(expected)

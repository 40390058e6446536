"""The fast tree walks in lint_gpu_tests/parsing/source.py give exactly what the ``ast`` module's
generators give (the analysis relies on their order)."""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

from lint_gpu_tests.parsing.source import parent_index, walk_nodes

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


def _reference_breadth(roots: list[ast.AST], stop: tuple[type[ast.AST], ...]) -> list[ast.AST]:
    out: list[ast.AST] = []
    queue = deque(roots)
    while queue:
        node = queue.popleft()
        out.append(node)
        if not (stop and isinstance(node, stop)):
            queue.extend(ast.iter_child_nodes(node))
    return out


def _modules() -> list[ast.Module]:
    package = Path(__file__).resolve().parents[1] / "lint_gpu_tests"
    return [ast.parse(p.read_text(encoding="utf-8")) for p in sorted(package.rglob("*.py"))]


def test_walk_nodes_matches_the_ast_generators() -> None:
    for tree in _modules():
        for stop in ((), SCOPES):
            assert walk_nodes(tree.body, stop) == _reference_walk(list(tree.body), stop)


def test_walk_nodes_breadth_first_matches_a_queue_of_child_nodes() -> None:
    for tree in _modules():
        for stop in ((), SCOPES):
            assert walk_nodes(tree.body, stop, breadth_first=True) == _reference_breadth(
                list(tree.body), stop)
        assert walk_nodes([tree], breadth_first=True) == list(ast.walk(tree))


def test_parent_index_matches_iter_child_nodes() -> None:
    for tree in _modules():
        expected = {id(child): parent for parent in ast.walk(tree)
                    for child in ast.iter_child_nodes(parent)
                    if not isinstance(child, (ast.expr_context, ast.operator, ast.unaryop,
                                              ast.boolop, ast.cmpop))}  # shared singletons
        index = parent_index(tree)
        assert {key: index[key] for key in expected} == expected
        assert len(index) >= len(expected)


def _every_node_class() -> list[type[ast.AST]]:
    found: list[type[ast.AST]] = []
    stack: list[type[ast.AST]] = [ast.AST]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def test_child_fields_leave_out_only_fields_that_never_hold_a_node() -> None:
    """Every field the walkers skip holds an identifier, number, flag or constant: in every
    node of the package's modules and of a module using every kind of statement, and by
    name in every node class of ``ast``."""
    from lint_gpu_tests.parsing.source import child_fields

    every_kind = ast.parse(
        "import a.b as c\nfrom . import d as e\nglobal g\nx: int = 1\nx += f'{y!r:>{w}}'\n"
        "async def h(*a, k=1, **kw):\n    nonlocal z\n    async with m as n:\n        pass\n"
        "    async for i in j:\n        await i\n    return [q async for q in r]\n"
        "try:\n    pass\nexcept E as err:\n    raise\nmatch v:\n"
        "    case {'k': 1, **rest}: pass\n    case C(1, kw=2) | [1, *others]: pass\n"
        "    case None | True as s: pass\nlambda u=1: u\n")
    for tree in [*_modules(), every_kind]:
        for node in ast.walk(tree):
            kept = child_fields(node.__class__)
            for name in set(node._fields) - set(kept):
                value = getattr(node, name, None)
                items = value if isinstance(value, list) else [value]
                assert not any(isinstance(item, ast.AST) for item in items), (node, name)
    for cls in _every_node_class():
        skipped = set(cls._fields) - set(child_fields(cls))
        assert skipped <= {"name", "id", "attr", "arg", "module", "asname", "rest", "level",
                           "is_async", "conversion", "type_comment", "kind", "value"}
        assert "value" not in skipped or issubclass(cls, (ast.Constant, ast.MatchSingleton))

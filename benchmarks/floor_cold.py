"""Cold floor: start Python, read every ``*.py`` file under the paths, ``ast.parse`` those
naming an engine or a runner (``LLM``, ``VllmRunner``, ``vllm_runner`` as whole words).

No Python checker that reports on engines can do less on a cold run; ``benchmarks/run.py``
divides ``gpu-test-lint check --no-cache`` by this. ``--substring`` counts a name inside a
longer word too (``VLLM_USE_V1`` names ``LLM``): a looser floor that parses more files.
``--environ`` also parses files naming ``environ``/``putenv`` (what GPU008 needs).
``--importers`` also parses the files that import an engine builder of a module parsed for
naming an engine (``from helpers.engines import make_llm`` where that module's top-level
``make_llm`` calls ``LLM(...)``, or the module itself: ``import helpers.engines``; the last
part of the imported module is the parsed file's stem), found by one more pass over the bytes
already read: a checker that follows engines through a tree's helper modules cannot do less.
``--walk`` then visits every node of each parsed tree once, in Python, doing nothing with it:
the least any analysis that reads the whole of each parsed file costs on top of the floor.
Usage: ``python floor_cold.py [--substring] [--environ] [--importers] [--walk] PATH...``.
"""

import ast
import os
import re
import sys

from floor_files import python_files

NAMES = (b"LLM", b"VllmRunner", b"vllm_runner")
WORDS = re.compile(rb"(?<![A-Za-z0-9_])(?:LLM|VllmRunner|vllm_runner)(?![A-Za-z0-9_])")
ENVIRON = (b"environ", b"putenv")
IMPORTS = re.compile(rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)"
                     rb"|import[ \t]+([\w.]+))", re.MULTILINE)
ENGINES = {n.decode() for n in NAMES}


def builders(tree: ast.Module) -> set[bytes]:
    """The top-level functions and classes of ``tree`` that call an engine or runner by name
    (``LLM(...)``, ``vllm.LLM(...)``)."""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and any(
                isinstance(n, ast.Call) and (isinstance(n.func, ast.Name) and n.func.id in ENGINES
                                             or isinstance(n.func, ast.Attribute)
                                             and n.func.attr in ENGINES)
                for n in ast.walk(node)):
            out.add(node.name.encode())
    return out


def visit(tree: ast.AST) -> int:
    """Visit every node below ``tree`` once (each node's fields read, no other work), as
    ``lint_gpu_tests.parsing.source.walk_nodes`` does; return how many."""
    count = 0
    stack = [tree]
    node_type = ast.AST
    while stack:
        node = stack.pop()
        count += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                stack.append(value)
            elif value.__class__ is list:
                stack.extend(item for item in value if isinstance(item, node_type))
    return count


def main(args: list[str]) -> int:
    substring = "--substring" in args
    environ = "--environ" in args
    walk = "--walk" in args
    importers = "--importers" in args
    paths = [a for a in args if not a.startswith("--")] or ["."]
    parsed = nodes = 0
    stems: dict[bytes, set[bytes]] = {}  # stem of a file naming an engine -> its builders
    left: list[bytes] = []  # the bytes of the files not parsed, for ``--importers``

    def parse(data: bytes) -> ast.Module | None:
        nonlocal parsed, nodes
        parsed += 1
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            return None
        if walk:
            nodes += visit(tree)
        return tree

    for path in python_files(paths):
        with open(path, "rb") as handle:
            data = handle.read()
        named = any(n in data for n in NAMES) and (substring or WORDS.search(data) is not None)
        if named or (environ and any(n in data for n in ENVIRON)):
            tree = parse(data)
            if named and importers and tree is not None:
                found = builders(tree)
                if found:
                    stem = os.path.splitext(os.path.basename(path))[0]
                    if stem == "__init__":
                        stem = os.path.basename(os.path.dirname(path))
                    stems.setdefault(stem.encode(), set()).update(found)
        elif importers:
            left.append(data)
    if stems:
        for data in left:
            for match in IMPORTS.finditer(data):
                module, names, plain = match.groups()
                if plain is not None:
                    hit = plain.rpartition(b".")[2] in stems
                else:
                    wanted = stems.get(module.rpartition(b".")[2], set())
                    hit = bool(wanted) and any(w in wanted for w in re.findall(rb"\w+", names))
                if hit:
                    parse(data)
                    break
    print(parsed, "files parsed", *(["", nodes, "nodes visited"] if walk else []))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

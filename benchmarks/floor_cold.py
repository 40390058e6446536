"""Cold floor: start Python, read every ``*.py`` file under the paths, ``ast.parse`` those
naming an engine or a runner (``LLM``, ``VllmRunner``, ``vllm_runner`` as whole words).

No Python checker that reports on engines can do less on a cold run; ``benchmarks/run.py``
divides ``gpu-test-lint check --no-cache`` by this. ``--substring`` counts a name inside a
longer word too (``VLLM_USE_V1`` names ``LLM``): a looser floor that parses more files.
``--environ`` also parses files naming ``environ``/``putenv`` (what GPU008 needs).
``--walk`` then visits every node of each parsed tree once, in Python, doing nothing with it:
the least any analysis that reads the whole of each parsed file costs on top of the floor.
Usage: ``python floor_cold.py [--substring] [--environ] [--walk] PATH...``.
"""

import ast
import re
import sys

from floor_files import python_files

NAMES = (b"LLM", b"VllmRunner", b"vllm_runner")
WORDS = re.compile(rb"(?<![A-Za-z0-9_])(?:LLM|VllmRunner|vllm_runner)(?![A-Za-z0-9_])")
ENVIRON = (b"environ", b"putenv")


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
    paths = [a for a in args if not a.startswith("--")] or ["."]
    parsed = nodes = 0
    for path in python_files(paths):
        with open(path, "rb") as handle:
            data = handle.read()
        named = any(n in data for n in NAMES) and (substring or WORDS.search(data) is not None)
        if named or (environ and any(n in data for n in ENVIRON)):
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError):
                pass
            else:
                if walk:
                    nodes += visit(tree)
            parsed += 1
    print(parsed, "files parsed", *(["", nodes, "nodes visited"] if walk else []))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

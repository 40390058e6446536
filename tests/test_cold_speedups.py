"""The shortcuts of the cold check give what the long way gave: the same lines,
nodes, parents and classes, and the same reports (codes and positions) where a shortcut
skips work."""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config
from lint_gpu_tests.parsing.source import decode_source, parent_index, walk_breadth, walk_nodes
from lint_gpu_tests.parsing.syntax import lines_matching, lines_naming
from lint_gpu_tests.rules import ALL_RULES

ROOT = Path(__file__).resolve().parent.parent


def _corpus() -> list[tuple[str, str]]:
    files = sorted((*ROOT.glob("tests/fixtures/**/*.py"), *ROOT.glob("examples/**/*.py"),
                    *ROOT.glob("tests/e2e/suites/**/*.py")))
    out = [(f"{rule.code}-{i}", example.source)
           for rule in ALL_RULES for i, example in enumerate((*rule.INVALID, *rule.VALID))]
    for path in files:
        try:
            out.append((str(path.relative_to(ROOT)), decode_source(path.read_bytes())))
        except SyntaxError:
            continue
    return out


CORPUS = _corpus()


def _parsed() -> list[tuple[str, ast.Module, str]]:
    out = []
    for name, text in CORPUS:
        try:
            out.append((name, ast.parse(text), text))
        except (SyntaxError, ValueError):
            continue
    return out


# ----------------------------------------------------------------- lines_naming
def _lines_by_expression(text: str, words: tuple[str, ...]) -> list[int]:
    if not words:
        return []
    return lines_matching(text, re.compile(
        r"(?<![\w])(?:" + "|".join(map(re.escape, words)) + r")(?![\w])"))


WORD_SETS = [
    ("LLM", "VllmRunner", "vllm_runner", "DPVllmRunner"),
    ("vllm_runner", "vllm_runner_factory"),
    ("Process", "Pool", "get_context", "map", "spawn", "submit"),
    ("x",),
    ("a.b", "LLM"),  # not identifiers: the expression itself
    (),
]


@pytest.mark.parametrize("words", WORD_SETS, ids=lambda w: ",".join(w) or "none")
def test_lines_naming_gives_the_lines_of_the_word_expression(words: tuple[str, ...]) -> None:
    for _, text in CORPUS:
        assert lines_naming(text, words) == _lines_by_expression(text, words)
    pieces = ["LLM", "L", "LM", "_", "a", "1", " ", ".", "(", "\n", "\r", "\r\n", "\f",
              "vllm_runner", "vllm_runner_factory", "Process", "é", "ß", "\u0663", "\u00aa",
              "\u00b2", "\u216b", "\uff2c\uff2c\uff2d", "\U0001d40b"]  # ², Ⅻ, ＬＬＭ, 𝐋
    chosen = random.Random(24)
    for _ in range(3_000):
        text = "".join(chosen.choice(pieces) for _ in range(chosen.randint(0, 25)))
        assert lines_naming(text, words) == _lines_by_expression(text, words), repr(text)


def test_lines_naming_normalises_and_counts_every_line_ending() -> None:
    text = "x = 1\r\n\uff2c\uff2c\uff2d('m')\rLLM_X\nLLM\f LLM\n_LLM\n\u00e9LLM\nLLM\u00b2\n(LLM)"
    assert lines_naming(text, ("LLM",)) == [2, 4, 8]


# ----------------------------------------------------------------- walks
def _preorder(node: ast.AST, stop: tuple[type[ast.AST], ...] = ()) -> list[ast.AST]:
    out = [node]
    if not (stop and isinstance(node, stop)):
        for child in ast.iter_child_nodes(node):
            out.extend(_preorder(child, stop))
    return out


def test_walk_nodes_and_parent_index_match_the_recursive_walk() -> None:
    stop = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for name, tree, _ in _parsed():
        assert [id(n) for n in walk_nodes([tree])] == [id(n) for n in _preorder(tree)], name
        expected = [id(n) for s in tree.body for n in _preorder(s, stop)]
        assert [id(n) for n in walk_nodes(tree.body, stop)] == expected, name
        # The context and operator nodes are shared singletons: their parent is any one.
        shared = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
        parents = {id(child): node for node in ast.walk(tree)
                   for child in ast.iter_child_nodes(node) if not isinstance(child, shared)}
        indexed = parent_index(tree)
        assert {k: v for k, v in indexed.items() if k in parents} == parents, name
        assert len(indexed) - len(parents) == len({id(n) for n in ast.walk(tree)
                                                   if isinstance(n, shared)}), name


def test_walk_breadth_is_ast_walk() -> None:
    for name, tree, _ in _parsed():
        for node in (tree, *tree.body):
            assert [id(n) for n in walk_breadth(node)] == [id(n) for n in ast.walk(node)], name


def test_owner_class_is_the_syntactic_parent() -> None:
    for name, tree, text in _parsed():
        module = ModuleAnalysis.build(tree, text, "test_module.py", Config())
        parents = parent_index(tree)
        for info in module.functions:
            parent = parents.get(id(info.node))
            expected = parent if isinstance(parent, ast.ClassDef) else None
            assert info.owner_class is expected, (name, info.name)


# ----------------------------------------------------------------- reports
def _found(source: str, config: Config | None = None,
           path: str = "tests/test_module.py") -> list[tuple[str, int, int, bool]]:
    return [(v.code, v.location.row, v.location.column, v.fixable)
            for v in check_source(source.encode(), path, config or Config())]


def test_attribute_calls_of_engine_classes_and_their_factories() -> None:
    # An attribute call is looked up only when its last name is an engine class's: the
    # re-exported path, a factory classmethod and a class reached through a module are
    # all found; LLMEngine and an attribute named like a method are not engines.
    source = (
        "import vllm\nimport vllm.entrypoints.llm\nfrom vllm import LLM\n\n\n"
        "def test_a(args):\n"
        "    a = vllm.LLM('m')\n"
        "    b = vllm.entrypoints.llm.LLM('m')\n"
        "    c = LLM.from_engine_args(args)\n"
        "    d = vllm.LLM.from_engine_args(args)\n"
        "    e = vllm.LLMEngine('m')\n"
        "    f = a.generate('p')\n"
        "    del a, b, c, d\n"
    )
    assert _found(source) == [
        ("GPU001", 7, 9, True), ("GPU001", 8, 9, True), ("GPU007", 8, 9, False),
        ("GPU001", 9, 9, False), ("GPU001", 10, 9, False), ("GPU004", 13, 5, True)]


def test_a_configured_engine_class_is_found_by_its_own_last_name() -> None:
    config = Config(engine_classes=("mypkg.engines.Big",))
    source = (
        "import mypkg.engines\nfrom mypkg import engines as eng\n\n\n"
        "def test_a():\n"
        "    a = mypkg.engines.Big()\n"
        "    b = eng.Big.from_config(1)\n"
        "    c = mypkg.engines.LLM()\n"
    )
    assert [(code, row, col) for code, row, col, _ in _found(source, config)] == [
        ("GPU001", 6, 9), ("GPU001", 7, 9)]


def test_a_process_target_through_an_attribute_launcher_is_isolated() -> None:
    source = (
        "import multiprocessing\nfrom vllm import LLM\n\n\n"
        "def run():\n    e = LLM('m')\n    del e\n\n\n"
        "def test_a():\n"
        "    multiprocessing.get_context('spawn').Process(target=run).start()\n\n\n"
        "def test_b():\n    e = LLM('m')\n"
    )
    assert _found(source) == [("GPU001", 15, 9, True)]


UNITTEST_ENV = (
    "import os\nimport unittest\n\n\n"
    "class TestEnv(unittest.TestCase):\n"
    "    def setUp(self):\n"
    "        os.environ['VLLM_A'] = '1'\n"
    "        os.environ['VLLM_B'] = '2'\n"
    "        os.environ.pop('VLLM_C', None)\n\n"
    "    def test_a(self):\n"
    "        os.environ['VLLM_D'] = '3'\n"
)


def test_unittest_changes_each_get_their_own_fix() -> None:
    # The changes of a module are found once; each change's plan still sees them all.
    assert _found(UNITTEST_ENV) == [("GPU008", 7, 9, True), ("GPU008", 8, 9, True),
                                    ("GPU008", 9, 9, True), ("GPU008", 12, 9, True)]


@pytest.mark.parametrize(("statement", "fixable"), [
    ("class MonkeyPatch:\n    pass", False),  # a class of the module named so
    ("print(MonkeyPatch)", False),  # a name it loads
    ("print(\uff2donkeyPatch)", False),  # the same name, NFKC-normalised as Python reads it
    ("print('\uff2d', MonkeyPatched)", True),  # non-ASCII, naming another
    ("print(MonkeyPatched)", True),
])
def test_a_module_naming_monkeypatch_keeps_the_unittest_fix_out(statement: str,
                                                               fixable: bool) -> None:
    source = UNITTEST_ENV + f"\n\n{statement}\n"
    assert [f for *_, f in _found(source)] == [fixable] * 4


def test_what_is_derived_from_an_analysis_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU008's mutations are found once per analysis, however many fixtures ask (the rule
    and the plan of each change), and each caller gets its own list; another analysis
    builds its own."""
    from lint_gpu_tests.analysis import env_mutations as env

    text = ("import os\n\nimport pytest\n\n\n@pytest.fixture\ndef a():\n"
            "    os.environ['VLLM_USE_V1'] = '1'\n    yield\n\n\n@pytest.fixture\ndef b():\n"
            "    os.environ['VLLM_USE_V1'] = '0'\n    yield\n\n\ndef test_x(a, b):\n    pass\n")
    calls: list[str] = []
    real = env._find_mutations

    def counted(module: ModuleAnalysis) -> list[env.EnvMutation]:
        calls.append(module.path)
        return real(module)

    monkeypatch.setattr(env, "_find_mutations", counted)
    module = ModuleAnalysis.build(ast.parse(text), text, "tests/test_env.py", Config())
    first, second = env.find_mutations(module), env.find_mutations(module)
    assert len(first) == 2 and first == second and first is not second
    assert [v.code for v in check_source(text.encode(), "tests/test_env.py", Config())] == \
        ["GPU008", "GPU008"]
    assert calls == ["tests/test_env.py", "tests/test_env.py"]  # this analysis, the check's

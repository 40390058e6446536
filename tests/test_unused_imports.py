"""``codemods._unused_imports``: the imports a rewrite left unused are removed exactly as
LibCST's ``RemoveImportsVisitor`` removes them, without its scope analysis where the text
decides, and by that visitor itself where it does not."""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor

from lint_gpu_tests.codemods import _unused_imports
from lint_gpu_tests.codemods._printer import Printer
from lint_gpu_tests.codemods._unused_imports import (
    Removal,
    has_nested_imports,
    names_outside_imports,
    remove_unused_imports,
)

CASES: list[tuple[str, str, list[Removal], bool]] = [
    ("plain import",
     "import gc\nimport os\n\nos.getcwd()\n", [("gc", None, None)], True),
    ("one name of a from-import",
     "from vllm import LLM, SamplingParams\n\nSamplingParams()\n", [("vllm", "LLM", None)],
     True),
    ("the last name of a from-import drops the trailing comma",
     "from vllm import SamplingParams, LLM\n\nSamplingParams()\n", [("vllm", "LLM", None)],
     True),
    ("parenthesised names with comments",
     "from vllm import (  # engine\n    LLM,  # the engine\n    SamplingParams,  # sampling\n)"
     "\n\nSamplingParams()\n", [("vllm", "LLM", None)], True),
    ("the first name with a comment, behind a parenthesis",
     "from vllm import (\n    LLM,  # the engine\n    SamplingParams,\n)\n\nSamplingParams()\n",
     [("vllm", "LLM", None)], True),
    ("every name of the statement",
     "import pytest\nfrom vllm.distributed import (cleanup_dist_env_and_memory,\n"
     "                              destroy_model_parallel)\n\npytest.fail()\n",
     [("vllm.distributed", "cleanup_dist_env_and_memory", None),
      ("vllm.distributed", "destroy_model_parallel", None)], True),
    ("an alias",
     "import torch as t\nimport gc as collector\n", [("gc", None, "collector")], True),
    ("an alias that does not match is kept",
     "import gc as collector\n", [("gc", None, None)], True),
    ("several modules on one line",
     "import gc, os, sys\n\nos.sep, sys.argv\n", [("gc", None, None)], True),
    ("the middle module of one line",
     "import os, gc, sys\n\nos.sep, sys.argv\n", [("gc", None, None)], True),
    ("an import inside a function",
     "def test():\n    import gc\n    return 1\n", [("gc", None, None)], True),
    ("imports in every kind of block",
     "try:\n    import gc\nexcept ImportError:\n    import gc\nelse:\n    import gc\n"
     "finally:\n    import gc\nif True:\n    import gc\nelif False:\n    import gc\nelse:\n"
     "    import gc\nfor _ in ():\n    import gc\nelse:\n    import gc\nwhile False:\n"
     "    import gc\nwith open(__file__):\n    import gc\nmatch 1:\n    case 1:\n"
     "        import gc\n\n\nclass C:\n    import gc\n\n    @staticmethod\n"
     "    def f():\n        async def g():\n            import gc\n",
     [("gc", None, None)], True),
    ("an import after a colon on the same line: LibCST decides",
     "if True: import gc\n", [("gc", None, None)], False),
    ("an import in an except-star handler",
     "try:\n    pass\nexcept* ValueError:\n    from gc import collect\n",
     [("gc", "collect", None)], True),
    ("a relative import is left as it is",
     "from .conftest import cleanup\n", [(".conftest", "cleanup", None)], True),
    ("a star import is left as it is",
     "from vllm import *\n", [("vllm", "LLM", None)], True),
    ("a name still read is kept (LibCST decides)",
     "import gc\n\ngc.collect()\n", [("gc", None, None)], False),
    ("a name in __all__ is kept (LibCST decides)",
     "from vllm import LLM\n\n__all__ = ['LLM']\n", [("vllm", "LLM", None)], False),
    ("a name in a string annotation is kept (LibCST decides)",
     "import torch\n\n\ndef f(x: 'torch.Tensor'):\n    return x\n",
     [("torch", None, None)], False),
    ("a name in a comment does not count",
     "import gc\n\n# gc is not needed\n", [("gc", None, None)], True),
    ("a name in a docstring's prose does not count",
     "from vllm import LLM\n\n\ndef test():\n    \"\"\"Build the LLM once.\"\"\"\n",
     [("vllm", "LLM", None)], True),
    ("an attribute of the same name is not the name",
     "from vllm import LLM\nimport vllm\n\nvllm.LLM\n", [("vllm", "LLM", None)], True),
    ("a name in an f-string is read (LibCST decides)",
     "import gc\n\nprint(f'{gc}')\n", [("gc", None, None)], False),
    ("a name in the literal text of an f-string does not count",
     "from vllm import LLM\n\nmode = 1\nprint(f'LLM(...) with {mode}')\n",
     [("vllm", "LLM", None)], True),
    ("a name in an f-string's format spec is read (LibCST decides)",
     "import gc\n\nprint(f'{1:>{gc}}')\n", [("gc", None, None)], False),
    ("a string naming it inside an f-string's field (LibCST decides)",
     "from vllm import LLM\n\nprint(f\"{'LLM'}\")\n", [("vllm", "LLM", None)], False),
    ("a name after an import on the same line is read (LibCST decides)",
     "import gc; gc.collect()\n", [("gc", None, None)], False),
    ("a dotted import: LibCST decides",
     "import vllm.distributed\n", [("vllm.distributed", None, None)], False),
    ("a local rebinding the name: LibCST decides",
     "import gc\n\n\ndef f():\n    gc = 1\n    return gc\n", [("gc", None, None)], False),
]


def _libcst(source: str, removals: list[Removal]) -> str:
    context = CodemodContext()
    for module, obj, asname in removals:
        RemoveImportsVisitor.remove_unused_import(context, module, obj, asname)
    return RemoveImportsVisitor(context).transform_module(cst.parse_module(source)).code


@pytest.mark.parametrize("with_printer", [False, True], ids=["tokens", "words"])
@pytest.mark.parametrize(("source", "removals", "by_text"),
                         [pytest.param(s, r, t, id=name) for name, s, r, t in CASES])
def test_removes_as_libcst_does(source: str, removals: list[Removal], by_text: bool,
                                with_printer: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The result is LibCST's, byte for byte; where the text decides, LibCST's visitor is
    not run at all. With the statements' printer (and the module's imports all at the top
    level), a name no other statement holds as a word needs no tokenizing either."""
    calls: list[object] = []
    real = RemoveImportsVisitor.transform_module

    def counted(self: RemoveImportsVisitor, tree: cst.Module) -> cst.Module:
        calls.append(tree)
        return real(self, tree)

    monkeypatch.setattr(RemoveImportsVisitor, "transform_module", counted)
    options: dict[str, Any] = {}
    if with_printer:
        options = {"nested": has_nested_imports(ast.parse(source)), "printer": Printer()}
    got = remove_unused_imports(cst.parse_module(source), removals, None, **options).code
    monkeypatch.setattr(RemoveImportsVisitor, "transform_module", real)
    assert got == _libcst(source, removals)
    assert (not calls) is by_text


def test_exact_edits() -> None:
    """The edits themselves, not only their agreement with LibCST (which, like it, drops
    the comment on the removed alias's own line)."""
    source = ("import gc, os\nfrom vllm import (\n    LLM,  # the engine\n"
              "    SamplingParams,\n)\n\nos.sep, SamplingParams\n")
    got = remove_unused_imports(cst.parse_module(source),
                                [("gc", None, None), ("vllm", "LLM", None)],
                                None).code
    assert got == ("import os\nfrom vllm import (\n    SamplingParams,\n)\n\n"
                   "os.sep, SamplingParams\n")


def test_words_decide_without_tokenizing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The removed names in no statement but lines of imports (a comment below the code is
    the module's footer): no tokenizing, no LibCST visitor, imports nested or not. A name in
    a statement (even a comment inside a function) leaves it to the tokens."""
    def refuse(*args: object) -> bool:
        raise AssertionError("tokenized")

    monkeypatch.setattr(_unused_imports, "_unused_by_text", refuse)
    source = "import gc\nimport os\n\n\ndef f():\n    return os.sep\n# gc\n"
    got = remove_unused_imports(cst.parse_module(source), [("gc", None, None)], None,
                                nested=False, printer=Printer())
    assert got.code == "import os\n\n\ndef f():\n    return os.sep\n# gc\n"
    nested = "import gc\n\n\ndef f():\n    import os\n    return os.sep\n"
    got = remove_unused_imports(cst.parse_module(nested), [("gc", None, None)], None,
                                nested=True, printer=Printer())
    assert got.code == "\n\ndef f():\n    import os\n    return os.sep\n"
    tree = cst.parse_module("import gc\n\n\ndef f():\n    # gc\n    return 1\n")
    with pytest.raises(AssertionError, match="tokenized"):
        remove_unused_imports(tree, [("gc", None, None)], None, nested=False,
                              printer=Printer())
    assert names_outside_imports(tree, {"gc", "os"}, Printer()) == {"gc"}
    assert has_nested_imports(ast.parse("if x:\n    import gc\n"))
    assert not has_nested_imports(ast.parse("import gc\nif x:\n    pass\n"))


def test_nothing_to_remove_returns_the_tree() -> None:
    tree = cst.parse_module("import gc\n")
    assert remove_unused_imports(tree, [], None) is tree


def test_text_check_after_non_ascii_text() -> None:
    """An import after non-ASCII text on its line is skipped, and a use after it is still
    seen."""
    assert not _unused_by_text("x = 'é'; import gc; gc.collect()\n", [("gc", None, None)])
    assert _unused_by_text("x = 'é'; import gc\n", [("gc", None, None)])


_unused_by_text = _unused_imports._unused_by_text  # noqa: SLF001 - the decision itself

"""Imports the fix writes: where it looks for vLLM's own tree (``vllm`` first-party), and the
order of names merged into an existing ``from`` import."""

from __future__ import annotations

from pathlib import Path

import pytest

from lint_gpu_tests.codemods._imports import first_party_packages, type_order
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source


def _package(directory: Path) -> None:
    (directory / "vllm").mkdir(parents=True)
    (directory / "vllm" / "__init__.py").write_text("")


def test_vllm_tree_found_above_the_file(tmp_path: Path) -> None:
    repo = tmp_path / "vllm-repo"
    _package(repo)
    (repo / "pyproject.toml").write_text("")
    (repo / "tests" / "models").mkdir(parents=True)
    path = repo / "tests" / "models" / "test_x.py"
    assert first_party_packages(str(path), str(tmp_path / "elsewhere")) == {"vllm"}


def test_vllm_checkout_next_to_a_plugin_does_not_count(tmp_path: Path) -> None:
    _package(tmp_path)  # e.g. ~/vllm cloned next to ~/vllm-ascend
    plugin = tmp_path / "vllm-ascend"
    (plugin / "tests").mkdir(parents=True)
    (plugin / ".git").mkdir()
    path = plugin / "tests" / "test_x.py"
    assert first_party_packages(str(path), str(plugin)) == frozenset()


def test_configuration_root_counts(tmp_path: Path) -> None:
    _package(tmp_path / "root")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "setup.cfg").write_text("")
    path = tmp_path / "proj" / "test_x.py"
    assert first_party_packages(str(path), str(tmp_path / "root")) == {"vllm"}


ISOLATE_BEFORE = b'''import gc

from lint_gpu_tests.runtime import VllmRunner
from vllm import LLM


def test_a():
    llm = LLM("m")
    assert llm.generate(["a"])
    del llm
    gc.collect()


def test_b():
    with VllmRunner("m") as r:
        assert r.llm.generate(["a"])
'''


def test_a_name_merged_into_a_from_import_keeps_ruffs_order() -> None:
    """A name added to an existing ``from ... import`` lands where ruff's isort rule
    (``order-by-type``) wants it: classes before functions."""
    outcome = fix_source(ISOLATE_BEFORE, "tests/test_iso.py",
                         Config(fix_strategy="isolate"), unsafe=True)
    assert outcome.new_source is not None
    assert outcome.new_source.decode().splitlines()[:4] == [
        "from lint_gpu_tests.runtime import VllmRunner, create_new_process_for_each_test",
        "from vllm import LLM",
        "",
        "",
    ]


def test_type_order() -> None:
    assert sorted(["create", "VllmRunner", "MAX_LEN", "Any", "b"], key=type_order) == [
        "MAX_LEN", "Any", "VllmRunner", "b", "create"]


BODY = ('from types import SimpleNamespace\n\nfrom vllm import LLM\n\n\ndef test_one():\n'
        '    llm = LLM("m")\n    assert llm.generate(["x"]) and SimpleNamespace()\n'
        '    del llm\n    gc.collect()\n')
FIXED_BODY = ('import weakref\nfrom types import SimpleNamespace\n\n\n'
              'def test_one(vllm_runner):\n    with vllm_runner("m") as runner:\n'
              '        llm = weakref.proxy(runner.llm)\n'
              '        assert llm.generate(["x"]) and SimpleNamespace()\n')


@pytest.mark.parametrize("head", ["from __future__ import annotations\n\n", '"""Doc."""\n\n',
                                  ""], ids=["future", "docstring", "none"])
def test_a_new_import_takes_the_place_of_the_one_removed_above_its_section(head: str) -> None:
    """``import gc`` removed and ``import weakref`` added in the same stdlib section: the
    blank line above the section stays above it, none comes inside it."""
    outcome = fix_source((head + "import gc\n" + BODY).encode(), "tests/test_x.py", Config())
    assert outcome.error is None and outcome.new_source is not None
    assert outcome.new_source.decode() == head + FIXED_BODY


SPLIT_BY_ENVIRONMENT = '''\
import json
import os

os.environ["VLLM_USE_V1"] = "1"

import pytest
from vllm import LLM


@pytest.fixture(scope="module")
def llm():
    engine = LLM("m")
    yield engine


def test_one(llm):
    assert llm.generate([json.dumps({})])
'''


def test_a_new_import_joins_the_block_after_the_code_it_follows() -> None:
    """A top block of the standard library only, then a module-level environment write and
    the third-party imports it must precede: the bundled runner the module-scoped fixture
    enters (the first pass) joins the third-party block, in ruff's order, not a section of
    its own that the next pass, moving the write into a fixture, would leave split from
    it."""
    outcome = fix_source(SPLIT_BY_ENVIRONMENT.encode(), "tests/test_x.py", Config(),
                         unsafe=True)
    assert outcome.error is None and outcome.new_source is not None
    assert outcome.new_source.decode().startswith(
        "import json\nimport weakref\n\nimport pytest\n"
        "from lint_gpu_tests.runtime import VllmRunner\n\n\n")


def test_a_plain_import_opens_the_first_third_party_section() -> None:
    """The third-party section ends at a blank line (the next one is another section to the
    module's author, first-party to ruff): ``import pytest`` goes before its ``from``
    imports, not at the end of the section before that blank line."""
    source = ('import os\n\nos.environ.setdefault("VLLM_X", "0")\n\n'
              'from vllm import SamplingParams  # noqa: E402\n\n'
              'import vllm_plugin.envs as envs  # noqa: E402\n\n\n'
              'def test_x():\n    assert envs and SamplingParams\n')
    outcome = fix_source(source.encode(), "tests/test_x.py", Config(), unsafe=True)
    assert outcome.new_source is not None
    assert outcome.new_source.decode().startswith(
        'import os\n\nimport pytest\nfrom vllm import SamplingParams  # noqa: E402\n\n'
        'import vllm_plugin.envs as envs  # noqa: E402\n')


def test_the_blank_line_after_a_functions_imports_stays() -> None:
    """``llm = None`` removed right after a function's imports, with the blank line above
    it: the next statement takes that blank line (ruff format keeps one after imports)."""
    source = ('import gc\n\nimport pytest\n\n\ndef test_x():\n'
              '    from vllm import LLM, SamplingParams\n\n    llm = None\n'
              '    context = pytest.MonkeyPatch.context()\n    try:\n'
              '        with context as mp:\n            mp.setenv("VLLM_X", "0")\n'
              '            llm = LLM("m")\n'
              '            outputs = llm.generate(["a"], SamplingParams())\n'
              '            assert outputs\n    finally:\n        del llm\n'
              '        gc.collect()\n        reset()\n')
    outcome = fix_source(source.encode(), "tests/test_x.py", Config())
    assert outcome.new_source is not None
    fixed = outcome.new_source.decode()
    assert "    from vllm import SamplingParams\n\n    context = pytest" in fixed
    assert "llm = None" not in fixed


def test_a_removed_imports_comment_keeps_one_blank_line_below_it() -> None:
    """``import os`` removed from under a file-wide comment, a blank line on each side of
    it: the comment moves onto the next import with one blank line between them, not two
    (ruff format leaves one)."""
    source = ('"""Doc."""\n\n# ruff: noqa: E501\n\nimport os\n\nimport pytest\n\n'
              'os.environ["VLLM_X"] = "2"\n\n\ndef test_x():\n    assert pytest\n')
    outcome = fix_source(source.encode(), "tests/test_x.py", Config(), unsafe=True)
    assert outcome.new_source is not None
    assert outcome.new_source.decode().startswith(
        '"""Doc."""\n\n# ruff: noqa: E501\n\nimport pytest\n\n\n@pytest.fixture(')

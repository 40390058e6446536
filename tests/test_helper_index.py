"""Engine helpers of other modules of the tree (``lint_gpu_tests/checking/helper_index.py``): the
trees under ``tests/fixtures/xmodule/`` (described in its ``README.md``) checked whole, each
report's code, position and withheld fix's reason; the prefilter, the cost for modules that
import no helper, and the summaries kept in the result cache."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lint_gpu_tests.api import check_paths
from lint_gpu_tests.checking import conftest_index, helper_index
from lint_gpu_tests.checking.helper_index import STATUS_KEY
from lint_gpu_tests.config import Config

TREES = Path(__file__).parent / "fixtures" / "xmodule"

HELD = ("the engine is held on `self.llm` of `EngineHelper`, defined in `tests/common.py` "
        "(line 4): a class of another module, and no fix rewrites a class of another "
        "module together with its users yet")


#: A unit across modules with a caller that cannot be rewritten
#: (``lint_gpu_tests/fixing/tree_units.py``): every violation it would cover says why, naming it.
NO_UNIT = ("the engine comes from `{name}()`, defined in `{where}` (line 4): a helper of "
           "another module that builds and returns it, and its fix with every call of it in "
           "the tree has none: {why}")
TWO_AT_ONCE = ("in `{module}`, the calls of `{name}()` in `{function}()` (lines {a} and {b}) "
               "give engines alive together: the fix writes one with-block per call, and "
               "the first block would have to hold the second call (no fix nests a "
               "factory's blocks yet)")
LORA = NO_UNIT.format(name="setup_engine", where="tests/utils.py", why=TWO_AT_ONCE.format(
    module="tests/lora/test_lora.py", name="setup_engine", function="test_two_at_once", a=36,
    b=37))
CONFTEST_WHY = TWO_AT_ONCE.format(module="tests/test_uses_conftest.py", name="new_llm",
                                  function="test_three", a=7, b=8)

#: ``None``: the violation's fix is the unit's (its reason empty: safe).
EXPECTED: dict[str, list[tuple[str, int, int, str, str | None]]] = {
    # A call of a helper of a module out of the rules' scope (`tests/utils.py`) is the
    # engine's construction: GPU001 there, with the unit's fix (or its reason).
    "absolute": [
        ("tests/lora/test_lora.py", 9, 11, "GPU001", LORA),
        ("tests/lora/test_lora.py", 10, 5, "GPU003", LORA),
        ("tests/lora/test_lora.py", 20, 5, "GPU003", LORA),
        ("tests/lora/test_lora.py", 21, 15, "GPU001", LORA),
        ("tests/lora/test_lora.py", 29, 11, "GPU001", LORA),
        ("tests/lora/test_lora.py", 31, 5, "GPU004", LORA),
        ("tests/lora/test_lora.py", 32, 5, "GPU004", LORA),
        ("tests/lora/test_lora.py", 36, 13, "GPU001", LORA),
        ("tests/lora/test_lora.py", 37, 14, "GPU001", LORA),
        ("tests/lora/test_lora.py", 37, 14, "GPU007", None),
    ],
    "relative": [
        ("tests/entrypoints/llm/test_generate.py", 9, 11, "GPU001", None),
        ("tests/entrypoints/llm/test_generate.py", 11, 5, "GPU004", None),
        ("tests/entrypoints/llm/test_generate.py", 15, 11, "GPU001", None),
        ("tests/entrypoints/llm/test_generate.py", 17, 5, "GPU004", None),
        ("tests/entrypoints/llm/test_generate.py", 21, 11, "GPU001", None),
        ("tests/entrypoints/llm/test_generate.py", 22, 5, "GPU003", None),
    ],
    "rootdir": [
        ("tests/test_spec.py", 8, 11, "GPU001", None),
        ("tests/test_spec.py", 11, 5, "GPU004", None),
        ("tests/test_spec.py", 12, 5, "GPU004", None),
        ("tests/test_spec.py", 13, 5, "GPU004", None),
    ],
    "bare": [
        ("tests/e2e/test_deep.py", 7, 11, "GPU001", None),
        ("tests/e2e/test_deep.py", 9, 5, "GPU004", None),
        ("tests/e2e/test_deep.py", 10, 5, "GPU004", None),
    ],
    "reexport": [
        ("tests/test_reexport.py", 7, 11, "GPU001", None),
        ("tests/test_reexport.py", 9, 5, "GPU004", None),
        ("tests/test_reexport.py", 13, 11, "GPU001", None),
        ("tests/test_reexport.py", 15, 5, "GPU004", None),
    ],
    "helper_class": [
        ("tests/models/test_scores.py", 10, 5, "GPU004", HELD),
        ("tests/models/test_scores.py", 11, 5, "GPU004", HELD),
        ("tests/models/test_scores.py", 12, 5, "GPU004", HELD),
        ("tests/models/test_scores.py", 17, 5, "GPU003", HELD),
    ],
    "conftest_helper": [
        ("tests/conftest.py", 5, 12, "GPU001", CONFTEST_WHY),
        ("tests/test_uses_conftest.py", 9, 9, "GPU007", None),
        ("tests/test_uses_conftest.py", 11, 5, "GPU004", NO_UNIT.format(
            name="new_llm", where="tests/conftest.py", why=CONFTEST_WHY)),
        ("tests/test_uses_conftest.py", 12, 5, "GPU004", NO_UNIT.format(
            name="new_llm", where="tests/conftest.py", why=CONFTEST_WHY)),
    ],
    "reads_only": [],
    # ``_embed`` and ``_score`` run as their own processes through a launcher helper of
    # another module (imported relatively, and as a module); ``_in_this_process`` does not.
    "launcher": [
        ("tests/models/test_embed.py", 22, 11, "GPU001", None),
    ],
}


def _reports(root: Path, **changes: object) -> list[tuple[str, int, int, str, str | None]]:
    result = check_paths([str(root / "tests")], Config(root=str(root)), jobs=1, **changes)
    return [(Path(v.path).relative_to(root).as_posix(), v.location.row, v.location.column,
             v.code, (v.fix.reason or None) if v.fix is not None else None)
            for v in result.violations]


@pytest.fixture
def tree(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A copy of one fixture tree (the repository's config excludes the fixtures)."""
    root = tmp_path / request.param
    shutil.copytree(TREES / request.param, root)
    return root


@pytest.mark.parametrize("tree", sorted(EXPECTED), indirect=True)
def test_each_tree_reports_exactly(tree: Path) -> None:
    assert _reports(tree, cache=False) == EXPECTED[tree.name]


def test_the_trees_are_all_checked() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in TREES.iterdir() if p.is_dir())


def test_gpu007_names_the_helper_calls(tmp_path: Path) -> None:
    root = tmp_path / "absolute"
    shutil.copytree(TREES / "absolute", root)
    result = check_paths([str(root / "tests")], Config(root=str(root)), jobs=1, cache=False)
    [gpu007] = [v for v in result.violations if v.code == "GPU007"]
    assert gpu007.message == (
        "2 engines alive at once ask for more than the device: `setup_engine(...)` line 36: "
        "0.6, `setup_engine(...)` line 37: 0.6; sum 1.2 > 1.0")


def test_a_module_that_imports_no_helper_is_not_parsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefilter lets a module through by a helper's name in a module that imports, and
    only then: a module that names no engine and no imported helper is not parsed; only the
    helper's module is summarised."""
    root = tmp_path / "absolute"
    shutil.copytree(TREES / "absolute", root)
    (root / "tests" / "test_kernel.py").write_text(
        "import torch\n\n\ndef test_add():\n    assert torch.ones(1).sum() == 1\n")
    # Names a helper but imports nothing: it cannot call the helper of another module.
    (root / "tests" / "test_same_name.py").write_text(
        "def test_name():\n    setup_engine = 1\n    assert setup_engine\n")
    from lint_gpu_tests.running import run as run_module

    checked: list[str] = []
    real = run_module.check_module

    def record(source: bytes, path: str, config: Config, conftests: object = None) -> object:
        checked.append(Path(path).name)
        return real(source, path, config, conftests)  # type: ignore[arg-type]

    monkeypatch.setattr(run_module, "check_module", record)
    summarised: list[str] = []
    real_summarise = helper_index.summarise

    def summarise(source: bytes, path: str, config: Config) -> tuple[str, ...]:
        summarised.append(Path(path).name)
        return real_summarise(source, path, config)

    monkeypatch.setattr(conftest_index, "summarise", summarise)
    _reports(root, cache=False)
    assert sorted(checked) == ["test_lora.py", "utils.py"]
    assert summarised == ["utils.py"]


def test_summaries_are_kept_in_the_cache_and_a_helper_change_invalidates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "rootdir"
    shutil.copytree(TREES / "rootdir", root)
    cache = tmp_path / "cache"
    old = 10**9 * 1_000_000  # long before the racy window: kept by their status
    for path in root.rglob("*.py"):
        os.utime(path, ns=(old, old))
    assert _reports(root, cache_dir=str(cache)) == EXPECTED["rootdir"]
    [file] = list(cache.glob("*/*.json"))
    kept = {k: v for k, v in json.loads(file.read_text())["conftests"].items()
            if k.startswith(STATUS_KEY)}
    utils = str(root / "tests" / "utils.py")
    assert kept[next(k for k in kept if k.startswith(f"{STATUS_KEY}{utils}:"))] == [
        "f|make_llm|4||"]
    assert any(k.startswith(f"{STATUS_KEY}tree:") for k in kept)
    # A test module's entry keys on the helpers' entries by their hash, not their text.
    assert "engine-helper:" not in file.read_text()

    summarised: list[str] = []

    def summarise(source: bytes, path: str, config: Config) -> tuple[str, ...]:
        summarised.append(Path(path).name)
        return ()

    monkeypatch.setattr(conftest_index, "summarise", summarise)
    assert _reports(root, cache_dir=str(cache)) == EXPECTED["rootdir"]
    assert summarised == []  # the warm run reads the tree's record

    monkeypatch.undo()
    helper = root / "tests" / "utils.py"
    helper.write_text(helper.read_text().replace("return vllm.LLM", "return dict"))
    assert _reports(root, cache_dir=str(cache)) == []

"""The fix of a unit across modules (``lint_gpu_tests/fixing/tree_units.py``) as edits in
JSON and SARIF output (``lint_gpu_tests/fixing/unit_edits.py``): every violation the unit
removes carries the whole fix, its own file's edits in ``edits`` (SARIF: its artifact's
change first) and the other files' in ``other_files`` (SARIF: one ``artifactChange`` each);
the edits of every fix applied to the files as they were give exactly what ``check --fix``
writes, on the trees of ``tests/fixtures/xmodule/`` and ``tests/fixtures/xunit/`` and the e2e
corpus's ``xunit/`` folder (each run on a copy)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lint_gpu_tests.interfaces import cli

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS_XUNIT = Path(__file__).parent / "e2e" / "suites" / "xunit"

# (tree, the folder checked in it, files --fix changes without and with --unsafe-fixes)
TREES = [
    (FIXTURES / "xmodule" / "reexport", "tests", 2, 2),
    (FIXTURES / "xmodule" / "relative", "tests", 2, 2),
    (FIXTURES / "xmodule" / "rootdir", "tests", 2, 2),
    (FIXTURES / "xmodule" / "absolute", "tests", 0, 0),
    (FIXTURES / "xmodule" / "conftest_helper", "tests", 0, 0),
    (FIXTURES / "xunit" / "unit", "tests", 3, 3),
    (FIXTURES / "xunit" / "beside", "tests", 2, 2),
    (FIXTURES / "xunit" / "unsafe", "tests", 0, 3),
    (FIXTURES / "xunit" / "value_use", "tests", 0, 0),
    (CORPUS_XUNIT, ".", 3, 3),
]

# A caller of the corpus's helper that has fixes of its own besides the unit's.
OWN_ENGINE = '''

def test_own_engine():
    from vllm import LLM

    llm = LLM("facebook/opt-125m")
    assert llm.generate("x")
    del llm
'''


def _cli(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.chdir(root)
    return CliRunner().invoke(cli.cli, ["check", "--no-cache", *args],
                              catch_exceptions=False).output


def _offset(lines: list[str], location: dict[str, int]) -> int:
    return sum(len(line) for line in lines[:location["row"] - 1]) + location["column"] - 1


def _applied(root: Path, fixes: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, bytes]:
    """Every ``.py`` file of ``root`` with the edits of ``fixes`` (``(filename, edits)``)
    applied, a fix repeated on several violations applied once (as ruff applies one fix
    shared by several diagnostics); edits of one file must not overlap."""
    per_file: dict[str, set[tuple[str, int, int, int, int]]] = {}
    for filename, edits in fixes:
        for e in edits:
            per_file.setdefault(filename, set()).add(
                (e["content"], e["location"]["row"], e["location"]["column"],
                 e["end_location"]["row"], e["end_location"]["column"]))
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        spans = sorted(((_offset(lines, {"row": r, "column": c}),
                         _offset(lines, {"row": er, "column": ec}), content)
                        for content, r, c, er, ec in per_file.get(str(path), ())),
                       reverse=True)
        for (_, end, _), (next_start, _, _) in zip(spans[1:], spans, strict=False):
            assert end <= next_start, f"overlapping edits in {path}"
        for start, end, content in spans:
            text = text[:start] + content + text[end:]
        out[path.relative_to(root).as_posix()] = text.encode("utf-8")
    return out


def _json_fixes(report: str) -> list[tuple[str, list[dict[str, Any]]]]:
    fixes: list[tuple[str, list[dict[str, Any]]]] = []
    for v in json.loads(report):
        if v["fix"] is not None:
            fixes.append((v["filename"], v["fix"]["edits"]))
            fixes += [(o["filename"], o["edits"]) for o in v["fix"].get("other_files", [])]
    return fixes


def _sarif_fixes(report: str, root: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    fixes: list[tuple[str, list[dict[str, Any]]]] = []
    for result in json.loads(report)["runs"][0]["results"]:
        for fix in result.get("fixes", []):
            for change in fix["artifactChanges"]:
                assert change["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
                fixes.append((str(root / change["artifactLocation"]["uri"]), [
                    {"content": r["insertedContent"]["text"],
                     "location": {"row": r["deletedRegion"]["startLine"],
                                  "column": r["deletedRegion"]["startColumn"]},
                     "end_location": {"row": r["deletedRegion"]["endLine"],
                                      "column": r["deletedRegion"]["endColumn"]}}
                    for r in change["replacements"]]))
    return fixes


def _copy(tmp_path: Path, tree: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(tree, root)
    (root / ".git").mkdir()  # SARIF URIs relative to the copy
    return root


def _sources(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def _check_edits_give_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree: Path,
                              folder: str, unsafe: tuple[str, ...]) -> int:
    """Assert that the JSON and the SARIF edits give what --fix writes; the number of files
    --fix changed."""
    shown = _copy(tmp_path, tree, "shown")
    before = _sources(shown)
    report = _cli(shown, monkeypatch, "--output-format", "json", *unsafe, folder)
    sarif = _cli(shown, monkeypatch, "--output-format", "sarif", *unsafe, folder)
    assert _sources(shown) == before  # nothing written
    fixed = _copy(tmp_path, tree, "fixed")
    _cli(fixed, monkeypatch, "--fix", *unsafe, folder)
    after = _sources(fixed)
    assert _applied(shown, _json_fixes(report)) == after
    assert _applied(shown, _sarif_fixes(sarif, shown)) == after
    return sum(after[name] != before[name] for name in before)


@pytest.mark.parametrize("unsafe", [(), ("--unsafe-fixes",)], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("tree", "folder", "safe_files", "unsafe_files"), TREES,
                         ids=lambda t: t.name if isinstance(t, Path) else None)
def test_the_edits_of_every_fix_give_what_fix_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree: Path, folder: str,
        safe_files: int, unsafe_files: int, unsafe: tuple[str, ...]) -> None:
    changed = _check_edits_give_the_fix(tmp_path, monkeypatch, tree, folder, unsafe)
    assert changed == (unsafe_files if unsafe else safe_files)


@pytest.mark.parametrize("unsafe", [(), ("--unsafe-fixes",)], ids=["safe", "unsafe"])
def test_a_caller_with_fixes_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        unsafe: tuple[str, ...]) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(CORPUS_XUNIT, tree)
    with (tree / "test_xunit_cleanup.py").open("a") as f:
        f.write(OWN_ENGINE)
    assert _check_edits_give_the_fix(tmp_path, monkeypatch, tree, ".", unsafe) == 3


UNIT_TITLE = ("Make `setup_engine()` a `contextlib.contextmanager` over `VllmRunner` and call "
              "it in `with` statements")


def test_every_violation_of_the_unit_carries_its_whole_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy(tmp_path, CORPUS_XUNIT, "xunit")
    reported = json.loads(_cli(root, monkeypatch, "--output-format", "json", "."))
    cleanup, shutdown, helpers = (str(root / name) for name in (
        "test_xunit_cleanup.py", "test_xunit_shutdown.py", "engine_helpers.py"))
    assert [(v["filename"], v["location"]["row"], v["code"], v["fix"]["applicability"],
             v["fix"]["message"], [o["filename"] for o in v["fix"]["other_files"]])
            for v in reported] == [
        # The call of the helper (its module is out of the rules' scope) builds the engine.
        (cleanup, 10, "GPU001", "safe", UNIT_TITLE, [helpers, shutdown]),
        (cleanup, 12, "GPU004", "safe", "Remove the manual cleanup", [helpers, shutdown]),
        (cleanup, 13, "GPU004", "safe", "Remove the manual cleanup", [helpers, shutdown]),
        (shutdown, 10, "GPU001", "safe", UNIT_TITLE, [helpers, cleanup]),
        (shutdown, 11, "GPU003", "safe", "Remove the finalizer (part of the GPU001 rewrite)",
         [helpers, cleanup]),
        (shutdown, 20, "GPU001", "safe", UNIT_TITLE, [helpers, cleanup]),
        (shutdown, 22, "GPU004", "safe", "Remove the manual cleanup", [helpers, cleanup]),
    ]
    # One fix: the same edits of each file, wherever it is reported.
    edits = {v["filename"]: v["fix"]["edits"] for v in reported}
    edits[helpers] = reported[0]["fix"]["other_files"][0]["edits"]
    for v in reported:
        assert v["fix"]["edits"] == edits[v["filename"]]
        assert [(o["filename"], o["edits"]) for o in v["fix"]["other_files"]] == [
            (name, edits[name]) for name in (helpers, cleanup, shutdown)
            if name != v["filename"]]
    assert edits[cleanup] == [
        {"content": "", "end_location": {"column": 1, "row": 5},
         "location": {"column": 1, "row": 3}},
        {"content": "    with engine_helpers.setup_engine(seed=2) as llm:\n"
                    "        texts = engine_helpers.texts_of(llm, engine_helpers.PROMPTS[:1], "
                    "max_tokens=4)\n        assert texts\n",
         "end_location": {"column": 1, "row": 15}, "location": {"column": 1, "row": 10}}]
    sarif = json.loads(_cli(root, monkeypatch, "--output-format", "sarif", "."))
    changes = sarif["runs"][0]["results"][0]["fixes"][0]["artifactChanges"]
    assert [c["artifactLocation"] for c in changes] == [
        {"uri": name, "uriBaseId": "%SRCROOT%"} for name in (
            "test_xunit_cleanup.py", "engine_helpers.py", "test_xunit_shutdown.py")]


def test_an_unsafe_unit_shows_its_edits_only_with_unsafe_fixes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy(tmp_path, FIXTURES / "xunit" / "unsafe", "unsafe")
    plain = json.loads(_cli(root, monkeypatch, "--output-format", "json", "tests"))
    shown = json.loads(_cli(root, monkeypatch, "--output-format", "json", "--unsafe-fixes",
                            "tests"))
    unit = [v for v in plain if v["fix"] is not None and v["fix"]["applicability"] == "unsafe"]
    assert unit and all(v["fix"]["edits"] == [] and "other_files" not in v["fix"]
                        for v in unit)
    assert [v["fix"]["applicability"] for v in shown if v["fix"] is not None] == \
        [v["fix"]["applicability"] for v in plain if v["fix"] is not None]
    assert all(v["fix"]["edits"] and v["fix"]["other_files"] for v in shown
               if v["fix"] is not None and v["fix"]["applicability"] == "unsafe")

"""``prove``'s comparison, verdicts and reports on made-up records (no engine, no pytest
session): what differs, how texts are compared per sampling kind, leaks, and the report in
text, JSON and SARIF."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lint_gpu_tests.prove import Difference, ProveResult, Status, compare, judge
from lint_gpu_tests.prove.compare import ModuleResult, outcome_only
from lint_gpu_tests.prove.pipeline import (
    changed_files,
    copy_tree,
    module_helpers,
    modules_to_run,
)
from lint_gpu_tests.prove.report import render_json, render_sarif, render_text
from lint_gpu_tests.prove.schedule import Job, run_jobs
from lint_gpu_tests.prove.store import Store, helpers_of, key_of, recording_inputs

ENGINE = {"model": "m", "max_model_len": 32, "dtype": "float32"}


def rec(outcome: str = "passed", *, engines: list[dict[str, Any]] | None = None,
        texts: list[list[str]] | None = None, sampling: list[str] | None = None,
        leaked: int = 0) -> dict[str, Any]:
    texts = texts or []
    return {"outcome": outcome, "engines": engines if engines is not None else [ENGINE],
            "texts": texts, "sampling": sampling if sampling is not None
            else ["greedy"] * len(texts), "cores_at_start": leaked, "leaked_at_start": leaked,
            "cores_peak": leaked + 1}


def test_the_same_records_are_the_same() -> None:
    before = {"t.py::a": rec(texts=[["x"]]), "t.py::b": rec("skipped", engines=[])}
    verdict = judge("t.py", before, json.loads(json.dumps(before)))
    assert (verdict.status, verdict.differences, verdict.tests) == (
        Status.SAME, [], ["t.py::a", "t.py::b"])


def test_each_field_that_differs_is_one_difference() -> None:
    before = {"t.py::a": rec(texts=[["x"]]), "t.py::gone": rec()}
    after = {"t.py::a": rec("failed", engines=[{**ENGINE, "max_model_len": 16}],
                            texts=[["y"]]),
             "t.py::new": rec()}
    assert compare(before, after) == [
        Difference("t.py::a", "outcome", "passed", "failed"),
        Difference("t.py::a", "engines", [ENGINE], [{**ENGINE, "max_model_len": 16}]),
        Difference("t.py::a", "texts", [["x"]], [["y"]]),
        Difference("t.py::gone", "present", True, False),
        Difference("t.py::new", "present", False, True),
    ]
    assert judge("t.py", before, after).status is Status.DIFFERS


def test_random_sampling_is_compared_by_outcome_only_in_auto() -> None:
    before = {"t.py::a": rec(texts=[["x"], ["r1"]], sampling=["greedy", "random"])}
    after = {"t.py::a": rec(texts=[["x"], ["r2"]], sampling=["greedy", "random"])}
    assert compare(before, after) == []
    assert outcome_only(before, after) == ["t.py::a"]
    # exact compares every call; outcome compares none
    assert compare(before, after, texts="exact") == [
        Difference("t.py::a", "texts", [["x"], ["r1"]], [["x"], ["r2"]])]
    assert compare(before, after, texts="outcome") == []
    # a random call with a different number of texts still differs
    fewer = {"t.py::a": rec(texts=[["x"], []], sampling=["greedy", "random"])}
    assert [d.field for d in compare(before, fewer)] == ["texts"]


def test_greedy_and_seeded_texts_are_compared_exactly_in_auto() -> None:
    for kind in ("greedy", "seeded"):
        before = {"t.py::a": rec(texts=[["x"]], sampling=[kind])}
        after = {"t.py::a": rec(texts=[["z"]], sampling=[kind])}
        assert [d.field for d in compare(before, after)] == ["texts"]
        assert outcome_only(before, after) == []


def test_a_leak_after_the_fix_differs_only_when_worse_unless_strict() -> None:
    before = {"t.py::a": rec(), "t.py::b": rec(leaked=1)}
    same_leak = {"t.py::a": rec(), "t.py::b": rec(leaked=1)}
    assert compare(before, same_leak) == []
    assert compare(before, same_leak, strict_leaks=True) == [
        Difference("t.py::b", "leaked_at_start", 1, 1)]
    worse = {"t.py::a": rec(leaked=1), "t.py::b": rec(leaked=1)}
    assert compare(before, worse) == [Difference("t.py::a", "leaked_at_start", 0, 1)]


def test_a_leak_the_fix_ends_is_its_own_verdict() -> None:
    before = {"t.py::a": rec(), "t.py::b": rec(leaked=1)}
    after = {"t.py::a": rec(), "t.py::b": rec()}
    verdict = judge("t.py", before, after)
    assert (verdict.status, verdict.leaked_before, verdict.leaked_after) == (
        Status.LEAK_FIXED, ["t.py::b"], [])
    assert verdict.status.proven


def test_difference_lines() -> None:
    assert Difference("t.py::a", "outcome", "passed", "failed").describe() == \
        "t.py::a: outcome: 'passed' before, 'failed' after"
    assert Difference("t.py::a", "engines", [ENGINE, ENGINE],
                      [ENGINE, {**ENGINE, "dtype": "bfloat16"}]).describe() == \
        "t.py::a: engine 2 dtype: 'float32' before, 'bfloat16' after"
    assert Difference("t.py::a", "engines", [], [ENGINE]).describe() == \
        f"t.py::a: engines: [] before, [{ENGINE!r}] after"
    assert Difference("t.py::a", "present", True, False).describe() == \
        "t.py::a: missing in the fixed module's run"
    assert Difference("t.py::a", "leaked_at_start", None, 2).describe() == \
        "t.py::a: starts with 2 engine(s) alive that nothing holds after the fix (0 before)"


def _result() -> ProveResult:
    same = judge("tests/test_a.py", {"tests/test_a.py::t": rec()},
                 {"tests/test_a.py::t": rec()})
    same.seconds, same.from_recordings = 3.25, ["before"]
    differs = judge("tests/test_b.py", {"tests/test_b.py::t": rec(),
                                        "tests/test_b.py::u": rec("error", engines=[])},
                    {"tests/test_b.py::t": rec("failed"),
                     "tests/test_b.py::u": rec("error", engines=[])})
    differs.seconds = 4.0
    differs.rerun = "differs when first run (1 difference(s))"
    differs.commands = {"before": "cd /w/before && pytest tests/test_b.py"}
    fixed = judge("tests/test_c.py", {"tests/test_c.py::t": rec(leaked=1)},
                  {"tests/test_c.py::t": rec()})
    not_run = ModuleResult("tests/test_d.py", Status.NOT_RUN,
                           note="the fixed module's session ran past its limit")
    inconclusive = judge("tests/test_f.py", {"tests/test_f.py::t": rec("failed", engines=[])},
                         {"tests/test_f.py::t": rec("failed", engines=[])},
                         not_exercised={"tests/test_f.py::t": "before: out of memory"})
    return ProveResult([same, differs, fixed, not_run, inconclusive],
                       unchanged=["tests/test_e.py"],
                       changed=["tests/test_a.py", "tests/test_b.py"],
                       applied=["tests/test_a.py"], withheld=["tests/test_b.py"],
                       seconds=12.0, root="/project")


def test_text_report() -> None:
    assert render_text(_result()) == """\
tests/test_b.py::t: outcome: 'passed' before, 'failed' after
tests/test_b.py: run again alone: differs when first run (1 difference(s))
tests/test_b.py: by hand (before): cd /w/before && pytest tests/test_b.py
tests/test_d.py: not run: the fixed module's session ran past its limit
tests/test_f.py: inconclusive: 1 test did not exercise the fix: tests/test_f.py::t: before: out of memory

test                before  after
------------------  ------  ------
tests/test_a.py::t  passed  passed
tests/test_b.py::t  passed  failed
tests/test_b.py::u  error   error
tests/test_c.py::t  passed  passed
tests/test_f.py::t  failed  failed

module           verdict                     tests  failed in both  leaked before  leaked after  texts by outcome only  seconds
---------------  --------------------------  -----  --------------  -------------  ------------  ---------------------  ---------------------
tests/test_a.py  same                        1      0               0              0             0                      3.2 (before recorded)
tests/test_b.py  differs (run again)         2      1               0              0             0                      4.0
tests/test_c.py  leaked before, fixed after  1      0               1              0             0                      0.0
tests/test_d.py  not run                     0      0               0              0             0                      0.0
tests/test_f.py  inconclusive                1      1               0              0             0                      0.0

5 modules proven: 1 same, 1 leaked before and fixed after, 1 differ, 1 inconclusive, 1 not run (1 run again alone); 1 test module unchanged by the fix; 12 s.
Applied the fix to 1 file; not written: tests/test_b.py.
"""  # noqa: E501


def test_json_report() -> None:
    data = json.loads(render_json(_result()))
    assert data["proven"] is False
    assert [(m["module"], m["status"]) for m in data["modules"]] == [
        ("tests/test_a.py", "same"), ("tests/test_b.py", "differs"),
        ("tests/test_c.py", "leaked before, fixed after"), ("tests/test_d.py", "not run"),
        ("tests/test_f.py", "inconclusive")]
    differs, inconclusive = data["modules"][1], data["modules"][4]
    assert differs["differences"] == [
        {"test": "tests/test_b.py::t", "field": "outcome", "before": "passed",
         "after": "failed"}]
    assert (differs["outcomes"], differs["failed_in_both"], differs["engines"],
            differs["rerun"]) == (
        {"tests/test_b.py::t": {"before": "passed", "after": "failed"},
         "tests/test_b.py::u": {"before": "error", "after": "error"}},
        ["tests/test_b.py::u"], {"before": 1, "after": 1},
        "differs when first run (1 difference(s))")
    assert (inconclusive["not_exercised"], inconclusive["engines"]) == (
        {"tests/test_f.py::t": "before: out of memory"}, {"before": 0, "after": 0})
    assert (data["applied"], data["withheld"], data["unchanged"]) == (
        ["tests/test_a.py"], ["tests/test_b.py"], ["tests/test_e.py"])


def test_sarif_report(tmp_path: Path) -> None:
    result = _result()
    result.root = str(tmp_path)
    log = json.loads(render_sarif(result, str(tmp_path)))
    run = log["runs"][0]
    assert [(r["ruleId"], r["level"], r["message"]["text"],
             r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
            for r in run["results"]] == [
        ("prove-differs", "error", "tests/test_b.py::t: outcome: 'passed' before, "
         "'failed' after", "tests/test_b.py"),
        ("prove-not-run", "warning", "tests/test_d.py: not run: the fixed module's session "
         "ran past its limit", "tests/test_d.py"),
        ("prove-inconclusive", "warning", "tests/test_f.py: inconclusive: 1 test did not "
         "exercise the fix: tests/test_f.py::t: before: out of memory", "tests/test_f.py")]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [
        "prove-differs", "prove-inconclusive", "prove-not-run"]


def test_modules_to_run(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    for name in ("a/test_x.py", "a/conftest.py", "test_y.py", "conftest.py"):
        (tmp_path / name).write_text("")
    tests = ["a/test_x.py", "test_y.py"]
    assert modules_to_run(tests, ["test_y.py"], tmp_path) == ["test_y.py"]
    assert modules_to_run(tests, ["a/conftest.py"], tmp_path) == ["a/test_x.py"]
    assert modules_to_run(tests, ["conftest.py"], tmp_path) == tests
    assert modules_to_run(tests, ["helpers.py"], tmp_path) == tests
    assert modules_to_run(tests, ["helpers.py"], tmp_path, {"test_y.py": ["helpers.py"]}) \
        == ["test_y.py"]
    assert modules_to_run(tests, [], tmp_path) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(("importer", "line"), [
    ("test_a.py", "import engine_helpers"),
    ("test_a.py", "from engine_helpers import make_llm"),
    ("test_a.py", "def test():\n    import engine_helpers"),
    ("sub/test_a.py", "from .. import engine_helpers"),
    ("sub/test_a.py", "from ..engine_helpers import make_llm"),
    ("sub/test_a.py", "import engine_helpers as e"),  # pytest puts each folder above on sys.path
    ("test_a.py", "from pkg import utils"),  # utils imports the helper in turn
    ("test_a.py", "import pkg.utils"),
])
def test_a_module_runs_the_helper_it_imports(tmp_path: Path, importer: str, line: str) -> None:
    tree = _tree(tmp_path, {importer: line + "\n", "engine_helpers.py": "",
                            "pkg/__init__.py": "", "pkg/utils.py": "import engine_helpers\n",
                            "other.py": "", "test_b.py": "import other\n"})
    if importer.startswith("sub/"):
        (tmp_path / "sub/__init__.py").write_text("")
    changed = [importer, "engine_helpers.py", "other.py"]
    assert helpers_of(tree, importer, changed) == ["engine_helpers.py"]
    assert helpers_of(tree, "test_b.py", changed) == ["other.py"]


def test_a_helper_a_conftest_imports_is_every_module_beneath_it(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"a/conftest.py": "from helpers import setup\n",
                            "a/test_x.py": "", "test_y.py": "", "a/helpers.py": ""})
    trees = {"before": tree, "after": tree}
    assert module_helpers(["a/test_x.py", "test_y.py"], ["a/helpers.py"], trees) == {
        "a/test_x.py": ["a/helpers.py"], "test_y.py": []}


def test_a_changed_test_module_another_imports_is_its_helper(tmp_path: Path) -> None:
    """``test_b.py`` imports a factory of ``test_a.py``, which the fix rewrote: its session
    runs that code, so ``test_a.py``'s bytes are in its key; a changed test module nobody
    imports is nobody's helper (pytest collects it)."""
    tree = _tree(tmp_path, {"test_a.py": "def build():\n    pass\n",
                            "test_b.py": "from test_a import build\n", "test_c.py": ""})
    trees = {"before": tree, "after": tree}
    changed = ["test_a.py", "test_b.py", "test_c.py"]
    assert module_helpers(["test_a.py", "test_b.py", "test_c.py"], changed, trees) == {
        "test_a.py": [], "test_b.py": ["test_a.py"], "test_c.py": []}


def test_a_helper_no_import_reaches_is_every_module(tmp_path: Path) -> None:
    """One loaded by ``importlib`` or read as data: who runs it is not known."""
    tree = _tree(tmp_path, {"test_x.py": "import importlib\nimportlib.import_module('h')\n",
                            "test_y.py": "import used\n", "h.py": "", "used.py": ""})
    trees = {"before": tree, "after": tree}
    assert module_helpers(["test_x.py", "test_y.py"], ["h.py", "used.py"], trees) == {
        "test_x.py": ["h.py"], "test_y.py": ["h.py", "used.py"]}


def test_a_module_that_does_not_parse_may_run_every_helper(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"test_x.py": "def (:\n", "h.py": "", "g.py": ""})
    assert helpers_of(tree, "test_x.py", ["h.py", "g.py"]) == ["g.py", "h.py"]


def test_a_recording_key_changes_with_the_module_and_the_pytest_args(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test(): pass\n")
    env = {"python": "3.11", "machine": "x86_64", "packages": "p"}
    key = key_of(recording_inputs(tmp_path, "test_x.py", harness="", environment=env,
                                  pytest_args=["-q"]))
    assert key == key_of(recording_inputs(tmp_path, "test_x.py", harness="", environment=env,
                                          pytest_args=["-q"]))
    assert key != key_of(recording_inputs(tmp_path, "test_x.py", harness="", environment=env,
                                          pytest_args=["-x"]))
    (tmp_path / "conftest.py").write_text("")
    with_conftest = key_of(recording_inputs(tmp_path, "test_x.py", harness="",
                                            environment=env, pytest_args=["-q"]))
    assert with_conftest != key
    store = Store(tmp_path / "store")
    inputs = recording_inputs(tmp_path, "test_x.py", harness="", environment=env)
    store.put(inputs, {"test_x.py::test": rec()}, 1.0, 0)
    got = store.get(key_of(inputs))
    assert got is not None and got.records == {"test_x.py::test": rec()}
    data = json.loads(store.path(key_of(inputs)).read_text())
    data["records"]["test_x.py::test"]["outcome"] = "failed"
    store.path(key_of(inputs)).write_text(json.dumps(data))
    with pytest.raises(ValueError, match="edited by hand"):
        store.get(key_of(inputs))


def test_jobs_skipped_by_the_run_are_left_out() -> None:
    jobs = [Job("a.py", "before", Path(".")), Job("b.py", "before", Path("."))]
    done = run_jobs(jobs, lambda job: None if job.module == "b.py" else job.module,
                    workers=2, engine_budget=2)
    assert {j.module: r for j, r in done.items()} == {"a.py": "a.py"}


def test_changed_files_come_from_the_fix_run(tmp_path: Path) -> None:
    """The files the fix changed are those the run wrote, relative to the fixed copy: a
    module fixed in a subfolder, not the clean module nor a file outside the paths."""
    from lint_gpu_tests.api import ConfigResolver, RunOptions, check_paths

    source = 'from vllm import LLM\n\n\ndef test_generate():\n    llm = LLM("m")\n'
    top = tmp_path / "top"
    (top / "tests" / "sub").mkdir(parents=True)
    (top / "tests" / "sub" / "test_a.py").write_text(source)
    (top / "tests" / "test_clean.py").write_text("def test_ok():\n    assert True\n")
    (top / "other").mkdir()
    (top / "other" / "test_b.py").write_text(source)
    before, after = tmp_path / "before", tmp_path / "after"
    copy_tree(top, before)
    copy_tree(top, after)
    fixed = check_paths([str(after / "tests")], ConfigResolver(cwd=str(after)),
                        RunOptions(fix=True, cache=False, jobs=1))
    assert changed_files(fixed, before, after) == ["tests/sub/test_a.py"]
    assert (after / "other" / "test_b.py").read_text() == source


def test_units_that_share_a_file_are_one(tmp_path: Path) -> None:
    """The units a fix run rewrote, relative to the fixed copy: two sharing a caller are one
    (the helpers' modules first), a file outside the copy keeps its absolute path."""
    from lint_gpu_tests.prove.pipeline import Unit, fix_units
    from lint_gpu_tests.running.run import RewrittenUnit, RunResult

    after = tmp_path / "after"
    outside = tmp_path / "elsewhere" / "test_x.py"
    fixed = RunResult(units=[
        RewrittenUnit("f", (str(after / "tests/u.py"), str(after / "tests/test_b.py"),
                            str(after / "tests/test_a.py"))),
        RewrittenUnit("h", (str(after / "tests/w.py"), str(outside))),
        RewrittenUnit("g", (str(after / "tests/v.py"), str(after / "tests/test_a.py")))])
    assert fix_units(fixed, after) == [
        Unit(["h() of tests/w.py"], ["tests/w.py", str(outside)]),
        Unit(["f() of tests/u.py", "g() of tests/v.py"],
             ["tests/u.py", "tests/v.py", "tests/test_a.py", "tests/test_b.py"])]


def _unit_tree(tmp_path: Path, statuses: dict[str, Status]
               ) -> tuple[ProveResult, dict[str, bytes], Path]:
    """A tree of two units and a module of its own: ``tests/utils.py``'s helper called by
    ``tests/test_a.py`` and ``tests/test_b.py``; ``tests/test_c.py``'s helper called by
    ``tests/test_d.py``; ``tests/test_e.py``. Returns the result of proving it (each module's
    verdict from ``statuses``, ``same`` where not given), the fixed bytes and the tree."""
    from lint_gpu_tests.prove.pipeline import Unit
    from lint_gpu_tests.prove.store import digest

    top = tmp_path / "top"
    (top / "tests").mkdir(parents=True)
    names = ["tests/utils.py", "tests/test_a.py", "tests/test_b.py", "tests/test_c.py",
             "tests/test_d.py", "tests/test_e.py"]
    fixed = {name: f"fixed {name}\n".encode() for name in names}
    for name in names:
        (top / name).write_bytes(f"original {name}\n".encode())
    modules = [ModuleResult(m, statuses.get(m, Status.SAME)) for m in names[1:]]
    result = ProveResult(
        modules, changed=sorted(names), to_prove=names[1:],
        digests={n: {"before": digest((top / n).read_bytes()), "after": digest(fixed[n])}
                 for n in names},
        units=[Unit(["make_llm() of tests/utils.py"], names[:3]),
               Unit(["build() of tests/test_c.py"], ["tests/test_c.py", "tests/test_d.py"])])
    return result, fixed, top


def _written(top: Path) -> list[str]:
    return sorted(p.relative_to(top).as_posix() for p in top.rglob("*.py")
                  if p.read_bytes().startswith(b"fixed"))


def test_apply_writes_each_unit_whole_or_not_at_all(tmp_path: Path) -> None:
    from lint_gpu_tests.prove.pipeline import apply

    said: list[str] = []
    result, fixed, top = _unit_tree(tmp_path, {})
    apply(result, fixed.get, top, said.append)
    assert (_written(top), result.withheld, said) == (sorted(fixed), [], [])
    assert [(u.applied, u.withheld) for u in result.units] == [(True, ""), (True, "")]

    # test_d differs: its unit is not written; nor is the other, whose helper's module (not
    # a test module) is written, as any such file, only when every module was proven
    result, fixed, top = _unit_tree(tmp_path / "d", {"tests/test_d.py": Status.DIFFERS})
    apply(result, fixed.get, top, said.append)
    assert _written(top) == ["tests/test_e.py"]
    assert [(u.applied, u.withheld) for u in result.units] == [
        (False, "tests/test_d.py differs"), (False, "tests/test_d.py differs")]
    assert said[-2:] == [
        "prove: the fix unit of make_llm() of tests/utils.py: not written: tests/test_d.py "
        "differs",
        "prove: the fix unit of build() of tests/test_c.py: not written: tests/test_d.py "
        "differs"]

    # test_b inconclusive: its unit is not written, the unit of test modules only is
    result, fixed, top = _unit_tree(tmp_path / "b", {"tests/test_b.py": Status.INCONCLUSIVE})
    apply(result, fixed.get, top, said.append)
    assert _written(top) == ["tests/test_c.py", "tests/test_d.py", "tests/test_e.py"]
    assert result.units[0].withheld == "tests/test_b.py is inconclusive"
    assert result.withheld == ["tests/test_a.py", "tests/test_b.py", "tests/utils.py"]


def test_apply_writes_no_file_of_a_unit_when_one_changed_since_copied(tmp_path: Path) -> None:
    from lint_gpu_tests.prove.pipeline import apply

    said: list[str] = []
    result, fixed, top = _unit_tree(tmp_path, {})
    (top / "tests" / "test_a.py").write_text("edited by hand\n")
    apply(result, fixed.get, top, said.append)
    assert _written(top) == ["tests/test_c.py", "tests/test_d.py", "tests/test_e.py"]
    assert (top / "tests" / "test_a.py").read_text() == "edited by hand\n"
    assert said == ["prove: the fix unit of make_llm() of tests/utils.py: not written: "
                    "tests/test_a.py changed since it was copied"]
    # the fix now gives other bytes for the helper's module: none of its unit is written
    result, fixed, top = _unit_tree(tmp_path / "other", {})
    fixed["tests/utils.py"] = b"fixed otherwise\n"
    apply(result, fixed.get, top, said.append)
    assert _written(top) == ["tests/test_c.py", "tests/test_d.py", "tests/test_e.py"]
    assert result.units[0].withheld == \
        "tests/utils.py: the fix now gives other bytes than those proven"
    # a unit with a file outside the tree proven is not written
    result, fixed, top = _unit_tree(tmp_path / "outside", {})
    result.units[1].files.append(str(tmp_path / "elsewhere.py"))
    apply(result, fixed.get, top, said.append)
    assert _written(top) == ["tests/test_a.py", "tests/test_b.py", "tests/test_e.py",
                             "tests/utils.py"]
    assert result.units[1].withheld == f"{tmp_path / 'elsewhere.py'} lies outside the tree proven"


def test_units_in_the_reports(tmp_path: Path) -> None:
    """The text report names each unit's files and why it was not written; JSON keeps the
    units and ``prove merge`` takes them from the shards' reports."""
    from lint_gpu_tests.prove.merge import merge_reports
    from lint_gpu_tests.prove.pipeline import apply

    result, fixed, top = _unit_tree(tmp_path, {"tests/test_b.py": Status.DIFFERS})
    assert render_text(result).splitlines()[:3] == [
        "fix unit (make_llm() of tests/utils.py and its calls): tests/utils.py, "
        "tests/test_a.py, tests/test_b.py",
        "fix unit (build() of tests/test_c.py and its calls): tests/test_c.py, "
        "tests/test_d.py", ""]
    shards = []
    for k, modules in ((1, result.modules[:2]), (2, result.modules[2:])):
        part = ProveResult(modules, changed=result.changed, to_prove=result.to_prove,
                           digests=result.digests, units=result.units, shard=f"{k}/2")
        shards.append(json.loads(render_json(part)))
    merged = merge_reports(shards)
    assert merged.units == result.units
    apply(merged, fixed.get, top, lambda line: None)
    assert render_text(merged).splitlines()[:2] == [
        "fix unit (make_llm() of tests/utils.py and its calls): tests/utils.py, "
        "tests/test_a.py, tests/test_b.py: not written: tests/test_b.py differs",
        "fix unit (build() of tests/test_c.py and its calls): tests/test_c.py, "
        "tests/test_d.py: written together"]
    assert json.loads(render_json(merged))["units"] == [
        {"helpers": ["make_llm() of tests/utils.py"],
         "files": ["tests/utils.py", "tests/test_a.py", "tests/test_b.py"],
         "applied": False, "withheld": "tests/test_b.py differs"},
        {"helpers": ["build() of tests/test_c.py"], "files": ["tests/test_c.py",
                                                             "tests/test_d.py"],
         "applied": True, "withheld": ""}]

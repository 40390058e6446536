"""``prove merge REPORTS...``: the shards' JSON reports (``prove --shard K/N
--output-format json``) joined into one verdict, and with ``--apply`` the fix written where
it was proven."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lint_gpu_tests.prove.compare import Difference, ModuleResult, Status
from lint_gpu_tests.prove.pipeline import ProveResult, Unit, apply, copy_and_fix


def module_from_json(data: dict[str, Any]) -> ModuleResult:
    """A module's verdict from its JSON (:func:`.report.render_json`)."""
    names = {f.name for f in dataclasses.fields(ModuleResult)}
    given = {k: v for k, v in data.items() if k in names}
    given["status"] = Status(data["status"])
    given["differences"] = [Difference(**d) for d in data.get("differences", [])]
    return ModuleResult(**given)


def merge_reports(reports: Sequence[dict[str, Any]]) -> ProveResult:
    """One result from the JSON reports of the N shards of one run.

    Every module to prove gets the verdict of the shard that proved it, and ``not run`` where
    none did (the shards saw different recordings, so parted the modules otherwise).

    Raises:
        ValueError: when the reports are not the N shards of one run: another tree, other
            modules to prove or other changes, a shard missing or given twice, or a module
            proven by two shards.
    """
    if not reports:
        raise ValueError("no report to merge")
    first = reports[0]
    for report in reports:
        for name in ("root", "to_prove", "changed", "digests", "fix", "units"):
            if report.get(name) != first.get(name):
                raise ValueError(f"the reports are not of one run: their {name} differ")
    shards = sorted(str(r.get("shard") or "") for r in reports)
    count = len(reports)
    wanted = sorted(f"{k}/{count}" for k in range(1, count + 1))
    if shards != wanted:
        raise ValueError(f"expected the shards {', '.join(wanted)}; got "
                         f"{', '.join(s or 'an unsharded report' for s in shards)}")
    proven: dict[str, ModuleResult] = {}
    for report in reports:
        for data in report["modules"]:
            if data["module"] in proven:
                raise ValueError(f"{data['module']}: proven by two shards")
            proven[data["module"]] = module_from_json(data)
    modules = [proven.get(m) or ModuleResult(
        m, Status.NOT_RUN, note="no shard proved it (the shards saw other recordings)")
        for m in first["to_prove"]]
    errors = sorted({(e["path"], e["message"]) for r in reports for e in r["errors"]})
    return ProveResult(modules=modules, unchanged=list(first["unchanged"]),
                       changed=list(first["changed"]), errors=errors,
                       seconds=max(float(r["seconds"]) for r in reports), root=first["root"],
                       to_prove=list(first["to_prove"]), fix=dict(first["fix"]),
                       digests=dict(first["digests"]),
                       units=[Unit(list(u["helpers"]), list(u["files"]))
                              for u in first.get("units", [])])


def merge_paths(paths: Sequence[str], *, write: bool = False,
                progress: Callable[[str], None] | None = None) -> ProveResult:
    """Merge the JSON reports in the files ``paths`` (:func:`merge_reports`); with ``write``,
    make the fix again in a copy of the tree and write the files proven, as ``prove --apply``
    does (a file whose fixed bytes are not those proven, or that changed since, is not
    written).

    Raises:
        ValueError: as :func:`merge_reports`, or when a file is not a report.
        OSError: when a file cannot be read.
    """
    say = progress or (lambda line: None)
    reports = []
    for path in paths:
        try:
            reports.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not a JSON report of prove: {error}") from error
    result = merge_reports(reports)
    if write:
        top = Path(result.root)
        work = Path(tempfile.mkdtemp(prefix="gpu-test-lint-merge-"))
        try:
            after = work / "after"
            copy_and_fix(top, {"after": after}, result.fix, ProveResult(), skip=[work])
            apply(result, lambda p: (after / p).read_bytes() if (after / p).is_file()
                  else None, top, say)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return result

"""The comparison of two recorded runs of one module, and the verdict on it.

Per test id (the records of :mod:`lint_gpu_tests.runtime.recorder`), the fixed module must
give the same outcome, the same resolved engine configurations and the same generated texts,
and no test may start with more engines alive that nothing holds than before. How texts are
compared is :data:`TEXT_MODES`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: How generated texts are compared:
#: ``auto``: a ``generate`` call that sampled greedily or with a seed in both runs, exactly;
#: any other call (sampling without a seed: its texts may differ run to run) by its number
#: of texts only, and the test is marked as compared by outcome only;
#: ``exact``: every call's texts, exactly (an engine known to be deterministic);
#: ``outcome``: texts are not compared (an engine whose greedy texts vary run to run).
TEXT_MODES = ("auto", "exact", "outcome")

#: The record fields compared as they are.
FIELDS = ("outcome", "engines")


@dataclass(frozen=True)
class Difference:
    """One behaviour difference between two runs of the same test id.

    Attributes:
        test: the pytest node id (``test_x.py::test_y``) or ``<import>::test_x.py``.
        field: ``present``, ``outcome``, ``engines``, ``texts`` or ``leaked_at_start``.
        before: the value in the original's run (``False`` for ``present`` when missing).
        after: the value in the fixed module's run.
    """

    test: str
    field: str
    before: Any
    after: Any

    def describe(self) -> str:
        """One line: ``test_a.py::test_b: outcome: 'passed' before, 'failed' after``; for
        engines, each resolved field that changed (``engine 1 max_model_len: 32 before, 16
        after``)."""
        if self.field == "present":
            where = "the fixed module's run" if self.before else "the original's run"
            return f"{self.test}: missing in {where}"
        if self.field == "leaked_at_start":
            return (f"{self.test}: starts with {self.after} engine(s) alive that nothing holds "
                    f"after the fix ({self.before or 0} before)")
        if self.field == "engines" and isinstance(self.before, list) and \
                isinstance(self.after, list) and len(self.before) == len(self.after):
            changes = [f"engine {i} {key}: {b.get(key)!r} before, {a.get(key)!r} after"
                       for i, (b, a) in enumerate(zip(self.before, self.after, strict=True), 1)
                       for key in sorted({*b, *a}) if b.get(key) != a.get(key)]
            return f"{self.test}: {'; '.join(changes)}"
        return f"{self.test}: {self.field}: {self.before!r} before, {self.after!r} after"


def _exact(record: dict[str, Any], index: int) -> bool:
    sampling = record.get("sampling") or []
    return index < len(sampling) and sampling[index] in ("greedy", "seeded")


def _texts_differ(before: dict[str, Any], after: dict[str, Any], texts: str
                  ) -> tuple[bool, bool]:
    """(whether the texts differ, whether some call was compared by outcome only)."""
    b, a = before.get("texts") or [], after.get("texts") or []
    if texts == "outcome":
        return False, bool(b or a)
    if texts == "exact":
        return b != a, False
    if len(b) != len(a):
        return True, False
    loose = False
    for index, (tb, ta) in enumerate(zip(b, a, strict=True)):
        if _exact(before, index) and _exact(after, index):
            if tb != ta:
                return True, False
        else:
            loose = True
            if len(tb) != len(ta):
                return True, loose
    return False, loose


def compare_test(test: str, before: dict[str, Any] | None, after: dict[str, Any] | None, *,
                 texts: str = "auto", strict_leaks: bool = False) -> list[Difference]:
    """The differences of one test id between the original's run and the fixed one's.

    Args:
        test: the test id.
        before: its record in the original's run, or None when it did not run there.
        after: its record in the fixed module's run, or None.
        texts: one of :data:`TEXT_MODES`.
        strict_leaks: a test that starts with any engine nothing holds after the fix
            differs (this repository's corpus: every leak there is one the fix must end);
            else only one that starts with more than before.
    """
    if before is None or after is None:
        return [Difference(test, "present", before is not None, after is not None)]
    diffs = [Difference(test, name, before.get(name), after.get(name))
             for name in FIELDS if before.get(name) != after.get(name)]
    if _texts_differ(before, after, texts)[0]:
        diffs.append(Difference(test, "texts", before.get("texts"), after.get("texts")))
    leaked_before, leaked_after = before.get("leaked_at_start") or 0, \
        after.get("leaked_at_start") or 0
    if leaked_after and (strict_leaks or leaked_after > leaked_before):
        diffs.append(Difference(test, "leaked_at_start", before.get("leaked_at_start"),
                                leaked_after))
    return diffs


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], *,
            texts: str = "auto", strict_leaks: bool = False,
            tests: Iterable[str] | None = None) -> list[Difference]:
    """Behaviour differences between two runs, test by test (:func:`compare_test`).

    Args:
        before: the original's records, by test id.
        after: the fixed module's records.
        texts: one of :data:`TEXT_MODES`.
        strict_leaks: see :func:`compare_test`.
        tests: the test ids to compare (default: every id of either run).
    """
    ids = sorted(set(before) | set(after)) if tests is None else sorted(tests)
    return [d for t in ids for d in compare_test(t, before.get(t), after.get(t), texts=texts,
                                                 strict_leaks=strict_leaks)]


def outcome_only(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], *,
                 texts: str = "auto") -> list[str]:
    """Test ids present in both runs whose texts were compared by outcome only (some
    ``generate`` call sampled without a seed, or ``texts`` is ``outcome``), sorted."""
    return sorted(t for t in set(before) & set(after)
                  if _texts_differ(before[t], after[t], texts)[1])


def leaked_tests(records: dict[str, dict[str, Any]]) -> list[str]:
    """Test ids that started with an engine alive that nothing held, sorted."""
    return sorted(t for t, r in records.items() if r.get("leaked_at_start"))


def engines_built(records: dict[str, dict[str, Any]]) -> int:
    """How many engines the tests (and the module's import) built."""
    return sum(len(r.get("engines") or []) for r in records.values())


class Status(enum.Enum):
    """The verdict on one module."""

    SAME = "same"
    LEAK_FIXED = "leaked before, fixed after"
    DIFFERS = "differs"
    INCONCLUSIVE = "inconclusive"
    NOT_RUN = "not run"

    @property
    def proven(self) -> bool:
        """True when the fixed module behaves as the original (``--apply`` writes it)."""
        return self in (Status.SAME, Status.LEAK_FIXED)


@dataclass
class ModuleResult:
    """One module's verdict.

    Attributes:
        module: its ``/``-separated path in the tree.
        status: the :class:`Status`.
        differences: every behaviour difference.
        tests: test ids recorded in either run.
        leaked_before: tests that started with a leaked engine in the original's run.
        leaked_after: the same in the fixed module's run.
        outcome_only: tests whose texts were compared by outcome only.
        seconds: the two sessions' seconds (run now or as recorded).
        from_recordings: variants taken from their recordings (``before``, ``after``).
        note: why the module was not run (a session past its limit, pytest's error, the
            time limit of the whole run), or why it is inconclusive.
        logs: the sessions' logs of the runs made now, by variant.
        outcomes: per test id, its outcome in each run (``{"before": "passed", "after":
            "failed"}``; None where the test did not run there).
        failed_in_both: tests that failed (or errored) in both runs.
        not_exercised: per test id, why a run of it did not exercise the fix
            (``before: out of memory``): its engine failed to start for a reason that is not
            the test's (:mod:`.diagnose`).
        engines: engines built in each run, by variant.
        rerun: why the module was run again alone before its verdict (its first verdict and
            the reason), or ``""``.
        commands: per variant, the shell command that runs the module's session by hand.
    """

    module: str
    status: Status
    differences: list[Difference] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    leaked_before: list[str] = field(default_factory=list)
    leaked_after: list[str] = field(default_factory=list)
    outcome_only: list[str] = field(default_factory=list)
    seconds: float = 0.0
    from_recordings: list[str] = field(default_factory=list)
    note: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    outcomes: dict[str, dict[str, str | None]] = field(default_factory=dict)
    failed_in_both: list[str] = field(default_factory=list)
    not_exercised: dict[str, str] = field(default_factory=dict)
    engines: dict[str, int] = field(default_factory=dict)
    rerun: str = ""
    commands: dict[str, str] = field(default_factory=dict)


def failed(outcome: str | None) -> bool:
    """True for an outcome that is a failure: ``failed``, ``error``, a teardown error, or
    none recorded."""
    return outcome is None or outcome.split("+")[0] in ("failed", "error") \
        or outcome.endswith("+teardown-error")


def outcomes(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
             ) -> dict[str, dict[str, str | None]]:
    """Per test id of either run (sorted), its outcome in each: ``{"before": ..., "after":
    ...}``, None where it did not run."""
    return {t: {"before": (before.get(t) or {}).get("outcome"),
                "after": (after.get(t) or {}).get("outcome")}
            for t in sorted(set(before) | set(after))}


def judge(module: str, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
          *, texts: str = "auto", strict_leaks: bool = False,
          not_exercised: dict[str, str] | None = None, expects_engines: bool = False
          ) -> ModuleResult:
    """The verdict on ``module`` from the records of its two complete runs.

    It is ``inconclusive`` when a run did not exercise the fix: some test's engine failed to
    start for a reason that is not the test's (``not_exercised``, test id -> why), or no
    engine was built in either run where the original builds one (``expects_engines``); the
    differences found are kept, but they are not the verdict. Otherwise it differs when
    :func:`compare` finds a difference; it is ``leaked before, fixed after`` when some test
    started with a leaked engine before and none does after; else the same."""
    differences = compare(before, after, texts=texts, strict_leaks=strict_leaks)
    leaked_before, leaked_after = leaked_tests(before), leaked_tests(after)
    built = {"before": engines_built(before), "after": engines_built(after)}
    note = ""
    if not_exercised:
        status = Status.INCONCLUSIVE
        note = (f"{_plural_tests(len(not_exercised))} did not exercise the fix: "
                + "; ".join(f"{t}: {why}" for t, why in sorted(not_exercised.items())))
    elif expects_engines and not any(built.values()):
        status = Status.INCONCLUSIVE
        note = "no engine was built in either run, where the original builds one"
    elif differences:
        status = Status.DIFFERS
    elif leaked_before and not leaked_after:
        status = Status.LEAK_FIXED
    else:
        status = Status.SAME
    per_test = outcomes(before, after)
    return ModuleResult(module, status, differences, sorted(set(before) | set(after)),
                        leaked_before, leaked_after, outcome_only(before, after, texts=texts),
                        note=note, outcomes=per_test,
                        failed_in_both=[t for t, o in per_test.items()
                                        if t in before and t in after
                                        and failed(o["before"]) and failed(o["after"])],
                        not_exercised=dict(sorted((not_exercised or {}).items())),
                        engines=built)


def _plural_tests(count: int) -> str:
    return f"{count} test{'' if count == 1 else 's'}"

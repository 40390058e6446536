"""Why a session did not exercise the fix: read off its pytest log.

A test whose engine failed to start for a reason that is not the test's own (the device's
memory was taken by another process, vLLM's start-up memory profile saw another process free
memory, a child process was killed, the recorder itself raised, a time-out) says nothing
about the fix, whatever its outcome: :func:`not_exercised` names those tests and why, from
the session's log (pytest runs with ``-rA --tb=short``: a section per test with its short
traceback and captured output, then one summary line per test).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lint_gpu_tests.prove.compare import failed

#: Why an engine failed to start for a reason that is not the test's, and the log text that
#: shows it (searched in a failing test's section and summary line), most specific first.
REASONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("the start-up memory profile (another process changed the device's free memory)",
     re.compile(r"Error in memory profiling")),
    ("out of memory", re.compile(
        r"out of memory|OutOfMemoryError|No available memory for the cache blocks",
        re.IGNORECASE)),
    ("a killed child process", re.compile(
        r"died with <Signals\.SIG\w+|exitcode[=: ]+-9\b|died unexpectedly|EngineDeadError")),
    ("a time-out", re.compile(r"Failed: Timeout|Timed out waiting for engine")),
)

#: The recorder's own file: a failure raised there is the recorder's, not the test's.
RECORDER_FILE = re.compile(r"lint_gpu_tests[/\\]runtime[/\\]recorder\.py:\d+: in ")

_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
_RULE = re.compile(r"^={3,}")
_FRAME = re.compile(r"^\S.*:\d+: in \S+$")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - (.*))?$")
_PHASE = re.compile(r"^ERROR at (?:setup|teardown) of ")


def _heading(test: str) -> str:
    """The heading pytest gives ``test``'s sections (``TestC.test_x[1]`` for
    ``m.py::TestC::test_x[1]``)."""
    name = test.split("::", 1)[-1]
    head, bracket, params = name.partition("[")
    return head.replace("::", ".") + bracket + params


def sections(log: str) -> dict[str, list[str]]:
    """The log's per-test text: each section's lines under its heading (``test_a``,
    ``TestC.test_x``; ``ERROR at setup of`` dropped), and each summary line's message under
    its test id."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in log.splitlines():
        header = _HEADER.match(line)
        if header:
            current = out.setdefault(_PHASE.sub("", header.group(1)), [])
            continue
        if _RULE.match(line):
            current = None
            continue
        summary = _SUMMARY.match(line)
        if summary and current is None:
            out.setdefault(summary.group(1), []).append(summary.group(2) or "")
            continue
        if current is not None:
            current.append(line)
    return out


def _innermost_frame(lines: list[str]) -> str:
    """The last ``path:line: in function`` of a short traceback before its ``E`` lines."""
    frame = ""
    for line in lines:
        if line.startswith("E   "):
            break
        if _FRAME.match(line):
            frame = line
    return frame


def reason(lines: list[str]) -> str | None:
    """Why a failing test's text (:func:`sections`) shows it did not exercise the fix, or
    None when its failure is its own."""
    if RECORDER_FILE.search(_innermost_frame(lines)):
        return "the recorder's own error"
    text = "\n".join(lines)
    for why, pattern in REASONS:
        if pattern.search(text):
            return why
    return None


def not_exercised(records: Mapping[str, Mapping[str, Any]], log: str) -> dict[str, str]:
    """The tests of a session (``records``, by test id) that failed for a reason that is
    not theirs (:func:`reason`), from the session's ``log``: test id -> why."""
    found = sections(log)
    out = {}
    for test, record in records.items():
        if not failed(record.get("outcome")):
            continue
        why = reason(found.get(_heading(test), []) + found.get(test, []))
        if why is not None:
            out[test] = why
    return out

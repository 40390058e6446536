"""Autofix fixtures: every ``tests/fixtures/fix/<case>/`` pair is reproduced byte for byte.

For each case (see ``tests/fixtures/fix/README.md``):

1. ``check_source(before.py)`` reports exactly ``expected.txt`` (``LINE:COL CODE``);
2. ``fix_source(before.py, unsafe=<mode is unsafe>)`` gives exactly ``after.py``;
3. in ``unsafe`` mode, a safe-only fix leaves the file unchanged;
4. fixing ``after.py`` again changes nothing, no violation left on it has an applicable fix,
   and what is left equals ``fixed_expected.txt``;
5. ``after.py`` parses and gains no pyflakes warning over ``before.py``.
"""

from __future__ import annotations

import ast
import io
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from lint_gpu_tests.checking import checker
from lint_gpu_tests.config import Config, config_from_table
from lint_gpu_tests.fixing import fixloop

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

FIX_DIR = Path(__file__).parent / "fixtures" / "fix"
DEFAULT_PATH = "tests/test_case.py"
CASES = sorted(p.name for p in FIX_DIR.iterdir() if p.is_dir())
LINE_RE = re.compile(r"^(\d+):(\d+) (GPU\d{3})$")


class Case:
    """One fixture directory, read once."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dir = FIX_DIR / name
        self.before = (self.dir / "before.py").read_bytes()
        self.after = (self.dir / "after.py").read_bytes()
        self.mode = (self.dir / "mode.txt").read_text().strip()
        assert self.mode in ("safe", "unsafe"), f"{name}: bad mode.txt {self.mode!r}"
        path_file = self.dir / "path.txt"
        self.path = path_file.read_text().strip() if path_file.is_file() else DEFAULT_PATH
        config_file = self.dir / "config.toml"
        if config_file.is_file():
            table = tomllib.loads(config_file.read_text())["tool"]["gpu-test-lint"]
            self.config = config_from_table(table, str(config_file), root=str(self.dir))
        else:
            self.config = Config()
        self.expected = self._read_positions("expected.txt")
        self.fixed_expected = self._read_positions("fixed_expected.txt")

    @property
    def unsafe(self) -> bool:
        return self.mode == "unsafe"

    def _read_positions(self, filename: str) -> set[tuple[int, int, str]]:
        out: set[tuple[int, int, str]] = set()
        for line in (self.dir / filename).read_text().splitlines():
            if not line.strip():
                continue
            match = LINE_RE.match(line.strip())
            assert match, f"{self.name}/{filename}: bad line {line!r}"
            out.add((int(match.group(1)), int(match.group(2)), match.group(3)))
        return out


def positions(violations) -> set[tuple[int, int, str]]:
    return {(v.location.row, v.location.column, v.code) for v in violations}


def fixed_bytes(source: bytes, case: Case, *, unsafe: bool) -> bytes:
    outcome = fixloop.fix_source(source, case.path, case.config, unsafe=unsafe)
    assert outcome.error is None, f"{case.name}: {outcome.error}"
    return source if outcome.new_source is None else outcome.new_source


def pyflakes_messages(source: bytes, filename: str) -> Counter[str]:
    """pyflakes messages for ``source`` without their positions (a multiset)."""
    from pyflakes.api import check
    from pyflakes.reporter import Reporter

    text = checker.decode_source(source)
    out, err = io.StringIO(), io.StringIO()
    check(text, filename, Reporter(out, err))
    assert not err.getvalue(), f"pyflakes could not check {filename}: {err.getvalue()}"
    messages: Counter[str] = Counter()
    for line in out.getvalue().splitlines():
        # "path:line:col: message" (col may be absent in old pyflakes)
        messages[re.sub(r"^.*?:\d+:(\d+:)?\s*", "", line)] += 1
    return messages


@pytest.fixture(params=CASES)
def case(request) -> Case:
    return Case(request.param)


def test_fixture_directories_are_complete():
    assert len(CASES) >= 40
    for name in CASES:
        for required in ("before.py", "after.py", "expected.txt", "fixed_expected.txt", "mode.txt"):
            assert (FIX_DIR / name / required).is_file(), f"{name}: missing {required}"
    readme = (FIX_DIR / "README.md").read_text()
    for name in CASES:
        assert f"`{name}`" in readme, f"{name} is not described in README.md"


def test_check_reports_expected(case: Case):
    found = positions(checker.check_source(case.before, case.path, case.config))
    assert found == case.expected, (
        f"{case.name}: missing {sorted(case.expected - found)}, "
        f"unexpected {sorted(found - case.expected)}"
    )


def test_fix_produces_after(case: Case):
    result = fixed_bytes(case.before, case, unsafe=case.unsafe)
    assert result == case.after, (
        f"{case.name}: fixed output differs from after.py\n"
        f"--- got ---\n{result.decode('latin-1')}\n--- want ---\n{case.after.decode('latin-1')}"
    )


def test_safe_fix_alone(case: Case):
    """Plain ``--fix``: produces after.py in safe mode, changes nothing in unsafe mode."""
    result = fixed_bytes(case.before, case, unsafe=False)
    if case.unsafe:
        assert result == case.before, f"{case.name}: a safe-only fix changed an unsafe case"
    else:
        assert result == case.after


def test_after_is_idempotent(case: Case):
    outcome = fixloop.fix_source(case.after, case.path, case.config, unsafe=case.unsafe)
    assert outcome.new_source is None, f"{case.name}: a second fix changed after.py"
    remaining = checker.check_source(case.after, case.path, case.config)
    assert not checker.wanted_fixes(remaining, unsafe=case.unsafe), (
        f"{case.name}: after.py still has applicable fixes: "
        f"{[(v.code, v.location.row) for v in checker.wanted_fixes(remaining, unsafe=case.unsafe)]}"
    )
    if not case.unsafe:
        assert not any(v.fixable and v.fix.applicability.value == "safe" for v in remaining)
    assert positions(remaining) == case.fixed_expected


def test_after_parses_and_gains_no_pyflakes_warning(case: Case):
    after_text = checker.decode_source(case.after)
    ast.parse(after_text)
    before_msgs = pyflakes_messages(case.before, case.path)
    after_msgs = pyflakes_messages(case.after, case.path)
    new = after_msgs - before_msgs
    assert not new, f"{case.name}: new pyflakes warnings {dict(new)}"


def test_encoding_and_line_endings_kept(case: Case):
    """The fixed file keeps the BOM, the line-ending style and the source encoding."""
    bom = b"\xef\xbb\xbf"
    assert case.after.startswith(bom) == case.before.startswith(bom)
    assert (b"\r\n" in case.after) == (b"\r\n" in case.before)
    if b"\r\n" in case.before:
        assert b"\n" not in case.after.replace(b"\r\n", b"")

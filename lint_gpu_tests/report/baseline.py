"""Baselines: record the violations a suite has today, report only the new ones.

A baseline file (``check --baseline FILE``, ``baseline`` in ``[tool.gpu-test-lint]``, the
flake8 plugin's ``--gpu-baseline``) lists violations by file, code and fingerprint. The
fingerprint is :func:`lint_gpu_tests.report.output.fingerprint` (the one SARIF's
``primaryLocationLineHash`` uses) over every line the violation spans, without whitespace,
with an occurrence index for repeats of one statement in a file: an entry survives lines
moving and edits elsewhere in the file, and goes stale when its statement changes. Paths are
relative to the baseline file's directory, with ``/`` separators, so the file is the same on
every machine and checkout.

The file is JSON, one entry a line, sorted, so a change of it reads as a short diff::

    {
      "gpu-test-lint-baseline": 1,
      "entries": [
        {"path": "tests/test_a.py", "code": "GPU001", "fingerprint": "0c1d2e3f4a5b6c7d:1", ...}
      ]
    }

Each entry also has ``statement``, the first line of the violation's statement, for the
reader; only ``path``, ``code`` and ``fingerprint`` identify an entry.

Updating (:class:`BaselineUpdate`): ``WRITE`` (``--update-baseline``) records the current
violations and drops the entries that no longer occur; ``RATCHET`` (``--ratchet``) only
drops, so new violations stay reported. Either way only the entries of files the run checked,
with codes the run reports, can go stale: a run over some files (pre-commit's staged ones) or
some codes (``--select``) leaves the others' entries as they are.
"""

from __future__ import annotations

import enum
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from lint_gpu_tests.config import Config, ConfigResolver, baselines_in_force
from lint_gpu_tests.ftypes import Violation
from lint_gpu_tests.report.output import fingerprint, source_lines
from lint_gpu_tests.running.run import RunResult

FORMAT_KEY = "gpu-test-lint-baseline"
"""The key whose value is the version of a baseline file's format."""
FORMAT_VERSION = 1
_ENTRY_KEYS = ("path", "code", "fingerprint", "statement")


class BaselineError(Exception):
    """A baseline file is missing (where it must exist), unreadable, malformed or cannot be
    written, or an update names none."""


class BaselineUpdate(enum.Enum):
    """Whether (and how) a run rewrites its baseline files.

    ``NONE``: read only. ``WRITE`` (``--update-baseline``): the current violations, the
    entries that no longer occur dropped (the file is created when missing). ``RATCHET``
    (``--ratchet``): only drop the entries that no longer occur; new violations are not added
    and stay reported (the file must exist).
    """

    NONE = "none"
    WRITE = "write"
    RATCHET = "ratchet"


@dataclass(frozen=True)
class BaselineEntry:
    """One recorded violation.

    Attributes:
        path: the file, relative to the baseline file's directory, ``/``-separated.
        code: the rule code (``GPU001``).
        fingerprint: ``hash:occurrence`` (:func:`lint_gpu_tests.report.output.fingerprint`, every
            line of the statement).
        statement: the first line of the statement, stripped, for the reader; it takes no
            part in comparisons.
    """

    path: str
    code: str
    fingerprint: str
    statement: str = field(default="", compare=False)

    def sort_key(self) -> tuple[str, str, str, str, int]:
        """The file's order: path, code, statement, then hash and occurrence (a number)."""
        digest, _, occurrence = self.fingerprint.partition(":")
        return (self.path, self.code, self.statement, digest,
                int(occurrence) if occurrence.isdigit() else 0)

    def as_line(self) -> str:
        """The entry as a one-line JSON object, keys in the file's order."""
        return json.dumps({"path": self.path, "code": self.code,
                           "fingerprint": self.fingerprint, "statement": self.statement})


def render_baseline(entries: Iterable[BaselineEntry]) -> bytes:
    """The bytes of a baseline file holding ``entries`` (repeats written once): the same for
    the same entries, on every machine (ASCII, ``\\n`` line ends)."""
    rows = [entry.as_line() for entry in sorted(set(entries), key=BaselineEntry.sort_key)]
    body = "\n" + ",\n".join(f"    {row}" for row in rows) + "\n  " if rows else ""
    return (f'{{\n  "{FORMAT_KEY}": {FORMAT_VERSION},\n  "entries": [{body}]\n}}\n').encode()


def read_baseline(path: str, *, missing_ok: bool = False) -> frozenset[BaselineEntry]:
    """The entries of the baseline file at ``path``.

    Args:
        path: the file.
        missing_ok: a missing file has no entries (else it is an error).

    Raises:
        BaselineError: when the file is missing (without ``missing_ok``), unreadable, not
            JSON, or not a baseline of a known version.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError as exc:
        if missing_ok:
            return frozenset()
        raise BaselineError(f"baseline file {path} does not exist (write it with "
                            "--update-baseline)") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read the baseline file {path}: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BaselineError(f"{path}: invalid baseline (not JSON: {exc})") from exc
    if not isinstance(data, dict) or data.get(FORMAT_KEY) != FORMAT_VERSION or \
            not isinstance(data.get("entries"), list):
        raise BaselineError(f"{path}: not a gpu-test-lint baseline (expected "
                            f'{{"{FORMAT_KEY}": {FORMAT_VERSION}, "entries": [...]}})')
    entries: set[BaselineEntry] = set()
    for index, item in enumerate(data["entries"]):
        if not isinstance(item, dict) or not all(
                isinstance(item.get(key), str) for key in _ENTRY_KEYS[:3]):
            raise BaselineError(f"{path}: entry {index + 1} needs the strings `path`, `code` "
                                "and `fingerprint`")
        statement = item.get("statement", "")
        entries.add(BaselineEntry(item["path"], item["code"], item["fingerprint"],
                                  statement if isinstance(statement, str) else ""))
    return frozenset(entries)


def write_baseline(path: str, entries: Iterable[BaselineEntry]) -> bool:
    """Write ``entries`` to the baseline file at ``path`` (atomically) unless it already
    holds exactly those bytes.

    Returns:
        Whether the file was written.

    Raises:
        OSError: when it cannot be written.
    """
    data = render_baseline(entries)
    try:
        with open(path, "rb") as handle:
            if handle.read() == data:
                return False
    except OSError:
        pass
    from lint_gpu_tests.parsing.writer import atomic_write

    atomic_write(path, data)
    return True


def relative_path(path: str, directory: str, cwd: str) -> str:
    """``path`` (as a run names it, relative to ``cwd``) relative to ``directory``, with
    ``/`` separators (an absolute path where there is no relative one: another drive)."""
    absolute = os.path.normpath(os.path.join(cwd, path))
    try:
        relative = os.path.relpath(absolute, directory)
    except ValueError:
        relative = absolute
    return relative.replace(os.sep, "/")


def _position(v: Violation) -> tuple[int, int, int, int, str]:
    return (v.location.row, v.location.column, v.end_location.row, v.end_location.column,
            v.code)


def baseline_entries(violations: Iterable[Violation], directory: str, *,
                     cwd: str | None = None,
                     lines_of: Callable[[str], Sequence[str]] | None = None,
                     sources: Mapping[str, bytes] | None = None
                     ) -> list[tuple[Violation, BaselineEntry]]:
    """Each violation with its entry in a baseline file kept in ``directory``.

    The occurrence index counts, per file, the violations with the same code and statement
    text in order of position, whatever the order given.

    Args:
        violations: violations of any files.
        directory: the baseline file's directory (entries' paths are relative to it).
        cwd: the directory the violations' paths are relative to (default: the working
            directory).
        lines_of: path -> the lines the violation's positions refer to (default: the file
            read from disk, or from ``sources``; the flake8 plugin passes the lines it has).
        sources: path -> the bytes of files that are not (or not yet) on disk.

    Returns:
        ``(violation, entry)`` pairs, by file and position.
    """
    base = os.path.abspath(cwd or os.getcwd())
    if lines_of is None:
        cache: dict[str, list[str]] = {}

        def lines_of(path: str) -> Sequence[str]:
            return source_lines(path, cache, sources)

    by_path: dict[str, list[Violation]] = {}
    for v in violations:
        by_path.setdefault(v.path, []).append(v)
    out: list[tuple[Violation, BaselineEntry]] = []
    for path in sorted(by_path):
        key = relative_path(path, directory, base)
        lines = lines_of(path)
        seen: Counter[str] = Counter()
        for v in sorted(by_path[path], key=_position):
            row = v.location.row
            statement = lines[row - 1].strip() if 1 <= row <= len(lines) else ""
            out.append((v, BaselineEntry(key, v.code,
                                         fingerprint(v, key, lines, seen, every_line=True),
                                         statement)))
    return out


@dataclass
class BaselineFileOutcome:
    """What one baseline file did in a run.

    Attributes:
        path: the baseline file (absolute).
        baselined: violations found in it (not reported).
        stale: its entries of checked files and reported codes that no longer occur (with an
            update, dropped from it), in the file's order.
        added: entries an update (``WRITE``) recorded, in the file's order.
        refused: new violations ``RATCHET`` did not record (still reported).
        written: whether an update rewrote the file (not when it already held the result).
        size: the number of entries the file holds after the run.
    """

    path: str
    baselined: list[Violation] = field(default_factory=list)
    stale: list[BaselineEntry] = field(default_factory=list)
    added: list[BaselineEntry] = field(default_factory=list)
    refused: list[Violation] = field(default_factory=list)
    written: bool = False
    size: int = 0


@dataclass
class BaselineOutcome:
    """A run's violations after its baselines.

    Attributes:
        reported: the violations no baseline holds, in the order given (what the run reports
            and its exit status follows).
        files: one outcome per baseline file in force, by path.
    """

    reported: list[Violation]
    files: list[BaselineFileOutcome] = field(default_factory=list)

    @property
    def baselined(self) -> int:
        """How many violations the baselines hold (not reported)."""
        return sum(len(file.baselined) for file in self.files)


def apply_baselines(violations: Sequence[Violation], checked: Sequence[str],
                    config: ConfigResolver, update: BaselineUpdate = BaselineUpdate.NONE, *,
                    cwd: str | None = None, sources: Mapping[str, bytes] | None = None
                    ) -> BaselineOutcome:
    """Leave out the violations that each file's baseline (:attr:`Config.baseline`) holds;
    with ``update``, rewrite the baseline files.

    Args:
        violations: a run's violations (what is left after fixing).
        checked: the files the run checked (paths as it names them); the entries of other
            files are never stale.
        config: the run's settings per file (which baseline, which codes are reported).
        update: whether and how to rewrite the baseline files (:class:`BaselineUpdate`).
        cwd: the directory the paths are relative to (default: the working directory).
        sources: path -> bytes of files whose violations refer to text not on disk.

    Returns:
        The :class:`BaselineOutcome`; without any baseline in force, every violation is
        reported and ``files`` is empty.

    Raises:
        BaselineError: a baseline file is missing (unless ``WRITE`` creates it), unreadable,
            malformed or cannot be written; or an update was asked for and no checked file
            has a baseline.
    """
    base = os.path.abspath(cwd or os.getcwd())
    governed = baselines_in_force([*checked, *(v.path for v in violations)], config, base)
    if not governed:
        if update is not BaselineUpdate.NONE and checked:
            raise BaselineError("no baseline file is named for the checked files "
                                "(--baseline FILE, or `baseline` in [tool.gpu-test-lint])")
        return BaselineOutcome(list(violations))
    held: set[Violation] = set()
    files: list[BaselineFileOutcome] = []
    for baseline_path in sorted(governed):
        members = set(governed[baseline_path])
        outcome = _apply_one(baseline_path, [v for v in violations if v.path in members],
                             [p for p in checked if p in members], config, update, base,
                             sources)
        held.update(outcome.baselined)
        if update is BaselineUpdate.WRITE:
            held.update(v for v in violations if v.path in members)
        files.append(outcome)
    return BaselineOutcome([v for v in violations if v not in held], files)


def apply_run_baselines(result: RunResult, config: Config | ConfigResolver,
                        update: BaselineUpdate = BaselineUpdate.NONE, *,
                        violations: Sequence[Violation] | None = None,
                        sources: Mapping[str, bytes] | None = None,
                        cwd: str | None = None) -> BaselineOutcome:
    """:func:`apply_baselines` for a run: the files checked without an error are those whose
    entries can go stale, and a fixed file's fingerprints are taken from its fixed text.

    Args:
        result: the run (:func:`lint_gpu_tests.api.check_paths`, after any fixing).
        config: the run's settings.
        update: :class:`BaselineUpdate` (``WRITE``: ``--update-baseline``; ``RATCHET``:
            ``--ratchet``).
        violations: the violations to filter (default: ``result.violations``).
        sources: path -> the text its violations refer to where that is not on disk (a
            buffer read from stdin).
        cwd: the directory the run's paths are relative to (default: the working directory).

    Raises:
        BaselineError: as :func:`apply_baselines`.
    """
    texts = {file.path: file.new_source for file in result.files
             if file.new_source is not None}
    texts.update(sources or {})
    checked = [file.path for file in result.files if file.error is None]
    return apply_baselines(result.violations if violations is None else violations, checked,
                           ConfigResolver.of(config), update, cwd=cwd, sources=texts)


def _apply_one(path: str, violations: list[Violation], checked: list[str],
               config: ConfigResolver, update: BaselineUpdate, cwd: str,
               sources: Mapping[str, bytes] | None) -> BaselineFileOutcome:
    """:func:`apply_baselines` for the baseline file ``path`` and the files it governs."""
    entries = read_baseline(path, missing_ok=update is BaselineUpdate.WRITE)
    directory = os.path.dirname(path)
    pairs = baseline_entries(violations, directory, cwd=cwd, sources=sources)
    current = {entry for _, entry in pairs}
    outcome = BaselineFileOutcome(path, baselined=[v for v, e in pairs if e in entries])
    scope = {relative_path(p, directory, cwd): p for p in checked}
    outcome.stale = sorted(
        (e for e in entries if e not in current and e.path in scope
         and config.for_file(os.path.join(cwd, scope[e.path])).is_code_enabled(e.code)),
        key=BaselineEntry.sort_key)
    if update is BaselineUpdate.NONE:
        outcome.size = len(entries)
        return outcome
    # A recorded violation is written as found now (its `statement` as the file has it).
    kept = entries - set(outcome.stale) - current
    if update is BaselineUpdate.WRITE:
        outcome.added = sorted(current - entries, key=BaselineEntry.sort_key)
        result = kept | current
    else:
        outcome.refused = [v for v, e in pairs if e not in entries]
        result = kept | {entry for entry in current if entry in entries}
    try:
        outcome.written = write_baseline(path, result)
    except OSError as exc:
        raise BaselineError(f"cannot write the baseline file {path}: {exc}") from exc
    outcome.size = len(result)
    return outcome


def _plural(count: int, word: str, many: str = "") -> str:
    return f"{count} {word if count == 1 else many or word + 's'}"


def baseline_lines(outcome: BaselineOutcome, update: BaselineUpdate, *,
                   cwd: str | None = None) -> list[str]:
    """What a run says of its baselines, per file: how many violations each held, which
    entries went stale (with an update: dropped, listed), what was added or refused, and
    whether the file was written. No lines without a baseline in force.

    Args:
        outcome: the run's :class:`BaselineOutcome`.
        update: the update the run made.
        cwd: baseline files under it are named relative to it.
    """
    base = os.path.abspath(cwd or os.getcwd())
    lines: list[str] = []
    for file in outcome.files:
        name = os.path.relpath(file.path, base)
        if name.startswith(os.pardir):
            name = file.path
        if file.baselined and update is not BaselineUpdate.WRITE:
            lines.append(f"{_plural(len(file.baselined), 'violation')} in the baseline "
                         f"{name}, not reported.")
        if file.stale and update is BaselineUpdate.NONE:
            lines.append(f"{_plural(len(file.stale), 'entry', 'entries')} of the baseline "
                         f"{name} no longer occur{'s' if len(file.stale) == 1 else ''} "
                         "(--update-baseline or --ratchet drops them).")
        elif file.stale:
            lines.append(f"Dropped {_plural(len(file.stale), 'entry', 'entries')} that no "
                         f"longer occur{'s' if len(file.stale) == 1 else ''} from {name}:")
            lines += [f"  {e.path}: {e.code} {e.statement}".rstrip() for e in file.stale]
        if file.added:
            lines.append(f"Added {_plural(len(file.added), 'violation')} to the baseline "
                         f"{name}.")
        if file.refused:
            lines.append(f"{_plural(len(file.refused), 'new violation')} not added to the "
                         f"baseline {name} (--ratchet).")
        if file.written:
            lines.append(f"Wrote {name} ({_plural(file.size, 'entry', 'entries')}).")
    return lines

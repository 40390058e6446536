"""``gpu-test-lint server``: a language server over stdio, built on pygls.

An editor gets, for each ``file://`` document it opens, changes or saves, the diagnostics
``gpu-test-lint check --stdin-filename PATH`` reports for the document's text (the nearest
config file's settings, its baseline honoured, excluded files left out), and code actions
that apply what ``check --fix`` (``--unsafe-fixes`` for an unsafe fix) would write, or add
``# noqa: CODE``. Everything is computed by the library (:mod:`lint_gpu_tests.api`); this
module only translates to and from the protocol.

pygls is an optional dependency (``pip install 'gpu-test-lint[server]'``): this module
imports it at the top, and only ``gpu-test-lint server`` imports this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import TextDocument

from lint_gpu_tests import __version__
from lint_gpu_tests.api import (
    BaselineError,
    ConfigError,
    ConfigResolver,
    FileResult,
    RunOptions,
    Violation,
    apply_run_baselines,
    buffer_units,
    check_buffer,
)
from lint_gpu_tests.checking.checker import add_noqa
from lint_gpu_tests.codes import PARSE_ERROR_CODE
from lint_gpu_tests.ftypes import Applicability, FixInfo, withholds_for_imported_factory
from lint_gpu_tests.report.output import rule_url

__all__ = ["DEBOUNCE_SECONDS", "SOURCE", "GpuTestLintServer", "serve"]

SOURCE = "gpu-test-lint"
"""The ``source`` of every diagnostic the server publishes."""

DEBOUNCE_SECONDS = 0.3
"""How long the server waits after a change before checking the document again (a newer
change within that time restarts the wait)."""

FIX_ALL_TITLE = "Fix all safe gpu-test-lint violations"
"""The title of the code action that applies every safe fix (kind ``source.fixAll``)."""


@dataclass(frozen=True)
class _Checked:
    """A document's last check: the text checked and the violations it reported (after the
    baseline)."""

    text: str
    violations: tuple[Violation, ...]


class GpuTestLintServer(LanguageServer):
    """The language server: pygls' :class:`~pygls.lsp.server.LanguageServer` with the
    documents' last checks and the pending debounced checks."""

    def __init__(self) -> None:
        super().__init__(SOURCE, __version__)
        self.checked: dict[str, _Checked] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}


def _path(uri: str) -> str | None:
    """The file system path of a ``file://`` URI; ``None`` for any other scheme."""
    if not uri.startswith("file:"):
        return None
    return to_fs_path(uri)


def _file_result(text: str, path: str, options: RunOptions) -> FileResult | None:
    """``text`` checked (or fixed, as ``options`` say) as the file at ``path``, with the
    nearest config file's settings, as ``check --stdin-filename`` does; ``None`` when the
    config's excludes leave the file out.

    Raises:
        ConfigError: when the config file that governs ``path`` is invalid.
    """
    result = check_buffer(text.encode("utf-8"), path, ConfigResolver(), options)
    return result.files[0] if result.files else None


def _violations(text: str, path: str) -> tuple[list[Violation], str | None]:
    """The violations ``check`` reports for ``text`` as the file at ``path`` (those the
    baseline holds left out), and an error message for the editor (``None``: none)."""
    source = text.encode("utf-8")
    resolver = ConfigResolver()
    try:
        result = check_buffer(source, path, resolver, RunOptions(force_exclude=True))
    except ConfigError as exc:
        return [], str(exc)
    if not result.files:
        return [], None
    error = result.files[0].error
    try:
        reported = apply_run_baselines(result, resolver, sources={path: source}).reported
    except BaselineError as exc:
        return result.violations, str(exc)
    return list(reported), error


def _range(lines: Sequence[str], violation: Violation, server: LanguageServer
           ) -> types.Range:
    """``violation``'s span as a protocol range: 0-based lines, columns in the code units
    the client and the server agreed on (UTF-16 unless the client asked otherwise)."""
    codec = server.workspace.position_codec
    start, end = violation.location, violation.end_location
    return codec.range_to_client_units(lines, types.Range(
        start=types.Position(line=start.row - 1, character=start.column - 1),
        end=types.Position(line=end.row - 1, character=end.column - 1)))


def _applicability(violation: Violation) -> str:
    """``"safe"``, ``"unsafe"`` or ``"none"``: how ``violation`` can be fixed."""
    fix = violation.fix
    return Applicability.NONE.value if fix is None else fix.applicability.value


def _diagnostic(lines: Sequence[str], violation: Violation, server: LanguageServer
                ) -> types.Diagnostic:
    """``violation`` as a protocol diagnostic (``data``: its code and fix applicability)."""
    severity = (types.DiagnosticSeverity.Error if violation.code == PARSE_ERROR_CODE
                else types.DiagnosticSeverity.Error)
    return types.Diagnostic(
        range=_range(lines, violation, server),
        message=violation.message,
        severity=severity,
        code=violation.code,
        code_description=types.CodeDescription(href=rule_url(violation.code)),
        source=SOURCE,
        data={"code": violation.code, "fix": _applicability(violation)},
    )


def publish(server: GpuTestLintServer, uri: str) -> None:
    """Check the document at ``uri`` (a ``file://`` one, still open) and publish its
    diagnostics; an error is shown to the user as a log message."""
    server.pending.pop(uri, None)
    path = _path(uri)
    if path is None:
        return
    document = server.workspace.get_text_document(uri)
    text = document.source
    violations, error = _violations(text, path)
    if error is not None:
        server.window_log_message(types.LogMessageParams(
            type=types.MessageType.Error, message=f"gpu-test-lint: {path}: {error}"))
    server.checked[uri] = _Checked(text, tuple(violations))
    lines = document.lines
    server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
        uri=uri, version=document.version,
        diagnostics=[_diagnostic(lines, v, server) for v in violations]))


def _replace_all(lines: Sequence[str], new_text: str, server: LanguageServer
                 ) -> types.TextEdit:
    """An edit that replaces the whole of a text whose lines are ``lines`` with
    ``new_text``."""
    end = server.workspace.position_codec.position_to_client_units(
        lines, types.Position(line=len(lines), character=0))
    return types.TextEdit(range=types.Range(start=types.Position(line=0, character=0),
                                            end=end), new_text=new_text)


def _whole_document(document: TextDocument, new_text: str, server: LanguageServer
                    ) -> types.WorkspaceEdit:
    """An edit that replaces the whole of ``document`` with ``new_text``."""
    return types.WorkspaceEdit(
        changes={document.uri: [_replace_all(document.lines, new_text, server)]})


_Key = tuple[str, int, int, int, int]
"""A violation's code and span, which finds it among another check's violations."""


def _key(violation: Violation) -> _Key:
    start, end = violation.location, violation.end_location
    return violation.code, start.row, start.column, end.row, end.column


def _unit_fixes(server: GpuTestLintServer, here: Sequence[Violation], text: str, path: str
                ) -> dict[_Key, tuple[FixInfo, types.WorkspaceEdit]]:
    """The fix of each violation of ``here`` that a fix unit across modules removes (a
    factory helper of another module and all its callers, :func:`buffer_units`), by the
    violation's :func:`_key`, with the edit of every file of the unit: a versioned one for
    each document open in the editor (its text is the one planned on), an unversioned one
    for each other file."""
    if not withholds_for_imported_factory(here):
        return {}
    workspace = server.workspace
    buffers: dict[str, bytes] = {}
    for uri, document in workspace.text_documents.items():
        other = _path(uri)
        if other is not None:
            buffers[other] = document.source.encode("utf-8")
    try:
        units = buffer_units(text.encode("utf-8"), path, ConfigResolver(), buffers)
    except ConfigError:
        return {}
    out: dict[_Key, tuple[FixInfo, types.WorkspaceEdit]] = {}
    for unit in units:
        changes: list[types.TextDocumentEdit] = []
        try:
            for file, new in unit.sources.items():
                uri = from_fs_path(file) or file
                document = workspace.text_documents.get(uri)
                if document is not None:
                    lines, version = document.lines, document.version
                else:  # the bytes the unit was planned on: the file on disk
                    lines = Path(file).read_bytes().decode("utf-8").splitlines(True)
                    version = None
                changes.append(types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=version),
                    edits=[_replace_all(lines, new.decode("utf-8"), server)]))
        except (OSError, UnicodeDecodeError):
            continue  # a file the editor cannot be given as text: no action
        edit = types.WorkspaceEdit(document_changes=changes)
        for violation in unit.violations:
            assert violation.fix is not None  # the unit's
            out[_key(violation)] = (violation.fix, edit)
    return out


def _fixed_text(text: str, path: str, unsafe: bool) -> str | None:
    """What ``check --fix`` (with ``unsafe``: ``--unsafe-fixes``) would write for ``text``
    as the file at ``path``; ``None`` when it would change nothing or fails."""
    try:
        result = _file_result(text, path, RunOptions(fix=True, unsafe_fixes=unsafe))
    except ConfigError:
        return None
    if result is None or result.error is not None or result.new_source is None:
        return None
    return result.new_source.decode("utf-8")


def _in_range(violation: Violation, wanted: types.Range) -> bool:
    """Whether ``violation``'s rows meet the rows of ``wanted`` (0-based, inclusive)."""
    return (violation.location.row - 1 <= wanted.end.line
            and violation.end_location.row - 1 >= wanted.start.line)


def _wants(only: Sequence[str] | None, kind: str) -> bool:
    """Whether a client that asked for the kinds ``only`` wants an action of ``kind``."""
    return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)


def code_actions(server: GpuTestLintServer, params: types.CodeActionParams
                 ) -> list[types.CodeAction]:
    """The code actions for ``params``' range: fix each fixable violation there (safe ones
    first; each applies what ``check --fix`` would write for the file, with
    ``--unsafe-fixes`` for an unsafe one; for a violation a fix unit across modules removes,
    that unit's rewrite of all its files), fix all safe violations, and add ``# noqa``."""
    uri = params.text_document.uri
    path = _path(uri)
    if path is None:
        return []
    document = server.workspace.get_text_document(uri)
    text = document.source
    checked = server.checked.get(uri)
    if checked is None or checked.text != text:
        checked = _Checked(text, tuple(_violations(text, path)[0]))
        server.checked[uri] = checked
    only = params.context.only
    quick_fix, fix_all = types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll
    fixed: dict[bool, str | None] = {}

    def fixed_text(unsafe: bool) -> str | None:
        if unsafe not in fixed:
            fixed[unsafe] = _fixed_text(text, path, unsafe)
        return fixed[unsafe]

    lines = document.lines
    here = [v for v in checked.violations if _in_range(v, params.range)]
    actions: list[types.CodeAction] = []
    if _wants(only, quick_fix):
        units = _unit_fixes(server, here, text, path)
        offered: list[tuple[Violation, FixInfo, types.WorkspaceEdit | None]] = []
        for violation in here:
            if violation.fix is not None and violation.fix.available:
                offered.append((violation, violation.fix, None))
            elif _key(violation) in units:
                offered.append((violation, *units[_key(violation)]))
        offered.sort(key=lambda o: o[1].applicability is not Applicability.SAFE)
        for violation, fix, edit in offered:
            unsafe = fix.applicability is Applicability.UNSAFE
            if edit is None:
                new_text = fixed_text(unsafe)
                if new_text is None:
                    continue
                edit = _whole_document(document, new_text, server)
            label = " (unsafe)" if unsafe else ""
            actions.append(types.CodeAction(
                title=f"Fix {violation.code}: {fix.title}{label}",
                kind=quick_fix, diagnostics=[_diagnostic(lines, violation, server)],
                is_preferred=not unsafe, edit=edit))
    if _wants(only, fix_all):
        new_text = fixed_text(False)
        if new_text is not None:
            actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=fix_all,
                                            edit=_whole_document(document, new_text, server)))
    if _wants(only, quick_fix):
        for violation in here:
            if violation.code == PARSE_ERROR_CODE:
                continue
            new, _ = add_noqa(text.encode("utf-8"), [violation])
            if new is None:
                continue
            actions.append(types.CodeAction(
                title=f"Add `# noqa: {violation.code}`", kind=quick_fix,
                diagnostics=[_diagnostic(lines, violation, server)],
                edit=_whole_document(document, new.decode("utf-8"), server)))
    return actions


def make_server() -> GpuTestLintServer:
    """The language server with its features registered (not started)."""
    server = GpuTestLintServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GpuTestLintServer, params: types.DidOpenTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GpuTestLintServer, params: types.DidSaveTextDocumentParams) -> None:
        _cancel(ls, params.text_document.uri)
        publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: GpuTestLintServer,
                         params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        _cancel(ls, uri)
        ls.pending[uri] = asyncio.get_running_loop().call_later(
            DEBOUNCE_SECONDS, publish, ls, uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GpuTestLintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        _cancel(ls, uri)
        ls.checked.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri,
                                                                            diagnostics=[]))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix,
                           types.CodeActionKind.SourceFixAll]))
    def code_action(ls: GpuTestLintServer, params: types.CodeActionParams
                    ) -> list[types.CodeAction]:
        return code_actions(ls, params)

    return server


def _cancel(server: GpuTestLintServer, uri: str) -> None:
    """Forget the debounced check of ``uri`` that has not run yet, if any."""
    handle = server.pending.pop(uri, None)
    if handle is not None:
        handle.cancel()


def serve() -> None:
    """Run the language server on stdin and stdout until the client says exit."""
    make_server().start_io()

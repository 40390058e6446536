"""``gpu-test-lint server``: the language server, run as a subprocess and driven by pygls'
own client over stdio, as an editor drives it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.client import BaseLanguageClient
from pygls.uris import from_fs_path

T = TypeVar("T")

TIMEOUT = 30.0
"""Seconds any one answer of the server may take before the test fails."""

DOCUMENT = '''\
import gc

from vllm import LLM


def test_generate():
    llm = LLM(model="facebook/opt-125m")
    assert llm.generate("x")
    del llm
    gc.collect()


def test_label():
    label = "é𝔘"; engine = LLM(model="facebook/opt-125m")
    assert engine.generate(label)
'''

CLEAN = '''\
def test_nothing():
    assert 1 + 1 == 2
'''

#: What the server publishes for DOCUMENT: code, (start line, character), (end line,
#: character), 0-based, characters in UTF-16 code units (``𝔘`` takes two).
EXPECTED = [
    ("GPU001", (6, 10), (6, 40)),
    ("GPU004", (8, 4), (8, 11)),
    ("GPU004", (9, 4), (9, 16)),
    ("GPU001", (13, 28), (13, 58)),
]


async def _within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, TIMEOUT)


def _check_json(path: Path) -> list[dict[str, Any]]:
    """What ``gpu-test-lint check --output-format json`` reports for ``path``."""
    done = subprocess.run([sys.executable, "-m", "lint_gpu_tests", "check", "--no-cache",
                           "--output-format", "json", str(path)], cwd=path.parent,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    reported: list[dict[str, Any]] = json.loads(done.stdout)
    return reported


def _utf16_offset(text: str, position: types.Position) -> int:
    """The index in ``text`` of a protocol position (UTF-16 characters)."""
    lines = text.splitlines(keepends=True)
    offset = sum(len(line) for line in lines[:position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return offset + index
        units += len(char.encode("utf-16-le")) // 2
    return offset + len(line)


def _apply(text: str, edit: types.WorkspaceEdit, uri: str) -> str:
    """``text`` with ``edit``'s changes of ``uri`` applied (last first)."""
    assert edit.changes is not None and list(edit.changes) == [uri]
    for change in sorted(edit.changes[uri], key=lambda c: (c.range.start.line,
                                                          c.range.start.character),
                         reverse=True):
        start = _utf16_offset(text, change.range.start)
        end = _utf16_offset(text, change.range.end)
        text = text[:start] + change.new_text + text[end:]
    return text


class _Editor:
    """A language client over the server's stdio, which queues the diagnostics it is sent."""

    def __init__(self) -> None:
        self.client = BaseLanguageClient("test-editor", "1")
        self.published: asyncio.Queue[types.PublishDiagnosticsParams] = asyncio.Queue()

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def diagnostics(params: types.PublishDiagnosticsParams) -> None:
            self.published.put_nowait(params)

    async def start(self, root: Path) -> None:
        await self.client.start_io(sys.executable, "-m", "lint_gpu_tests", "server", cwd=root)
        await _within(self.client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=from_fs_path(str(root)))))
        self.client.initialized(types.InitializedParams())

    async def diagnostics(self) -> types.PublishDiagnosticsParams:
        return await _within(self.published.get())

    async def stop(self) -> None:
        await _within(self.client.shutdown_async(None))
        self.client.exit(None)
        await _within(self.client.stop())


def _spans(diagnostics: Sequence[types.Diagnostic]) -> list[tuple[Any, ...]]:
    return [(d.code, (d.range.start.line, d.range.start.character),
             (d.range.end.line, d.range.end.character)) for d in diagnostics]


def test_diagnostics_code_actions_and_changes(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.gpu-test-lint]\n")
    path = tmp_path / "test_engine.py"
    path.write_text(DOCUMENT, encoding="utf-8")
    uri = from_fs_path(str(path))
    assert uri is not None
    reported = _check_json(path)

    async def session() -> None:
        editor = _Editor()
        await editor.start(tmp_path)
        try:
            editor.client.text_document_did_open(types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python",
                                                     version=1, text=DOCUMENT)))
            published = await editor.diagnostics()
            assert published.uri == uri
            assert _spans(published.diagnostics) == EXPECTED
            # The codes, and the ranges as `check` reports them (1-based; the columns of
            # `check` count characters, the protocol's UTF-16 units).
            assert [(d.code, d.range.start.line + 1, d.range.end.line + 1)
                    for d in published.diagnostics] == [
                (v["code"], v["location"]["row"], v["end_location"]["row"]) for v in reported]
            first = published.diagnostics[0]
            assert (first.source, first.severity, first.message) == (
                "gpu-test-lint", types.DiagnosticSeverity.Error, reported[0]["message"])
            assert first.code_description is not None
            assert first.code_description.href == reported[0]["url"]
            assert [d.data for d in published.diagnostics] == [
                {"code": "GPU001", "fix": "safe"}, {"code": "GPU004", "fix": "safe"},
                {"code": "GPU004", "fix": "safe"}, {"code": "GPU001", "fix": "none"}]

            actions = await _within(editor.client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=types.Range(start=types.Position(line=0, character=0),
                                      end=types.Position(line=15, character=0)),
                    context=types.CodeActionContext(diagnostics=published.diagnostics))))
            assert actions is not None
            titles = [(a.title, a.kind) for a in actions if isinstance(a, types.CodeAction)]
            assert titles == [
                ("Fix GPU001: Wrap in `with vllm_runner(...)`", "quickfix"),
                ("Fix GPU004: Remove the manual cleanup", "quickfix"),
                ("Fix GPU004: Remove the manual cleanup", "quickfix"),
                ("Fix all safe gpu-test-lint violations", "source.fixAll"),
                ("Add `# noqa: GPU001`", "quickfix"),
                ("Add `# noqa: GPU004`", "quickfix"),
                ("Add `# noqa: GPU004`", "quickfix"),
                ("Add `# noqa: GPU001`", "quickfix"),
            ]
            noqa = actions[-1]
            assert isinstance(noqa, types.CodeAction) and noqa.edit is not None
            assert _apply(DOCUMENT, noqa.edit, uri) == DOCUMENT.replace(
                'opt-125m")\n    assert engine', 'opt-125m")  # noqa: GPU001\n    assert engine')
            fix_all = next(a for a in actions if isinstance(a, types.CodeAction)
                           and a.kind == types.CodeActionKind.SourceFixAll)
            assert fix_all.edit is not None
            fixed = _apply(DOCUMENT, fix_all.edit, uri)
            one = actions[0]
            assert isinstance(one, types.CodeAction) and one.edit is not None
            assert _apply(DOCUMENT, one.edit, uri) == fixed

            editor.client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=CLEAN)]))
            cleaned = await editor.diagnostics()
            assert (cleaned.uri, cleaned.version, list(cleaned.diagnostics)) == (uri, 2, [])
        finally:
            await editor.stop()
        done = subprocess.run([sys.executable, "-m", "lint_gpu_tests", "check", "--no-cache",
                               "--fix", str(path)], cwd=tmp_path, capture_output=True,
                              timeout=TIMEOUT, check=False)
        assert done.returncode == 1, done.stderr
        assert fixed.encode("utf-8") == path.read_bytes()

    asyncio.run(session())


def test_server_without_pygls_exits_2() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.modules['pygls'] = None; sys.argv = ['gpu-test-lint', 'server']; "
         "from lint_gpu_tests.cli import run; run()"],
        capture_output=True, text=True, timeout=TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("error: the language server needs pygls (pygls is not installed): "
                           "pip install 'gpu-test-lint[server]'\n")


def test_check_does_not_import_pygls(tmp_path: Path) -> None:
    (tmp_path / "test_engine.py").write_text(DOCUMENT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys\nfrom lint_gpu_tests.cli import main\n"
         "try:\n    main(['check', '--no-cache', 'test_engine.py'])\n"
         "except SystemExit as exc:\n"
         "    print(exc.code, sorted(m for m in sys.modules if m == 'lint_gpu_tests.server'"
         " or m.split('.')[0] in ('pygls', 'lsprotocol')))\n"],
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.stdout.splitlines()[-1] == "1 []"

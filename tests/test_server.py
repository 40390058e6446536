"""``gpu-test-lint server``: the language server, run as a subprocess and driven by pygls'
own client over stdio, as an editor drives it."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.client import BaseLanguageClient
from pygls.uris import from_fs_path, to_fs_path

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
        result = await _within(self.client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=from_fs_path(str(root)))))
        assert result.server_info is not None and result.server_info.name == "gpu-test-lint"
        provider = result.capabilities.code_action_provider
        assert isinstance(provider, types.CodeActionOptions)
        assert list(provider.code_action_kinds or []) == ["quickfix", "source.fixAll"]
        self.client.initialized(types.InitializedParams())

    async def diagnostics(self) -> types.PublishDiagnosticsParams:
        return await _within(self.published.get())

    async def open(self, uri: str, text: str) -> types.PublishDiagnosticsParams:
        """didOpen ``text`` as ``uri``; the diagnostics published for it."""
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                                 text=text)))
        return await self.diagnostics()

    def send_change(self, uri: str, text: str, version: int) -> None:
        """didChange ``uri`` to ``text`` (whole)."""
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    async def change(self, uri: str, text: str, version: int
                     ) -> types.PublishDiagnosticsParams:
        """didChange ``uri`` to ``text`` (whole); the diagnostics published next."""
        self.send_change(uri, text, version)
        return await self.diagnostics()

    async def code_actions(self, uri: str, lines: tuple[int, int],
                           diagnostics: Sequence[types.Diagnostic],
                           only: list[str] | None = None) -> list[types.CodeAction]:
        """The code actions for the rows ``lines`` (0-based, the end exclusive)."""
        actions = await _within(self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(start=types.Position(line=lines[0], character=0),
                                  end=types.Position(line=lines[1], character=0)),
                context=types.CodeActionContext(diagnostics=list(diagnostics), only=only))))
        assert actions is not None
        return [a for a in actions if isinstance(a, types.CodeAction)]

    async def stop(self) -> None:
        await _within(self.client.shutdown_async(None))
        self.client.exit(None)
        await _within(self.client.stop())


def _spans(diagnostics: Sequence[types.Diagnostic]) -> list[tuple[Any, ...]]:
    return [(d.code, (d.range.start.line, d.range.start.character),
             (d.range.end.line, d.range.end.character)) for d in diagnostics]


def _fixed_by_check(path: Path, *options: str) -> bytes:
    """What ``check --fix OPTIONS`` writes for ``path`` (the file is put back as it was)."""
    before = path.read_bytes()
    subprocess.run([sys.executable, "-m", "lint_gpu_tests", "check", "--no-cache", "--fix",
                    *options, str(path)], cwd=path.parent, capture_output=True,
                   timeout=TIMEOUT, check=False)
    after = path.read_bytes()
    path.write_bytes(before)
    return after


def _document(root: Path, name: str, text: str, config: str = "[tool.gpu-test-lint]\n"
              ) -> tuple[Path, str]:
    """``text`` written as ``root/name`` beside a ``pyproject.toml`` holding ``config``; the
    file and its URI."""
    (root / "pyproject.toml").write_text(config)
    path = root / name
    path.write_text(text, encoding="utf-8")
    uri = from_fs_path(str(path))
    assert uri is not None
    return path, uri


def test_diagnostics_code_actions_and_changes(tmp_path: Path) -> None:
    path, uri = _document(tmp_path, "test_engine.py", DOCUMENT)
    reported = _check_json(path)

    async def session() -> None:
        editor = _Editor()
        await editor.start(tmp_path)
        try:
            published = await editor.open(uri, DOCUMENT)
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

            actions = await editor.code_actions(uri, (0, 15), published.diagnostics)
            titles = [(a.title, a.kind) for a in actions]
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
            assert noqa.edit is not None
            assert _apply(DOCUMENT, noqa.edit, uri) == DOCUMENT.replace(
                'opt-125m")\n    assert engine', 'opt-125m")  # noqa: GPU001\n    assert engine')
            fix_all = actions[3]
            assert fix_all.edit is not None
            fixed = _apply(DOCUMENT, fix_all.edit, uri)
            assert actions[0].edit is not None
            assert _apply(DOCUMENT, actions[0].edit, uri) == fixed

            # Changes in quick succession are checked once, as the last one left the text.
            editor.send_change(uri, DOCUMENT.replace("test_label", "test_other"), 2)
            cleaned = await editor.change(uri, CLEAN, 3)
            assert (cleaned.uri, cleaned.version, list(cleaned.diagnostics)) == (uri, 3, [])
            assert editor.published.empty()
        finally:
            await editor.stop()
        assert fixed.encode("utf-8") == _fixed_by_check(path)

    asyncio.run(session())


def test_server_without_pygls_exits_2() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.modules['pygls'] = None; sys.argv = ['gpu-test-lint', 'server']; "
         "from lint_gpu_tests.interfaces.cli import run; run()"],
        capture_output=True, text=True, timeout=TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("error: the language server needs pygls (pygls is not installed): "
                           "pip install 'gpu-test-lint[server]'\n")


def test_check_does_not_import_pygls(tmp_path: Path) -> None:
    (tmp_path / "test_engine.py").write_text(DOCUMENT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys\nfrom lint_gpu_tests.interfaces.cli import main\n"
         "try:\n    main(['check', '--no-cache', 'test_engine.py'])\n"
         "except SystemExit as exc:\n"
         "    print(exc.code, sorted(m for m in sys.modules if m == "
         "'lint_gpu_tests.interfaces.server'"
         " or m.split('.')[0] in ('pygls', 'lsprotocol')))\n"],
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.stdout.splitlines()[-1] == "1 []"


ENVIRONMENT = '''\
import os

from vllm import LLM

os.environ["VLLM_USE_V1"] = "1"


def test_generate():
    llm = LLM(model="facebook/opt-125m")
    assert llm.generate("x")
'''


def test_unsafe_fix_comes_after_the_safe_one_and_applies_unsafe_fixes(tmp_path: Path) -> None:
    path, uri = _document(tmp_path, "test_env.py", ENVIRONMENT)

    async def session() -> list[types.CodeAction]:
        editor = _Editor()
        await editor.start(tmp_path)
        try:
            published = await editor.open(uri, ENVIRONMENT)
            assert _spans(published.diagnostics) == [("GPU008", (4, 0), (4, 31)),
                                                     ("GPU001", (8, 10), (8, 40))]
            assert [d.data for d in published.diagnostics] == [
                {"code": "GPU008", "fix": "unsafe"}, {"code": "GPU001", "fix": "safe"}]
            return await editor.code_actions(uri, (4, 8), published.diagnostics,
                                             only=[types.CodeActionKind.QuickFix])
        finally:
            await editor.stop()

    actions = asyncio.run(session())
    assert [a.title for a in actions] == [
        "Fix GPU001: Wrap in `with vllm_runner(...)`",
        "Fix GPU008: Use `monkeypatch.setenv` / `monkeypatch.delenv` (unsafe)",
        "Add `# noqa: GPU008`",
        "Add `# noqa: GPU001`",
    ]
    safe, unsafe = (a.edit for a in actions[:2])
    assert safe is not None and unsafe is not None
    assert _apply(ENVIRONMENT, safe, uri).encode("utf-8") == _fixed_by_check(path)
    fixed_unsafe = _apply(ENVIRONMENT, unsafe, uri).encode("utf-8")
    assert fixed_unsafe == _fixed_by_check(path, "--unsafe-fixes")
    assert b"monkeypatch" not in _fixed_by_check(path)
    assert b"mp.setenv(\"VLLM_USE_V1\", \"1\")" in fixed_unsafe


def test_the_baseline_of_the_config_is_honoured(tmp_path: Path) -> None:
    _, uri = _document(tmp_path, "test_env.py", ENVIRONMENT,
                       '[tool.gpu-test-lint]\nbaseline = "baseline.json"\n')
    subprocess.run([sys.executable, "-m", "lint_gpu_tests", "check", "--no-cache",
                    "--update-baseline", "."], cwd=tmp_path, capture_output=True,
                   timeout=TIMEOUT, check=True)
    added = ENVIRONMENT + '\n\ndef test_more():\n    other = LLM(model="m")\n'

    async def session() -> tuple[types.PublishDiagnosticsParams, ...]:
        editor = _Editor()
        await editor.start(tmp_path)
        try:
            held = await editor.open(uri, ENVIRONMENT)
            grown = await editor.change(uri, added, 2)
            editor.client.text_document_did_save(types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=uri)))
            return held, grown, await editor.diagnostics()
        finally:
            await editor.stop()

    held, grown, saved = asyncio.run(session())
    assert list(held.diagnostics) == []
    assert _spans(grown.diagnostics) == [("GPU001", (13, 12), (13, 26))]
    assert saved == grown


CORPUS_XUNIT = Path(__file__).parent / "e2e" / "suites" / "xunit"


def test_a_fix_unit_across_modules_changes_all_its_files(tmp_path: Path) -> None:
    # The corpus's factory helper (engine_helpers.py) and its two callers; the cleanup
    # module is open with a change not saved, which the unit is planned on.
    root = tmp_path / "tree"
    shutil.copytree(CORPUS_XUNIT, root)
    shutdown, uri = _document(root, "test_xunit_shutdown.py",
                              (CORPUS_XUNIT / "test_xunit_shutdown.py").read_text())
    edited = (CORPUS_XUNIT / "test_xunit_cleanup.py").read_text() + "\n# not saved yet\n"
    cleanup_uri = from_fs_path(str(root / "test_xunit_cleanup.py"))
    helpers_uri = from_fs_path(str(root / "engine_helpers.py"))
    assert cleanup_uri is not None and helpers_uri is not None

    async def session() -> list[types.CodeAction]:
        editor = _Editor()
        await editor.start(root)
        try:
            await editor.open(cleanup_uri, edited)
            await editor.change(cleanup_uri, edited, 4)
            published = await editor.open(uri, shutdown.read_text())
            # The calls of the helper (engine_helpers.py is out of the rules' scope) build
            # the engines: GPU001 there, fixed with the unit.
            assert _spans(published.diagnostics) == [("GPU001", (9, 10), (9, 24)),
                                                     ("GPU003", (10, 4), (10, 7)),
                                                     ("GPU001", (19, 10), (19, 49)),
                                                     ("GPU004", (21, 4), (21, 11))]
            assert [d.data for d in published.diagnostics] == [
                {"code": "GPU001", "fix": "none"}, {"code": "GPU003", "fix": "none"},
                {"code": "GPU001", "fix": "none"}, {"code": "GPU004", "fix": "none"}]
            return await editor.code_actions(uri, (0, 25), published.diagnostics,
                                             only=[types.CodeActionKind.QuickFix])
        finally:
            await editor.stop()

    actions = asyncio.run(session())
    unit = ("Fix GPU001: Make `setup_engine()` a `contextlib.contextmanager` over `VllmRunner` "
            "and call it in `with` statements", True)
    assert [(a.title, a.is_preferred) for a in actions] == [
        unit,
        ("Fix GPU003: Remove the finalizer (part of the GPU001 rewrite)", True),
        unit,
        ("Fix GPU004: Remove the manual cleanup", True),
        ("Add `# noqa: GPU001`", None),
        ("Add `# noqa: GPU003`", None),
        ("Add `# noqa: GPU001`", None),
        ("Add `# noqa: GPU004`", None),
    ]
    first, *others = (a.edit for a in actions[:4])
    assert first is not None and others == [first] * 3
    assert first.changes is None and first.document_changes is not None
    changes = [c for c in first.document_changes if isinstance(c, types.TextDocumentEdit)]
    assert [(c.text_document.uri, c.text_document.version) for c in changes] == [
        (helpers_uri, None), (cleanup_uri, 4), (uri, 1)]
    # Applied, the edits give what `check --fix` writes with the unsaved text saved.
    texts = {helpers_uri: (root / "engine_helpers.py").read_text(), cleanup_uri: edited,
             uri: shutdown.read_text()}
    fixed_root = tmp_path / "fixed"
    shutil.copytree(root, fixed_root)
    (fixed_root / "test_xunit_cleanup.py").write_text(edited)
    subprocess.run([sys.executable, "-m", "lint_gpu_tests", "check", "--no-cache", "--fix",
                    "."], cwd=fixed_root, capture_output=True, timeout=TIMEOUT, check=False)
    for change in changes:
        text = texts[change.text_document.uri]
        assert len(change.edits) == 1 and isinstance(change.edits[0], types.TextEdit)
        start = _utf16_offset(text, change.edits[0].range.start)
        end = _utf16_offset(text, change.edits[0].range.end)
        assert (start, end) == (0, len(text))
        name = Path(to_fs_path(change.text_document.uri)).name
        assert change.edits[0].new_text == (fixed_root / name).read_text()
        assert change.edits[0].new_text != text

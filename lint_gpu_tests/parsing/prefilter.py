"""Which files are worth parsing: a byte-level test of the names each rule starts from.

A file is analysed (parsed, then run through the rules) only when its bytes name something
an enabled rule needs; every other file is read (and hashed, for the cache) and nothing
more, so ``GPU900`` (syntax error) is reported only for files that are analysed, as ruff's
and flake8's own syntax checks already cover the rest. Each rule declares what it starts
from (``Rule.triggers``: :class:`~lint_gpu_tests.ftypes.Trigger` members, or identifiers of
its own, looked for as whole words); :func:`prefilter_for` makes the test from the triggers
of the enabled rules. What the two kinds of trigger mean, from the rules in
:mod:`lint_gpu_tests.rules`:

* ``Trigger.ENGINE`` (GPU001-GPU007): they all start from an engine or a runner
  (:mod:`lint_gpu_tests.analysis.analysis`): an engine is a call of a configured engine class, and
  however it is imported (``from vllm import LLM as E``, ``import vllm; vllm.LLM(...)``,
  ``LLM.from_engine_args(...)``) the class's own last name is written in the file; a runner
  is a call or a parameter named after the runner fixture or a runner class; GPU004's
  "receives an engine fixture" is a parameter named after an engine fixture of the module
  (whose body builds an engine or holds a runner, so it names one) or of a conftest
  (:func:`conftest names <lint_gpu_tests.checking.conftest_index.conftest_engine_fixtures>`, passed
  in); GPU007 also counts engines built through the runtime's ``vllm_runner_factory``
  parameter. An engine from a helper of another module of the tree (GPU003, GPU004, GPU007)
  is called by the helper's name, which the tree's summaries give with the conftest names
  (:mod:`lint_gpu_tests.checking.helper_index`), so a file naming one passes, when it also writes
  ``import`` (:attr:`Prefilter.imported`), although its bytes need not name ``LLM``. Cleanup
  calls, isolation decorators and runner attributes only matter in a function that owns an
  engine, so they are not needed. All of these are identifiers, looked for as whole words.
* ``Trigger.ENVIRONMENT`` (GPU008) starts from a change of ``os.environ`` or a call of
  ``os.putenv``/``os.unsetenv`` (:data:`ENVIRONMENT_CHANGE`, also the rule's own first test
  of the text): the rule finds only a subscript of ``os.environ`` (set or deleted), a call
  of its ``update``/``setdefault``/``pop`` methods, and those two functions, with
  ``os.environ`` written as ``<os>.environ``, as ``environ`` imported from ``os``, or under
  the name an ``import`` gives it (``from os import environ as env``). So a file passes when
  ``environ`` is followed (past spaces, line continuations, closing parentheses and
  comments) by ``[``, by one of those methods or by ``as``, or when it names
  ``putenv``/``unsetenv``, or calls ``MonkeyPatch(...)`` (an instance whose
  ``setenv``/``delenv`` nothing undoes leaks as a hand-made change does). A file that only
  reads ``os.environ.get(...)`` is not parsed. The
  rule reports only variables the file names with a literal (or a module constant's), so the
  file must also write the literal part of one ``environment-variables`` pattern (``VLLM_``
  of ``VLLM_*``, :func:`names_variable`); the rule's first test asks the same, so a name
  spelt with escape sequences or split across adjacent strings is not reported whichever
  rules a file passes for.

The test is conservative where bytes may not mean what they look like: an ASCII file with
an encoding declaration for a codec that is not ASCII-compatible (``utf-7``, ``utf-16``)
always passes; a non-ASCII file is decoded and NFKC-normalised first (Python normalises
identifiers so, and ``ＬＬＭ`` is ``LLM``), and passes when it cannot be decoded.
``tests/test_prefilter.py`` checks every rule example against its rule alone.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from lint_gpu_tests import codes as _codes
from lint_gpu_tests.config import Config
from lint_gpu_tests.ftypes import Trigger

__all__ = [
    "ENVIRONMENT_CHANGE",
    "changes_environment",
    "literal_run",
    "names_variable",
    "variable_fragments",
    "RUNNER_FACTORY_FIXTURE",
    "Prefilter",
    "enabled_rule_codes",
    "engine_prefilter",
    "prefilter_for",
    "rule_words",
]

_GAP = rb"(?:[\s\\)]|#[^\n]*)*"
ENVIRONMENT_CHANGE = re.compile(
    rb"environ" + _GAP + rb"(?:\[|\." + _GAP + rb"(?:update|setdefault|pop)(?![A-Za-z0-9_])"
    rb"|as(?![A-Za-z0-9_]))|putenv|unsetenv|MonkeyPatch" + _GAP + rb"\(")
"""What GPU008 needs (see the module docstring), searched in the bytes as Python reads them."""


def changes_environment(source: bytes) -> bool:
    """True when ``source`` may change the environment as GPU008 finds it
    (:data:`ENVIRONMENT_CHANGE`; the rule's own first test of a module, too)."""
    return (b"environ" in source or b"putenv" in source or b"unsetenv" in source or
            b"MonkeyPatch" in source) and ENVIRONMENT_CHANGE.search(source) is not None


def literal_run(pattern: str) -> str:
    """The longest run of literal characters in the ``fnmatch`` pattern ``pattern`` (what
    every name it matches contains: ``VLLM_`` of ``VLLM_*``); ``""`` when it has none."""
    runs, run, at = [], "", 0
    while at < len(pattern):
        char = pattern[at]
        if char in "*?":
            runs.append(run)
            run, at = "", at + 1
            continue
        if char == "[":
            end = at + 1
            if end < len(pattern) and pattern[end] == "!":
                end += 1
            if end < len(pattern) and pattern[end] == "]":
                end += 1
            end = pattern.find("]", end)
            if end != -1:  # a character class: one character of a set, not a literal
                runs.append(run)
                run, at = "", end + 1
                continue
        run += char
        at += 1
    runs.append(run)
    return max(runs, key=len)


@lru_cache(maxsize=64)
def variable_fragments(patterns: tuple[str, ...]) -> tuple[str, ...] | None:
    """The literal run (:func:`literal_run`) of each pattern of ``environment-variables``;
    ``None`` when a pattern has none (``*``): then any name may match."""
    runs = tuple(literal_run(p) for p in patterns)
    return None if not all(runs) else runs


def names_variable(source: bytes | str, patterns: tuple[str, ...]) -> bool:
    """Whether ``source`` (a file's raw bytes, or its decoded text) writes the literal part
    of a configured variable name (:func:`variable_fragments`): GPU008 reports only
    variables named in the file, so a file that writes none cannot hold its violation. In
    bytes, a fragment that is not ASCII counts as written."""
    fragments = variable_fragments(patterns)
    if fragments is None:
        return True
    if isinstance(source, str):
        return any(fragment in source for fragment in fragments)
    return any(not fragment.isascii() or fragment.encode("ascii") in source
               for fragment in fragments)


RUNNER_FACTORY_FIXTURE = "vllm_runner_factory"
"""GPU007's factory fixture (``rules/gpu007_engines_oversubscribe_device/``)."""

#: Codecs under which an ASCII byte means its ASCII character (PEP 263 declarations).
_ASCII_COMPATIBLE = frozenset({"utf-8", "ascii", "latin-1", "iso8859-1", "iso8859-15",
                               "cp1252"})
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def enabled_rule_codes(config: Config, ignored: Iterable[str] = ()) -> tuple[str, ...]:
    """The rule codes ``config`` enables for a file whose ``per-file-ignores`` switch off the
    code prefixes ``ignored``. When it enables no rule but ``GPU900``, the code of every rule
    on by default (not those from outside the package): the syntax check alone looks at the
    files the rules would look at.
    """
    prefixes = tuple(ignored)
    known = tuple(_codes.RULE_CODES)  # looked up at call time: tests swap the table

    def enabled(code: str) -> bool:
        return config.is_code_enabled(code) and not code.startswith(prefixes)

    return tuple(c for c in known if enabled(c)) or (
        tuple(c for c in known if c not in _codes.OPT_IN_CODES)
        if enabled(_codes.PARSE_ERROR_CODE) else ())


def rule_words(config: Config) -> tuple[str, ...]:
    """The identifiers GPU001-GPU007 start from under ``config`` (conftest fixtures aside):
    the last name of each engine class, the runner classes, the runner fixture and the
    factory fixture."""
    names = {cls.rsplit(".", 1)[-1] for cls in config.engine_classes}
    names.update(config.runner_classes)
    names.update((config.runner_fixture, RUNNER_FACTORY_FIXTURE))
    return tuple(sorted(n for n in names if n))


@dataclass(frozen=True)
class Prefilter:
    """The names one set of enabled rules needs.

    Attributes:
        words: identifiers, found only as whole words (not inside a longer identifier).
        environment: a change of the environment (:data:`ENVIRONMENT_CHANGE`) also admits,
            in a file that names one of the ``variables`` (:func:`names_variable`).
        variables: the ``environment-variables`` patterns GPU008 reports.
        imported: identifiers that admit a file only when it also writes ``import``: the
            names of the engine helpers of other modules of the tree, which a module can
            only call after importing them.
    """

    words: tuple[bytes, ...]
    environment: bool
    variables: tuple[str, ...] = ()
    imported: tuple[bytes, ...] = ()

    def admits(self, source: bytes) -> bool:
        """Return False only when ``source`` (a file's raw bytes) names none of the needles,
        as Python would read it (see the module docstring)."""
        text = _comparable(source)
        if text is None:
            return True
        if self.environment and changes_environment(text) and names_variable(
                source, self.variables):
            return True
        if any(word in text and _has_word(text, word) for word in self.words):
            return True
        return b"import" in text and any(word in text and _has_word(text, word)
                                         for word in self.imported)


def _has_word(text: bytes, word: bytes) -> bool:
    """Whether ``word`` occurs in ``text`` as a whole word: not preceded or followed by an
    ASCII letter, digit or underscore (what ``(?<![A-Za-z0-9_])word(?![A-Za-z0-9_])`` finds,
    faster than that regular expression: ``docs/performance.md``)."""
    size, end = len(word), len(text)
    at = text.find(word)
    while at != -1:
        after = at + size
        if (at == 0 or text[at - 1] not in _WORD_BYTES) and (
                after == end or text[after] not in _WORD_BYTES):
            return True
        at = text.find(word, at + 1)
    return False


def _comparable(source: bytes) -> bytes | None:
    """``source`` as the bytes to search: itself when ASCII, else its NFKC-normalised UTF-8;
    ``None`` when its meaning cannot be told from its bytes."""
    encoding = "utf-8"
    if b"coding" in source:
        head = source.split(b"\n", 2)[:2]
        for line in (part for chunk in head for part in chunk.split(b"\r")[:2]):
            match = _COOKIE.match(line)
            if match is None:
                continue
            try:
                encoding = codecs.lookup(match.group(1).decode("ascii")).name
            except (LookupError, UnicodeDecodeError):
                return None
            if encoding not in _ASCII_COMPATIBLE:
                return None
            break
    if source.isascii():
        return source
    try:
        text = source.decode(encoding)
    except UnicodeDecodeError:
        return None
    return unicodedata.normalize("NFKC", text).encode("utf-8")


@lru_cache(maxsize=64)
def engine_prefilter(config: Config) -> Prefilter:
    """The :class:`Prefilter` of a module that can provide an engine (an engine fixture in a
    conftest): it names an engine class or a runner (:func:`rule_words`)."""
    return Prefilter(tuple(sorted(w.encode("utf-8") for w in rule_words(config))), False)


@lru_cache(maxsize=256)
def prefilter_for(config: Config, triggers: tuple[Trigger | str, ...],
                  fixtures: frozenset[str] = frozenset(),
                  helpers: frozenset[str] = frozenset()) -> Prefilter:
    """The :class:`Prefilter` of rules that start from ``triggers`` (their ``Rule.triggers``
    together: :func:`lint_gpu_tests.rules.triggers_of`) under ``config``, with ``fixtures``
    (engine fixtures from conftests, :mod:`lint_gpu_tests.checking.conftest_index`) as more words
    where a rule starts from an engine, and ``helpers`` (the names of the engine helpers of
    other modules of the tree, :mod:`lint_gpu_tests.checking.helper_index`) as words of a file that
    imports."""
    words: set[str] = set()
    environment = False
    for trigger in triggers:
        if trigger is Trigger.ENVIRONMENT:
            environment = True
        elif trigger is Trigger.ENGINE:
            words.update(rule_words(config))
            words.update(fixtures)
        else:
            words.add(trigger)
    engine = Trigger.ENGINE in triggers
    return Prefilter(tuple(sorted(w.encode("utf-8") for w in words)), environment,
                     config.environment_patterns,
                     tuple(sorted(h.encode("utf-8") for h in helpers - words)) if engine
                     else ())

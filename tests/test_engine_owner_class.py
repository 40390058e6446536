"""Helper classes that own an engine: the reasons GPU001 gives, each
no-fix branch of :mod:`lint_gpu_tests.fixplan.classes`, and the rewritten class being a runner.

The rewrites themselves are the ``engine_owner_class*`` fix fixtures (byte for byte); the
differential run of ``tests/e2e/suites/test_engine_owner_class.py`` is their proof on vLLM.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source

FIX_DIR = Path(__file__).parent / "fixtures" / "fix"
UNSAFE = ("the engine lives in helper class `{cls}`: the class becomes a context manager, its "
          "methods see the engine through a weak proxy, and only this module's instances are "
          "entered with `with`")
TITLE = "Make `{cls}` a context manager over `VllmRunner` and enter it with `with`"

CLASS = '''\
import gc

from vllm import LLM


class Tester:
    def __init__(self, model):
        self.llm = LLM(model)

    def run(self, prompt):
        return self.llm.generate([prompt])

    def close(self):
        del self.llm
        gc.collect()
'''


def reports(source: str, config: Config | None = None) -> list[tuple[int, str, str, str]]:
    """``(row, code, applicability, reason)`` of each violation, in order."""
    found = check_source(source.encode(), "tests/test_case.py", config or Config())
    return [(v.location.row, v.code, v.fix.applicability.value if v.fix else "",
             v.fix.reason if v.fix else "") for v in found]


def test_reasons_of_the_fixtures() -> None:
    before = (FIX_DIR / "engine_owner_class" / "before.py").read_text()
    deleted = ("its cleanup-only `close()` is deleted, so a caller in another module that "
               "still calls it breaks")
    reason = UNSAFE.format(cls="LoRATester") + "; " + deleted
    assert reports(before) == [(15, "GPU001", "unsafe", reason),
                               (26, "GPU004", "unsafe", reason),
                               (27, "GPU004", "unsafe", reason),
                               (28, "GPU004", "unsafe", reason)]
    found = check_source(before.encode(), "tests/test_case.py", Config())
    assert {v.fix.title for v in found if v.fix} == {TITLE.format(cls="LoRATester"),
                                                     "Remove the manual cleanup"}
    nofix = (FIX_DIR / "engine_owner_class_nofix" / "before.py").read_text()
    holder = ("`engine()` uses `self.llm` itself (line 13), not through its attributes: a "
              "proxy may not keep that behaviour, and what receives it is not followed")
    assert reports(nofix) == [
        (10, "GPU001", "none", holder),
        (16, "GPU004", "none", holder),
        (17, "GPU004", "none", holder),
        (22, "GPU001", "none", "`Factory(...)` at line 29 is not built as "
                               "`name = Factory(...)` in a function"),
    ]


def _gpu001_reason(source: str, config: Config | None = None) -> tuple[str, str]:
    (first,) = [r for r in reports(source, config) if r[1] == "GPU001"]
    return first[2], first[3]


def test_a_test_deleting_the_engines_attribute_of_an_instance() -> None:
    """``del tester.llm`` in a test that builds the instance is its cleanup (GPU004),
    removed inside the instance's block; read again after it (where it raised
    ``AttributeError``), no fix."""
    source = (CLASS.replace("    def close(self):\n        del self.llm\n        gc.collect()\n",
                            "    def score(self):\n        return 1\n")
              + "\n\ndef test_x():\n    t = Tester('m')\n    t.run('a')\n    del t.llm\n"
              "    gc.collect()\n")
    reason = UNSAFE.format(cls="Tester")
    assert reports(source) == [(8, "GPU001", "unsafe", reason), (20, "GPU004", "unsafe", reason),
                               (21, "GPU004", "unsafe", reason)]
    outcome = fix_source(source.encode(), "tests/test_case.py", Config(), unsafe=True)
    assert outcome.error is None and outcome.new_source is not None
    assert outcome.new_source.decode().endswith(
        "def test_x():\n    with Tester('m') as t:\n        t.run('a')\n")
    read_again = source.replace("    gc.collect()\n", "    assert not hasattr(t, 'llm')\n")
    why = ("`t.llm` is read at line 21, after `del t.llm` (line 20) deleted it: the proxy the "
           "fix leaves there would answer instead of raising `AttributeError`")
    assert reports(read_again) == [(8, "GPU001", "none", why), (20, "GPU004", "none", why)]


NO_FIX = {
    "base class": (CLASS.replace("class Tester:", "class Tester(Base):")
                   + "\n\ndef test_x():\n    t = Tester('m')\n    t.run('a')\n",
                   "`Tester` has bases, a metaclass or decorators: what it inherits or how it "
                   "is wrapped is not followed"),
    "own __enter__": (CLASS + "\n    def __enter__(self):\n        return self\n"
                      "\n\ndef test_x():\n    t = Tester('m')\n    t.run('a')\n",
                      "`Tester` already defines `__enter__`"),
    "two instances in a function": (
        CLASS + "\n\ndef test_x():\n    a = Tester('m')\n    a.run('a')\n"
        "    b = Tester('m')\n    b.run('b')\n",
        "`Tester(...)` at line 21: a second instance in one function"),
    "never instantiated": (CLASS, "`Tester` is not instantiated in this module: its users are "
                                  "elsewhere"),
    "class passed as a value": (
        CLASS + "\n\ndef test_x():\n    t = Tester('m')\n    t.run('a')\n    make(Tester)\n",
        "`Tester` is used at line 21 other than by `name = Tester(...)` in a function"),
    "cleanup method called by the class": (
        CLASS + "\n    def __exit_all(self):\n        self.close()\n"
        "\n\ndef test_x():\n    t = Tester('m')\n    t.run('a')\n",
        "`close()` (which only cleans up) is called at line 18 other than on an instance "
        "inside its block"),
    "instance returned": (
        CLASS + "\n\ndef make():\n    t = Tester('m')\n    return t\n",
        "`Tester(...)` at line 19: the engine is returned to the caller, so it must outlive "
        "this function"),
    "engine rebound": (
        CLASS + "\n    def reload(self):\n        self.llm = None\n"
        "\n\ndef test_x():\n    t = Tester('m')\n    t.run('a')\n",
        "`self.llm` is rebound in `reload()` (line 18)"),
}


@pytest.mark.parametrize("case", sorted(NO_FIX))
def test_no_fix_branches(case: str) -> None:
    source, reason = NO_FIX[case]
    assert _gpu001_reason(source) == ("none", reason)


VLLM_USE = CLASS + "\n\ndef test_x():\n    t = Tester('m')\n    t.run('a')\n"
VLLM_FIXED_HEAD = '''\
import weakref

from vllm.config import CompilationConfig

from tests.conftest import VllmRunner


class Tester:
    def __init__(self, model):
        self._runner = VllmRunner(
            model,
            trust_remote_code=False,
            max_model_len=None,
            block_size=None,
            enable_chunked_prefill=None,
            compilation_config=CompilationConfig(),
        )
        self.llm = weakref.proxy(self._runner.llm)
'''


def _project(tmp_path: Path, conftest: str | None) -> Path:
    """A project (``pyproject.toml`` at its root) holding ``tests/test_case.py`` with
    :data:`VLLM_USE`, and ``tests/conftest.py`` with ``conftest`` unless ``None``."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    if conftest is not None:
        (tmp_path / "tests" / "conftest.py").write_text(conftest)
    module = tmp_path / "tests" / "test_case.py"
    module.write_text(VLLM_USE)
    return module


@pytest.mark.parametrize("conftest", [
    "class VllmRunner:\n    pass\n",
    "from tests.vllm_runner import Runner as VllmRunner\n",
    "VllmRunner = make_runner()\n",
])
def test_target_vllm_imports_the_runner_class_of_the_projects_conftest(
        tmp_path: Path, conftest: str) -> None:
    """With ``target = "vllm"`` the class holds vLLM's runner class, imported from the
    project's tests/conftest.py, which binds it (a class, an import, an assignment)."""
    module = _project(tmp_path, conftest)
    config = Config(target="vllm", root=str(tmp_path))
    assert _gpu001_reason(module.read_text(), config) == (
        "unsafe", UNSAFE.format(cls="Tester") + "; its cleanup-only `close()` is deleted, so "
        "a caller in another module that still calls it breaks")
    found = check_source(module.read_bytes(), str(module), config)
    assert [(v.location.row, v.fix.applicability.value if v.fix else None)
            for v in found] == [(8, "unsafe"), (14, "unsafe"), (15, "unsafe")]
    outcome = fix_source(module.read_bytes(), str(module), config, unsafe=True)
    assert outcome.error is None and outcome.new_source is not None
    fixed = outcome.new_source.decode()
    assert fixed.startswith(VLLM_FIXED_HEAD)
    assert fixed.endswith("def test_x():\n    with Tester('m') as t:\n        t.run('a')\n")
    assert check_source(outcome.new_source, str(module), config) == []


def test_target_vllm_says_when_a_plain_pytest_run_cannot_import_the_runner_class(
        tmp_path: Path) -> None:
    """tests/ without ``__init__.py`` (nothing else putting the project root on
    ``sys.path``): ``from tests.conftest import VllmRunner`` imports only under ``python -m
    pytest``, and the fix's reasons say so; a package tests/ imports it."""
    module = _project(tmp_path, "class VllmRunner:\n    pass\n")
    config = Config(target="vllm", root=str(tmp_path))
    reason = (UNSAFE.format(cls="Tester") + "; its cleanup-only `close()` is deleted, so a "
              "caller in another module that still calls it breaks")
    unimportable = ("; `from tests.conftest import VllmRunner` imports only with the project "
                    "root on `sys.path`: tests/ has no `__init__.py`, the root no "
                    "`conftest.py` and pytest's `pythonpath` does not name it, so a plain "
                    "`pytest` run fails to import the module (`python -m pytest` imports it)")
    found = check_source(module.read_bytes(), str(module), config)
    assert [(v.location.row, v.fix.reason if v.fix else None) for v in found] == [
        (8, reason + unimportable), (14, reason + unimportable), (15, reason + unimportable)]
    (tmp_path / "tests" / "__init__.py").write_text("")
    found = check_source(module.read_bytes(), str(module), config)
    assert [(v.location.row, v.fix.reason if v.fix else None) for v in found] == [
        (8, reason), (14, reason), (15, reason)]


@pytest.mark.parametrize(("conftest", "reason"), [
    (None, "`target = \"vllm\"` imports `VllmRunner` from `tests.conftest`, and the project "
           "has no tests/conftest.py"),
    ("import pytest\n\nclass HfRunner:\n    pass\n",
     "`target = \"vllm\"` imports `VllmRunner` from `tests.conftest`, and the project's "
     "tests/conftest.py does not define `VllmRunner`"),
    ("def broken(:\n", "`target = \"vllm\"` imports `VllmRunner` from `tests.conftest`, and "
                       "the project's tests/conftest.py does not define `VllmRunner`"),
])
def test_target_vllm_without_the_runner_class_has_no_fix(
        tmp_path: Path, conftest: str | None, reason: str) -> None:
    module = _project(tmp_path, conftest)
    found = check_source(module.read_bytes(), str(module),
                         Config(target="vllm", root=str(tmp_path)))
    assert [(v.location.row, v.code, v.fix.applicability.value if v.fix else None,
             v.fix.reason if v.fix else None) for v in found] == [
        (8, "GPU001", "none", reason), (14, "GPU004", "none", reason),
        (15, "GPU004", "none", reason)]


def test_target_vllm_engine_arguments_in_a_mapping_have_no_fix() -> None:
    source = VLLM_USE.replace("LLM(model)", "LLM(**model)")
    assert _gpu001_reason(source, Config(target="vllm")) == (
        "none", "the engine's arguments come in a mapping, which the class's runner call "
                "does not map onto vLLM's `VllmRunner`")


def test_the_rewritten_class_is_a_runner() -> None:
    """After the fix nothing is left: the class's ``__exit__`` exits the runner it holds, so
    ``self._runner = VllmRunner(...)`` is not GPU005, and a second fix changes nothing."""
    source = CLASS + "\n\ndef test_x():\n    t = Tester('m')\n    assert t.run('a')\n" \
                     "    t.close()\n"
    safe = fix_source(source.encode(), "tests/test_case.py", Config(), unsafe=False)
    assert safe.new_source is None  # the fix is unsafe
    outcome = fix_source(source.encode(), "tests/test_case.py", Config(), unsafe=True)
    assert outcome.error is None and outcome.new_source is not None
    fixed = outcome.new_source.decode()
    assert fixed.endswith("def test_x():\n    with Tester('m') as t:\n"
                          "        assert t.run('a')\n")
    assert reports(fixed) == []
    again = fix_source(outcome.new_source, "tests/test_case.py", Config(), unsafe=True)
    assert again.new_source is None


def test_cleanup_in_the_building_method_is_reported_once() -> None:
    """``gc.collect()`` in the ``__init__`` that builds the engine: one GPU004, the class
    rewrite's (it removes the line), not the function's (which has no fix)."""
    source = CLASS.replace("        self.llm = LLM(model)\n",
                           "        gc.collect()\n        self.llm = LLM(model)\n") + \
        "\n\ndef test_x():\n    t = Tester('m')\n    assert t.run('a')\n"
    assert [(row, code, fix) for row, code, fix, _ in reports(source)] == [
        (8, "GPU004", "unsafe"), (9, "GPU001", "unsafe"), (15, "GPU004", "unsafe"),
        (16, "GPU004", "unsafe")]
    outcome = fix_source(source.encode(), "tests/test_case.py", Config(), unsafe=True)
    assert outcome.new_source is not None
    assert b"gc.collect()" not in outcome.new_source


def test_finally_that_only_closes_goes() -> None:
    """``try: ... finally: tester.close()``: the with-block exits on an exception too, so the
    ``try`` is replaced by its body."""
    source = CLASS + ("\n\ndef test_x():\n    tester = Tester('m')\n    try:\n"
                      "        assert tester.run('a')\n    finally:\n        tester.close()\n")
    outcome = fix_source(source.encode(), "tests/test_case.py", Config(), unsafe=True)
    assert outcome.new_source is not None
    assert outcome.new_source.decode().endswith(
        "def test_x():\n    with Tester('m') as tester:\n        assert tester.run('a')\n")


RETURNED = '''\
from vllm import LLM


class Tester:
    def __init__(self, config):
        self.llm = self._build(config)
{extra}
    {decorator}def _build({params}):
        return LLM(config["model"])

    def run(self, prompt):
        return self.llm.generate([prompt])


def test_run():
    tester = Tester({{"model": "m"}})
    assert tester.run("hi")
'''


def test_engine_returned_to_init_is_the_owner_class_shape() -> None:
    """``self.llm = self._build(config)`` with ``_build`` returning the engine is
    the owner class (unsafe, the class rewrite); a builder that is a static method, or that
    another method calls too (the engine may be rebuilt), has no fix and says why; so has
    a factory method whose call ``__init__`` binds to a name it then stores (its unit's
    caller, ``__init__``, cannot hold the engine in a block)."""
    plain = RETURNED.format(extra="", decorator="", params="self, config")
    assert reports(plain) == [(9, "GPU001", "unsafe", UNSAFE.format(cls="Tester"))]
    static = RETURNED.format(extra="", decorator="@staticmethod\n    ", params="config")
    assert reports(static) == [(10, "GPU001", "none", "`_build()` is decorated or takes no "
                                "`self`: the runner cannot be kept on the instance")]
    again = RETURNED.format(extra="\n    def reload(self, config):\n        self.llm = "
                                  "self._build(config)\n", decorator="", params="self, config")
    assert reports(again) == [(12, "GPU001", "none", "`_build()` is called other than once "
                               "from `__init__`: the engine may be rebuilt")]
    kept_local = plain.replace("self.llm = self._build(config)",
                               "llm = self._build(config)\n        self.llm = llm")
    assert reports(kept_local) == [(10, "GPU001", "none", "the call of `_build()` in "
                                    "`__init__()` (line 6): built in a helper class: the "
                                    "engine outlives `__init__`")]


def test_cleanup_method_call_is_named_in_the_report() -> None:
    """The call of a cleanup-only method the class rewrite deletes is reported by its text
    (it was reported as "`cleanup`")."""
    before = (FIX_DIR / "engine_owner_class_returned_engine" / "before.py").read_bytes()
    found = check_source(before, "tests/test_case.py", Config())
    assert [(v.location.row, v.message) for v in found if v.location.row == 30] == [
        (30, "Manual cleanup `checker.shutdown()` in a function that owns an engine")]

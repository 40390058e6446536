"""GPU008 environment-mutated-without-isolation: engine configuration set in ``os.environ``
by hand, which leaks into every later test of the session. What it finds:
:mod:`lint_gpu_tests.analysis.env_mutations` (its fix planning reads the same); how it is fixed:
:mod:`lint_gpu_tests.fixplan.env`."""

from __future__ import annotations

from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import ModuleAnalysis
from lint_gpu_tests.analysis.env_mutations import find_mutations
from lint_gpu_tests.fixplan.env import env_fix
from lint_gpu_tests.ftypes import FixKind, Trigger
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import hit_at


class EnvironmentMutatedWithoutIsolation(Rule):
    """Flags ``os.environ["VLLM_..."] = ...`` and the like in tests and fixtures."""

    code = "GPU008"
    name = "environment-mutated-without-isolation"
    summary = "Engine configuration set in `os.environ` by hand leaks into later tests"
    message = "{names} {verb} {where} by hand leaks into every later test; use " \
              "`monkeypatch.{method}`"
    fix_title = "Use `monkeypatch.setenv` / `monkeypatch.delenv`"
    fix_kinds = (FixKind.USE_MONKEYPATCH_ENV, FixKind.UNDO_MONKEYPATCH)
    triggers = (Trigger.ENVIRONMENT,)
    what_it_does = (
        "Checks for tests, fixtures, xunit-style setup functions (a helper module's "
        "`setup_function`, `setup_module` and their teardowns too: pytest runs the ones a "
        "test module imports) and module-level code of test modules that change the "
        "configured environment variables by hand (by "
        "default the families an engine, torch, Hugging Face or a collective library reads: "
        "`VLLM_*`, `CUDA_*`, `HF_*`, `TRANSFORMERS_*`, `TOKENIZERS_*`, `TORCH_*`, "
        "`PYTORCH_*`, `NCCL_*`, `OMP_*`, and the device visibility variables of every "
        "platform vLLM supports: `HIP_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`, "
        "`ZE_AFFINITY_MASK`, `ONEAPI_DEVICE_SELECTOR`, `TPU_*`, `NEURON_RT_VISIBLE_CORES`, "
        "`HABANA_VISIBLE_*`, "
        "`HCCL_*`, `ASCEND_RT_VISIBLE_DEVICES`; `environment-variables` replaces them, "
        "`extend-environment-variables` adds to them): "
        "`os.environ[name] = value`, `del os.environ[name]`, `os.environ.update(...)`, "
        "`.setdefault(...)`, `.pop(...)`, `os.putenv(...)`, `os.unsetenv(...)`, and "
        "`mp.setenv(...)`/`mp.delenv(...)` of a `mp = pytest.MonkeyPatch()` of the "
        "function that nothing undoes (no `mp.undo` named anywhere in it, `mp` never "
        "returned, yielded or passed on), or of `pytest.MonkeyPatch()` itself: unlike the "
        "`monkeypatch` fixture and `MonkeyPatch.context()`, such an instance restores "
        "nothing when it is dropped. A variable "
        "whose name is known only at run time is not reported, nor one whose name the "
        "file does not write with its literal part whole (`VLLM_` of `VLLM_*`: not in "
        "escape sequences, not split across adjacent strings). Not violations: a test or "
        "fixture that runs in its own process (the isolation decorators), code inside "
        "`with mock.patch.dict(os.environ, ...)` or under such a decorator, "
        "`monkeypatch.setenv`/`delenv`, a change in a test or function-scoped fixture that "
        "a function-scoped fixture of its module (of its class, for one defined in a class) "
        "restores after each test, autouse or requested by the function: one that yields "
        "inside "
        "`mock.patch.dict(os.environ)`, calls `os.environ.clear()` and "
        "`os.environ.update(...)` after its yield, sets or deletes the variable with its "
        "`monkeypatch` (or with `mp` of a `MonkeyPatch.context()` around its yield), or "
        "changes it after its yield (by name, or by a key known only at run time when the "
        "fixture names the variable: `for k, v in saved.items(): os.environ[k] = v` over "
        "a list of names), a removal (`del`, `.pop(...)` as a statement) in a fixture that "
        "changes `os.environ` only by such removals, when the fixture is autouse or the "
        "removal follows its yield (it puts back the default state every test it reaches "
        "starts from, where `monkeypatch.delenv` would put the removed value back), the "
        "teardown of a fixture that puts back what it read before its yield and changes "
        "none of those variables before it (`saved = os.environ.get(name)`, then after the "
        "yield `os.environ[name] = saved` or the variable's removal: it undoes what the "
        "code under test left behind), module level "
        "of a `conftest.py`, which sets up the whole directory on purpose, module level of "
        "a script pytest does not collect by its name, and what an xunit teardown "
        "restores: a change in `setUp`/`setup_method`/`setUpClass`/`setup_class`/"
        "`setup_module`/`setup_function` that its teardown (`tearDown`, `teardown_method`, "
        "...) changes again or undoes by `os.environ.clear()`, a change in a test that the "
        "per-test teardown of its class restores, a change in a function that registers a "
        "`unittest` cleanup naming `os.environ` or the variable "
        "(`self.addCleanup(os.environ.pop, \"VLLM_X\")`) or that follows a started "
        "`mock.patch.dict(os.environ)` patcher (in the function or in the test's setup), "
        "and the teardown's own restoring change; a change inside a `try` (or right before "
        "it) whose `finally` puts back each variable as the function read it before the "
        "`try` (`saved = os.environ.get(X)`, then `os.environ[X] = saved` or its removal "
        "when it was unset), and those restoring changes. A setup with no teardown restoring its "
        "variable leaks it into every later test and is reported; so is a teardown change "
        "of a variable nothing in its class sets, and a test module's top-level change "
        "whatever its autouse fixtures restore (it runs at collection, before any test of "
        "the session). The `test*` methods of a "
        "`unittest.TestCase` subclass are tests whatever the class's name."
    )
    why_bad = (
        "vLLM reads its `VLLM_*` settings from the process environment whenever an engine is "
        "built. A value a test sets by hand stays set for every test pytest runs after it, "
        "so a later test's engine silently runs with another configuration (another "
        "KV-cache size, attention backend, device list) and passes or fails depending on "
        "test order. `monkeypatch.setenv` restores the old value when the test ends."
    )
    fix_safety = (
        "Safe in a test or a function-scoped fixture: each change becomes "
        "`monkeypatch.setenv(name, value)` or `monkeypatch.delenv(name)` (`raising=False` "
        "where the original ignored a missing variable: `.pop(name, default)`, "
        "`os.unsetenv`), the value expression is kept as written, `.setdefault(name, value)` "
        "becomes "
        "`monkeypatch.setenv(name, os.environ.get(name, value))`, and the `monkeypatch` "
        "parameter is added. Unsafe in a class-, module-, package- or session-scoped "
        "fixture, which cannot request the function-scoped `monkeypatch`: the body from "
        "the first change on moves into `with pytest.MonkeyPatch.context() as mp:`, which "
        "restores the variables when the fixture ends, where before they stayed set for "
        "the rest of the session. Unsafe for `os.putenv`/`os.unsetenv`, which do not "
        "update `os.environ`. Unsafe when a function of the module or of a conftest.py "
        "above it reads the variable by name (`os.environ[name]`, `.get`, `os.getenv`, `in "
        "os.environ`; other than the code after the change in its own function): it saw "
        "the change, which `monkeypatch` now undoes when the test ends. Unsafe when a "
        "value is not statically a `str` (`os.environ` raises `TypeError` on anything "
        "else, `monkeypatch.setenv` converts it with a warning); no fix when it is "
        "statically something else (`4`, `None`). Safe in a method of a "
        "`unittest.TestCase` (`setUp`, a test, `setUpClass`), which no fixture reaches: "
        "before its first change the method opens "
        "`mp = pytest.MonkeyPatch()` (`MonkeyPatch` imported from `pytest` when `pytest` "
        "is not imported) and registers `self.addCleanup(mp.undo)` "
        "(`cls.addClassCleanup(mp.undo)` in a classmethod), and each change becomes "
        "`mp.setenv`/`mp.delenv`: the test case restores the variables after the test (the "
        "class). Unsafe at a test module's top level: the module's plain top-level "
        "changes, in order, become the `mp.setenv`/`mp.delenv` calls of one "
        "module-scoped autouse fixture (`_module_environment`, with a suffix when that "
        "name is taken) that yields inside `with pytest.MonkeyPatch.context() as mp:`, "
        "placed where the first change was (after the imports directly following it), "
        "`import pytest` added when missing: the variable is set only while the "
        "module's tests run, not for the modules collected after it, and not for what "
        "ran after the change at import (the imports after it, which may read the "
        "environment, and the `skipif` conditions, parametrize values, other calls and "
        "reads of the variable in module-level code, which the reason names), nor for a "
        "`__main__` block when the module runs as a script. A change through a "
        "`mp = pytest.MonkeyPatch()` of a fixture that nothing undoes: `mp.undo()` goes at "
        "the end of the fixture's body, after a bare `yield` where it has none, so the "
        "fixture undoes it at its teardown; safe in a session-scoped fixture (every test "
        "still sees the change) and in a function-scoped one (unless another function "
        "reads the variable, as above), unsafe in a class-, module- or package-scoped one "
        "(the modules after it no longer see the change); no fix for an `async` fixture, "
        "one that returns a value or before its end (a bare `return` ending it stays last) "
        "or yields more than once, or one that binds `mp` again or in a "
        "block. Comments above a change go "
        "with its calls, or above the fixture when too long there. No fix for a "
        "module-level change "
        "inside an `if`, `try`, loop or class body, nor for a plain one whose variable "
        "such a change changes too (moving one would reorder them), for a change through "
        "a `pytest.MonkeyPatch()` never undone in a test (use the `monkeypatch` fixture) or "
        "through `pytest.MonkeyPatch()` itself, in pytest's "
        "xunit-style setup (no fixtures reach "
        "it: restore the variable in its teardown, or set it in an autouse fixture with "
        "`monkeypatch`), in a class whose bases are not known to be `unittest.TestCase`, "
        "when the value of `.pop`/`.setdefault` is used, or when the keys of `.update(...)` "
        "are not all known."
    )
    options = ("environment-variables", "extend-environment-variables", "isolation-decorators")
    references = ("pytest: How to monkeypatch/mock modules and environments "
                  "(`monkeypatch.setenv`, `MonkeyPatch.context`)",
                  "vLLM vllm/envs.py: every `VLLM_*` setting is read from `os.environ`")
    INVALID = (
        Example(
            title="A test sets a vLLM setting for the rest of the session",
            source='''\
import os


def test_small_cache(vllm_runner):
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "2"  # error: GPU008
    with vllm_runner("facebook/opt-125m") as runner:
        assert runner.generate_greedy(["hi"], max_tokens=4)
''',
        ),
        Example(
            title="Every shape, in a fixture; module constants name the variable",
            source='''\
import os

import pytest

BACKEND = "VLLM_ATTENTION_BACKEND"


@pytest.fixture
def env():
    os.environ[BACKEND] = "TRITON_ATTN"  # error: GPU008
    os.environ.update({"VLLM_USE_V1": "1", "OTHER": "x"})  # error: GPU008
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # error: GPU008
    os.putenv("CUDA_VISIBLE_DEVICES", "0")  # error: GPU008
    yield
    del os.environ[BACKEND]  # error: GPU008
    os.environ.pop("VLLM_USE_V1", None)  # error: GPU008
''',
        ),
        Example(
            title="A `setUp` with no `tearDown` restoring the variable",
            source='''\
import os
import unittest


class TestEngineConfig(unittest.TestCase):
    def setUp(self):
        os.environ["VLLM_USE_V1"] = "1"  # error: GPU008

    def test_v1(self):
        assert os.environ["VLLM_USE_V1"] == "1"
''',
        ),
        Example(
            title="An autouse fixture restores only the variables it names, after each test",
            source='''\
import os

import pytest

os.environ["VLLM_USE_V1"] = "1"  # error: GPU008


@pytest.fixture(autouse=True)
def _restore_env(monkeypatch):
    monkeypatch.delenv("VLLM_USE_V1", raising=False)


def test_v1():
    os.environ["VLLM_USE_V1"] = "1"
    os.environ["VLLM_LOGGING_LEVEL"] = "DEBUG"  # error: GPU008
''',
        ),
        Example(
            title="Module level of a test module runs at collection, for the whole session",
            source='''\
import os

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # error: GPU008


def test_generate():
    assert True
''',
        ),
        Example(
            title="A `pytest.MonkeyPatch()` that nothing undoes restores nothing",
            path="tests/conftest.py",
            source='''\
import pytest


@pytest.fixture(scope="session", autouse=True)
def v1_everywhere():
    mp = pytest.MonkeyPatch()
    mp.setenv("VLLM_USE_V1", "1")  # error: GPU008
''',
        ),
        Example(
            title="A set-up a helper module defines for the test modules that import it",
            path="tests/utils.py",
            source='''\
import os


def setup_function():
    os.environ["CUDA_VISIBLE_DEVICES"] = "1"  # error: GPU008


def teardown_function():
    os.environ.pop("HF_HUB_OFFLINE", None)  # error: GPU008
''',
        ),
    )
    VALID = (
        Example(
            title="monkeypatch restores the variable when the test ends",
            source='''\
def test_small_cache(vllm_runner, monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    with vllm_runner("facebook/opt-125m") as runner:
        assert runner.generate_greedy(["hi"], max_tokens=4)
''',
        ),
        Example(
            title="Process isolation, mock.patch.dict, other variables, unknown names",
            source='''\
import os
from unittest import mock

from tests.utils import create_new_process_for_each_test


@create_new_process_for_each_test()
def test_isolated():
    os.environ["VLLM_USE_V1"] = "1"


def test_patched():
    with mock.patch.dict(os.environ, {"VLLM_USE_V1": "1"}):
        os.environ["VLLM_LOGGING_LEVEL"] = "DEBUG"


@mock.patch.dict(os.environ, clear=False)
def test_decorated():
    os.environ.pop("HF_HUB_OFFLINE", None)


def test_other(name):
    os.environ["MY_APP_DEBUG"] = "1"
    os.environ[name] = "1"
''',
        ),
        Example(
            title="A fixture the test requests puts back what it saved",
            source='''\
import os

import pytest


@pytest.fixture
def visible_cores():
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    yield
    if saved is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = saved


def test_first_core(visible_cores):
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
''',
        ),
        Example(
            title="A test puts back in its `finally` what it read before its `try`",
            source='''\
import os


def test_visible_cores():
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    finally:
        if saved is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
''',
        ),
        Example(
            title="A `pytest.MonkeyPatch()` undone when the fixture ends",
            source='''\
import pytest


@pytest.fixture(scope="module")
def v1_module():
    mp = pytest.MonkeyPatch()
    mp.setenv("VLLM_USE_V1", "1")
    yield
    mp.undo()
''',
        ),
        Example(
            title="An xunit teardown restores what its setup set",
            source='''\
import os


class TestWithCache:
    def setup_method(self):
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = "2"

    def teardown_method(self):
        os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
''',
        ),
        Example(
            title="An autouse fixture saves the variables it names and puts them back",
            source='''\
import os

import pytest

KEYS = ("VLLM_HOST_IP", "VLLM_PORT")


@pytest.fixture(autouse=True)
def env_cleanup():
    saved = {key: os.environ.pop(key, None) for key in KEYS}
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class TestHost:
    def test_explicit_ip(self):
        os.environ["VLLM_HOST_IP"] = "10.0.0.1"
''',
        ),
        Example(
            title="A fixture that only removes what code under test leaves set",
            path="tests/conftest.py",
            source='''\
import os

import pytest


@pytest.fixture(autouse=True)
def _clear_standalone_flag():
    os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    yield


@pytest.fixture
def engine_dir():
    yield "/tmp/engine"
    os.environ.pop("VLLM_CACHE_ROOT", None)
''',
        ),
        Example(
            title="Module level of a conftest.py sets up its directory on purpose",
            path="tests/conftest.py",
            source='''\
import os

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        for mutation in find_mutations(module):
            names = ", ".join(f"`{name}`" for name in mutation.names)
            verb = "removed from" if mutation.removes else "set in"
            method = "delenv" if mutation.removes else "setenv"
            where = f"the environment (`{mutation.function_name}`)" \
                if mutation.function_name else "`os.environ`"
            fix = env_fix(module, mutation, self.fix_title)
            message = self.message.format(names=names, verb=verb, where=where, method=method)
            if mutation.patcher:
                advice = f"undo it (`{mutation.patcher}.undo()`)" \
                    if mutation.patcher.isidentifier() else "use the `monkeypatch` fixture"
                message = (f"{names} {verb} the environment by `{mutation.patcher}`, a "
                           f"`pytest.MonkeyPatch()` never undone, leaks into every later "
                           f"test; {advice}")
            yield hit_at(mutation.node, message, fix)

"""Uses of an engine that a `weakref.proxy` cannot stand in for, and cleanup that does more
than the runner's teardown (found by a first-time user; each was a safe fix that broke or
changed the test)."""

from __future__ import annotations

from lint_gpu_tests.config import Config
from lint_gpu_tests.engine import check_source

HEAD = "import gc\nimport weakref\n\nfrom vllm import LLM\n\n\n"


def gpu001(body: str) -> tuple[str, str]:
    """(applicability, reason) of the one GPU001 in a test module made of ``body``."""
    (found,) = [v for v in check_source((HEAD + body).encode(), "tests/test_x.py", Config())
                if v.code == "GPU001"]
    assert found.fix is not None
    return found.fix.applicability.value, found.fix.reason


def test_a_weak_reference_watching_the_engine_makes_the_fix_unsafe() -> None:
    assert gpu001("def test_freed():\n    llm = LLM('m')\n    ref = weakref.ref(llm)\n"
                  "    assert llm.generate(['hi'])\n    del llm\n    gc.collect()\n"
                  "    assert ref() is None\n") == (
        "unsafe", "`weakref.ref()` of the engine observes when it is freed, which the runner "
                  "moves to the end of its block")


def test_an_engine_used_as_a_dict_key_has_no_fix() -> None:
    applicability, reason = gpu001("def test_key():\n    llm = LLM('m')\n    d = {llm: 1}\n"
                                   "    assert d\n")
    assert applicability == "none"
    assert reason.startswith("the engine is a dict key or set member, and the "
                             "`weakref.proxy` the fix binds is unhashable")


def test_an_engine_added_to_a_set_has_no_fix() -> None:
    applicability, reason = gpu001("def test_set():\n    llm = LLM('m')\n    seen = set()\n"
                                   "    seen.add(llm)\n    assert seen\n")
    assert applicability == "none"
    assert reason.startswith("`add()` hashes the engine, and the `weakref.proxy` the fix "
                             "binds is unhashable")


def test_cleanup_with_arguments_the_runner_does_not_pass_makes_the_fix_unsafe() -> None:
    body = ("from vllm.distributed import cleanup_dist_env_and_memory\n\n\n"
            "def test_ray():\n    llm = LLM('m')\n    assert llm.generate(['hi'])\n"
            "    del llm\n    cleanup_dist_env_and_memory(shutdown_ray=True)\n")
    assert gpu001(body) == (
        "unsafe", "`cleanup_dist_env_and_memory(shutdown_ray=True)` does more than the "
                  "runner's teardown, which calls `cleanup_dist_env_and_memory()` without "
                  "arguments")


def test_plain_use_and_plain_cleanup_stay_safe() -> None:
    body = ("from vllm.distributed import cleanup_dist_env_and_memory\n\n\n"
            "def test_plain():\n    llm = LLM('m')\n    assert llm.generate(['hi'])\n"
            "    del llm\n    cleanup_dist_env_and_memory()\n")
    assert gpu001(body) == ("safe", "")

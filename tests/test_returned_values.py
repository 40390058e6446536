"""A function that returns a value read from its engine: the with-block takes in the
``return``, safe when the value is plain data that cannot hold the engine."""

from __future__ import annotations

import pytest

from lint_gpu_tests.config import Config
from lint_gpu_tests.fixing.fixloop import fix_source
from lint_gpu_tests.running.run import check_source

TEMPLATE = '''\
from vllm import LLM


def helper(model):
    llm = LLM(model)
    outputs = llm.generate(["a"])
    return {value}


def test_helper():
    assert helper("m")
'''

UNSAFE = ("a value read from the engine is returned to the caller (line 7) and may "
          "reference the engine, which the runner's block shuts down before the function "
          "returns")


def _gpu001(source: str) -> tuple[str, str]:
    found = [v for v in check_source(source.encode(), "tests/test_values.py", Config())
             if v.code == "GPU001"]
    assert len(found) == 1 and found[0].fix is not None
    return found[0].fix.applicability.value, found[0].fix.reason


ENGINE = "llm.llm_engine"
GENERATED = 'llm.generate(["b"])'


@pytest.mark.parametrize("value", [
    "llm.llm_engine.vllm_config.scheduler_config.max_num_seqs",
    "llm.llm_engine.model_config.max_model_len * 2 + 1",
    f"len({ENGINE}.engines)",
    f"str({ENGINE})",
    f"int({GENERATED}[0].outputs[0].cumulative_logprob)",
    f"bool({ENGINE})",
    f"repr({ENGINE})",
    f"float(len({GENERATED}))",
    f"{ENGINE} == []",
    f"not {ENGINE}",
    f"f\"{{{ENGINE}}}\"",
    f"[o.outputs[0].text for o in {GENERATED}]",
    f"{{o.outputs[0].text for o in {GENERATED}}}",
    f"{{o.outputs[0].text: o.outputs[0].finish_reason for o in {GENERATED}}}",
    f"(len({ENGINE}.engines), {GENERATED}[0].outputs[0].text)",
    f"{GENERATED}[0].outputs[0].stop_reason if {ENGINE} else None",
    f"{{\"n\": len({ENGINE}.engines), \"ok\": {ENGINE} is not None}}",
])
def test_plain_data_is_returned_from_inside_the_block_safely(value: str) -> None:
    assert _gpu001(TEMPLATE.format(value=value)) == ("safe", "")


@pytest.mark.parametrize("value", [
    "llm.llm_engine.vllm_config",
    "llm.llm_engine.vllm_config.scheduler_config",
    "llm.max_num_seqs",
    f"{GENERATED}[0].text",
    "llm.get_tokenizer()",
    f"[o for o in {GENERATED}]",
    f"(o.outputs[0].text for o in {GENERATED})",
    f"-{ENGINE}.steps",
    f"{ENGINE} and len(outputs)",
    f"{{**vars({ENGINE}), \"n\": 1}}",
    # the text of the name the fix binds to the proxy: the proxy's, not the engine's
    "str(llm)",
    "repr(llm)",
    'f"{llm}"',
])
def test_a_value_that_may_reference_the_engine_makes_the_fix_unsafe(value: str) -> None:
    assert _gpu001(TEMPLATE.format(value=value)) == ("unsafe", UNSAFE)


@pytest.mark.parametrize(("value", "reason"), [
    # a tuple factory: its unit with the callers, which the test's `assert helper("m")`
    # leaves without a fix
    ("(llm, outputs)", "the call of `helper()` in `test_helper()` (line 11) does not unpack the "
                       "tuple it returns into names (`llm, params = ...`), so the "
                       "with-statement the fix writes would bind the tuple where the engine's "
                       "proxy goes"),
    ("outputs if outputs else llm",
     "the engine is returned to the caller, so it must outlive this function"),
])
def test_the_engine_itself_returned_has_no_fix(value: str, reason: str) -> None:
    assert _gpu001(TEMPLATE.format(value=value)) == ("none", reason)


def test_a_builtin_the_module_rebinds_is_not_trusted() -> None:
    source = TEMPLATE.format(value=f"len({ENGINE})") + "\n\ndef len(value):\n    return value\n"
    assert _gpu001(source) == ("unsafe", UNSAFE)


def test_a_name_bound_once_to_plain_data_is_plain_data() -> None:
    source = TEMPLATE.format(value="count").replace(
        '    outputs = llm.generate(["a"])\n',
        '    outputs = llm.generate(["a"])\n    count = llm.llm_engine.model_config.seed\n')
    assert _gpu001(source) == ("safe", "")


def test_a_name_bound_twice_is_not_followed() -> None:
    source = TEMPLATE.format(value="count").replace(
        '    outputs = llm.generate(["a"])\n',
        '    outputs = llm.generate(["a"])\n    count = llm.llm_engine.model_config.seed\n'
        '    count = llm.llm_engine\n')
    assert _gpu001(source) == ("unsafe", UNSAFE.replace("(line 7)", "(line 9)"))


GUARDED_CLEANUP = '''\
from vllm import LLM
from vllm.distributed import cleanup_dist_env_and_memory


def test_generate(restore):
    llm = LLM("m")
    try:
        assert llm.generate(["a"])
    finally:
        del llm
        try:
            cleanup_dist_env_and_memory()
        except RuntimeError:
            pass
        {after}
'''


def _fixed(source: str) -> str:
    outcome = fix_source(source.encode(), "tests/test_values.py", Config())
    assert outcome.error is None
    return outcome.new_source.decode()


def test_a_try_whose_guarded_cleanup_goes_goes_and_then_its_empty_finally() -> None:
    assert _fixed(GUARDED_CLEANUP.replace("        {after}\n", "")) == '''\
import weakref


def test_generate(restore, vllm_runner):
    with vllm_runner("m") as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.generate(["a"])
'''


def test_a_finally_that_does_more_than_clean_up_keeps_the_rest() -> None:
    assert _fixed(GUARDED_CLEANUP.format(after="restore()")) == '''\
import weakref


def test_generate(restore, vllm_runner):
    with vllm_runner("m") as runner:
        llm = weakref.proxy(runner.llm)
        try:
            assert llm.generate(["a"])
        finally:
            restore()
'''

"""Every reason a fix is withheld with says what is true of the code it names."""

from __future__ import annotations

from lint_gpu_tests.config import Config
from lint_gpu_tests.running.run import check_source, fix_source

READS_FROM_ENGINE = '''\
import gc
from vllm import LLM


def read_seqs(model):
    return LLM(model).llm_engine.vllm_config.scheduler_config.max_num_seqs


def read_cfg(model):
    llm = LLM(model)
    cfg = llm.llm_engine.vllm_config
    return cfg


def read_seqs_after_cleanup(model):
    llm = LLM(model)
    n = llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
    del llm
    gc.collect()
    return n


def build(model):
    llm = LLM(model)
    engine = llm
    return engine


def test_x():
    assert read_seqs("m") == 1
'''

CLEANUP_BEYOND_THE_BLOCK = '''\
import gc
from vllm import LLM


def test_variant(model_path):
    reset()
    gc.collect()
    try:
        llm = LLM(model=model_path)
        outputs = llm.generate(["a"])
    finally:
        restore()
        reset()
        gc.collect()
    assert outputs
'''


def _reasons(source: str) -> list[tuple[int, str, str | None]]:
    found = check_source(source.encode(), "tests/test_reasons.py", Config())
    return [(v.location.row, v.code, (v.fix.reason or None) if v.fix is not None else None)
            for v in found]


def test_a_value_read_from_the_engine_is_not_the_engine() -> None:
    read = ("a value read from the engine is returned to the caller (line {}) and may hold "
            "the engine after this function ends")
    unsafe = ("a value read from the engine is returned to the caller (line 12) and may "
              "reference the engine, which the runner's block shuts down before the function "
              "returns")
    assert _reasons(READS_FROM_ENGINE) == [
        (6, "GPU001", read.format(6)),
        (10, "GPU001", unsafe),
        (16, "GPU001", None),
        (18, "GPU004", None),
        (19, "GPU004", None),
        (24, "GPU001", "the engine is returned to the caller, so it must outlive this "
                       "function"),
    ]


AFTER_OTHER_STATEMENT = ("it runs after `reset()` in the `finally`, which is not the engine's "
                         "cleanup: it also frees what that statement released, so removing "
                         "it changes when memory is freed")


def test_cleanup_after_other_finally_statements_stays_with_its_reason() -> None:
    assert _reasons(CLEANUP_BEYOND_THE_BLOCK) == [
        (9, "GPU001", None),
        (14, "GPU004", AFTER_OTHER_STATEMENT),
    ]


def test_the_kept_cleanup_has_the_same_verdict_after_the_fix() -> None:
    new_source = fix_source(CLEANUP_BEYOND_THE_BLOCK.encode(), "tests/test_reasons.py",
                            Config()).new_source
    assert new_source is not None
    fixed = new_source.decode()
    assert "        reset()\n        gc.collect()\n    assert outputs" in fixed
    assert _reasons(fixed) == [(15, "GPU004", AFTER_OTHER_STATEMENT)]


def test_a_kept_cleanup_names_the_engine_whose_block_keeps_it() -> None:
    """The same name bound to two engines in turn, the first never deleted: the second
    engine's ``del`` is what uses the first binding, so it stays inside that engine's block
    (on its proxy), and the reason names the second engine, not the first."""
    source = ("from vllm import LLM\n\n\ndef test_x():\n"
              "    kwargs = dict(model='m')\n    llm = LLM(**kwargs)\n"
              "    llm.generate('a')\n    llm = LLM(**kwargs)\n    del llm\n")
    found = {v.location.row: v.fix for v in check_source(source.encode(), "tests/test_x.py",
                                                          Config())}
    kept = found[9]
    assert kept is not None and kept.applicability.value == "none"
    assert kept.reason == ("the rewrite of the engine built on line 8 keeps this statement "
                           "inside its block, where it acts on the engine's proxy")


def test_two_engines_in_turn_each_lose_their_cleanup() -> None:
    """The same name bound to two engines in turn, each deleted before the next: each
    engine's ``del`` and ``gc.collect()`` are its own fix's, as the report says, and the fix
    removes all four."""
    source = ("import gc\n\nfrom vllm import LLM\n\n\ndef test_x():\n"
              "    kwargs = dict(model='m')\n    llm = LLM(**kwargs)\n    del llm\n"
              "    gc.collect()\n\n    llm = LLM(**kwargs)\n    del llm\n    gc.collect()\n")
    assert [(row, code, reason) for row, code, reason in _reasons(source)] == [
        (8, "GPU001", None), (9, "GPU004", None), (10, "GPU004", None),
        (12, "GPU001", None), (13, "GPU004", None), (14, "GPU004", None)]
    result = fix_source(source.encode(), "tests/test_x.py", Config())
    assert result.new_source == (
        b"def test_x(vllm_runner):\n    kwargs = dict(model='m')\n"
        b"    with vllm_runner(**kwargs):\n        pass\n\n"
        b"    with vllm_runner(**kwargs):\n        pass\n")


THREAD_AFTER_DEL = '''\
import gc
from concurrent.futures import ThreadPoolExecutor

from vllm import LLM


def test_runner(vllm_runner, prompts):
    model = vllm_runner("m")
    main = model.generate(prompts)
    with ThreadPoolExecutor(max_workers=1) as executor:
        future = executor.submit(model.generate, prompts)
        del model
        gc.collect()
        out = future.result()
    assert main == out


def test_engine(prompts):
    llm = LLM("m")
    main = llm.generate(prompts)
    with ThreadPoolExecutor(max_workers=1) as executor:
        future = executor.submit(llm.generate, prompts)
        del llm
        gc.collect()
        out = future.result()
    assert main == out
'''


def test_cleanup_kept_in_a_block_has_the_fix_of_the_next_pass() -> None:
    """Cleanup between a use of the engine and a later use of what it handed a thread is
    kept inside the block by the rewrite; the next pass removes what it can there, and the
    report says so before: ``del`` of the bare runner the block binds as the block allows
    (as safe as the rewrite), a cleanup call as an unsafe fix, ``del`` of an engine's name
    (a proxy in the block) not at all."""
    thread = "the engine is passed to a thread or process, which may use it after the block"
    freed = "removing it changes when memory is freed within the test"
    assert _reasons(THREAD_AFTER_DEL) == [
        (8, "GPU005", thread), (12, "GPU004", thread), (13, "GPU004", freed),
        (19, "GPU001", thread),
        (23, "GPU004", "the rewrite of the engine built on line 19 keeps this statement "
                       "inside its block, where it acts on the engine's proxy"),
        (24, "GPU004", freed)]
    result = fix_source(THREAD_AFTER_DEL.encode(), "tests/test_x.py", Config(), unsafe=True)
    assert result.new_source is not None
    assert [(v.location.row, v.code) for v in result.remaining] == []
    assert result.new_source.decode().count("del ") == 1
    assert "gc.collect" not in result.new_source.decode()

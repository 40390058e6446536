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
    """The same name bound to two engines in turn: the second engine's ``del`` stays inside
    that engine's block (on its proxy; a later pass of the fix removes it there), and the
    reason names the second engine, not the first."""
    source = ("import gc\n\nfrom vllm import LLM\n\n\ndef test_x():\n"
              "    kwargs = dict(model='m')\n    llm = LLM(**kwargs)\n    del llm\n"
              "    gc.collect()\n\n    llm = LLM(**kwargs)\n    del llm\n    gc.collect()\n")
    found = {v.location.row: v.fix for v in check_source(source.encode(), "tests/test_x.py",
                                                          Config())}
    kept = found[13]
    assert kept is not None and kept.applicability.value == "none"
    assert kept.reason == ("the rewrite of the engine built on line 12 keeps this statement "
                           "inside its block, where it acts on the engine's proxy")
    fixed = fix_source(source.encode(), "tests/test_x.py", Config()).new_source
    assert fixed is not None and b"del llm" not in fixed

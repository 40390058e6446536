"""Hand-managed engines in the shapes that really leak, run with ``--gpu-leak-report``.

Run by ``tests/gpu/test_gpu_leak_report.py``. ``del llm`` of the last reference frees a
real engine, so the shapes here are the ones where something else keeps it: a failed test's
traceback (pytest keeps it in ``sys.last_traceback`` until the next test's call), a
reference that survives the test (a module-scoped fixture's cache), a reference cycle, a
module-level engine. Each ``*_after_*`` test records what it found at setup, then frees the
engine the way a suite would have to (``gc.collect()``, clearing the cache), so at most two
engines are ever alive.
"""

import gc
import weakref

import pytest
import torch
from gpu_probe import (
    ENGINE_KWARGS,
    MODEL,
    above_gib,
    generate,
    new_engine,
    record,
    seconds_until_back,
)

ENGINE = None  # the module-level engine of test_h8


@pytest.fixture(scope="module")
def engine_cache():
    return {}


def test_h1_runner(vllm_runner):
    with vllm_runner(MODEL, **ENGINE_KWARGS) as runner:
        generate(weakref.proxy(runner.llm))


def test_h2_fails_with_engine_alive():
    llm = new_engine()
    record("h2.during_gib", above_gib())
    assert generate(llm) == 0, "a failing test: its traceback holds the engine"


def test_h3_after_failure(at_setup):
    gc.collect()  # pytest dropped sys.last_traceback before this call
    record("h3.s_until_back", seconds_until_back())


def test_h4_surviving_reference(engine_cache):
    llm = new_engine()
    engine_cache["llm"] = llm  # the reference that survives
    generate(llm)
    record("h4.during_gib", above_gib())
    del llm  # the usual recipe, which cannot free what another reference holds
    gc.collect()
    torch.cuda.empty_cache()
    record("h4.s_until_back_after_del_gc_empty_cache", seconds_until_back())
    record("h4.after_recipe_gib", above_gib())


def test_h5_after_surviving_reference(at_setup, engine_cache):
    engine_cache.clear()
    gc.collect()
    record("h5.s_until_back", seconds_until_back())


def test_h6_cycle():
    llm = new_engine()
    generate(llm)
    cycle = {"engine": llm}
    cycle["self"] = cycle
    record("h6.during_gib", above_gib())
    del llm, cycle  # only the collector can free it now


def test_h7_after_cycle(at_setup):
    gc.collect()
    record("h7.s_until_back", seconds_until_back())


def test_h8_module_level_engine():
    global ENGINE
    ENGINE = new_engine()
    generate(ENGINE)
    record("h8.during_gib", above_gib())


def test_h9_innocent(at_setup):
    pass

"""The runner on a real engine: exit frees the device even when the engine outlives the block.

Run by ``tests/gpu/test_gpu_runner.py``; each test records what NVML saw.
"""

import time
import weakref

from gpu_probe import ENGINE_KWARGS, MODEL, above_gib, generate, record, seconds_until_back

from lint_gpu_tests.runtime import VllmRunner

SURVIVORS = []


def _after_exit(key, runner, started):
    """Record exit time, memory right after, and seconds from exit's start until back."""
    record(f"{key}.exit_s", time.monotonic() - started)
    record(f"{key}.after_exit_gib", above_gib())
    back = seconds_until_back()
    record(f"{key}.back_s", None if back is None else time.monotonic() - started)
    if runner is not None:
        record(f"{key}.steps", [f"{s.name}:{s.status}" for s in runner.teardown_steps])


def test_r1_alias_and_cycle_survive_the_block():
    with VllmRunner(MODEL, **ENGINE_KWARGS) as runner:
        llm = runner.llm  # a strong alias, kept past the block on purpose
        cycle = {"engine": runner.llm}
        cycle["self"] = cycle  # a reference cycle holding the engine
        record("r1.generated", generate(llm))
        record("r1.during_gib", above_gib())
        started = time.monotonic()
    _after_exit("r1", runner, started)
    SURVIVORS.append(llm)  # both survive this test: the alias here, the cycle until a gc
    del cycle


def test_r2_after_survivors(at_setup):
    record("r2.survivors", len(SURVIVORS))


def test_r3_fixture(vllm_runner):
    with vllm_runner(MODEL, **ENGINE_KWARGS) as runner:
        llm = weakref.proxy(runner.llm)
        record("r3.generated", generate(llm))
        record("r3.during_gib", above_gib())
        started = time.monotonic()
    _after_exit("r3", runner, started)


def test_r4_factory_two_engines(vllm_runner_factory):
    with vllm_runner_factory(MODEL, **ENGINE_KWARGS) as a:
        with vllm_runner_factory(MODEL, **ENGINE_KWARGS) as b:
            record("r4.generated", generate(a.llm) + generate(b.llm))
            record("r4.during_gib", above_gib())
            started = time.monotonic()
        record("r4.after_first_exit_gib", above_gib())
        record("r4.first_steps", [f"{s.name}:{s.status}" for s in b.teardown_steps])
    _after_exit("r4", a, started)


def test_r5_after_factory(at_setup):
    pass

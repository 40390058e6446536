"""Cleanup helpers of their own module, shared by the test modules beside it (the shape of a
plugin's `tests/utils.py`): `release_engine` is only cleanup of the engine it is given, and
its calls are the manual cleanup the runner's teardown takes over; `stop_engine` shuts the
engine's core down through another helper that then waits, work the runner's teardown may
not do, so its calls stay (on the engine's proxy)."""

import gc
import time


def release_engine(llm):
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()


def _stop_core(engine_core):
    engine_core.shutdown()
    time.sleep(0.1)


def stop_engine(llm):
    _stop_core(llm.llm_engine.engine_core)

"""CUDA initialised in the parent (at import, as a capability probe does), then isolation
with the default start method and a real engine in the child.

Run by ``tests/gpu/test_gpu_isolation.py``. A forked child cannot use CUDA once the parent
has initialised it ("Cannot re-initialize CUDA in forked subprocess"); the fork guard
sees that and spawns instead.
"""

import torch
from gpu_probe import above_gib, generate, new_engine, record, seconds_until_back

from lint_gpu_tests.runtime import create_new_process_for_each_test

CAPABILITY = torch.cuda.get_device_capability()  # initialises CUDA in this process
record("f.parent_cuda_initialised", torch.cuda.is_initialized())


@create_new_process_for_each_test(timeout_s=240)
def test_f1_default_isolation_after_cuda_init():
    llm = new_engine()
    record("f1.generated", generate(llm))
    record("f1.during_gib", above_gib())


def test_f2_after(at_setup):
    record("f2.s_until_back", seconds_until_back())

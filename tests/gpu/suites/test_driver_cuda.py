"""CUDA initialised in the parent through the driver only (``cuInit`` through ctypes, as a
CUDA library or a profiler does), torch imported but not initialised; then isolation with
the default start method and a real engine in the child.

Run by ``tests/gpu/test_gpu_isolation.py``. A fork guard that asked torch only
(``torch.cuda.is_initialized()`` is False here) would fork, and the child die with "CUDA
driver initialization failed" (docs/gpu-runtime.md, section (f)).
"""

import ctypes
import os

import torch  # maps libcuda.so without initialising CUDA
from gpu_probe import above_gib, generate, new_engine, record, seconds_until_back

from lint_gpu_tests.runtime import _cuda, create_new_process_for_each_test

record(f"d.imported_in.{os.getpid()}", True)
if "GPU_PROBE_DRIVER_PARENT" not in os.environ:  # the session's own process, not a child
    os.environ["GPU_PROBE_DRIVER_PARENT"] = str(os.getpid())
    LIBRARIES = _cuda.mapped_driver_libraries()
    record("d.libcuda_mapped_by_import_torch", LIBRARIES)
    record("d.reason_before_cuinit", _cuda.cuda_initialised_reason())
    DRIVER = ctypes.CDLL(LIBRARIES[0] if LIBRARIES else "libcuda.so.1")
    record("d.cuinit", DRIVER.cuInit(0))
    record("d.torch_initialised", torch.cuda.is_initialized())
    record("d.reason_after_cuinit", _cuda.cuda_initialised_reason())


@create_new_process_for_each_test(timeout_s=240)
def test_d1_default_isolation_after_driver_init():
    record("d1.child_pid", os.getpid())
    record("d1.parent_pid", int(os.environ["GPU_PROBE_DRIVER_PARENT"]))
    llm = new_engine()
    record("d1.generated", generate(llm))
    record("d1.during_gib", above_gib())


def test_d2_after(at_setup):
    record("d2.s_until_back", seconds_until_back())

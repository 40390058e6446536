"""The fork guard's CUDA probe: CUDA initialised below torch, through the driver.

Importing torch maps ``libcuda.so`` without initialising CUDA, and ``cuDeviceGetCount``
tells the two apart: it counts the devices before ``cuInit`` and answers 0 after
(``docs/gpu-runtime.md``, section (f)). Here a stand-in ``libcuda.so.1``, compiled from a
few lines of C, behaves the same way: mapped into the process, ``cuDeviceGetCount`` answers 3
until its ``cuInit`` runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lint_gpu_tests.runtime import _cuda, isolation

STAND_IN_C = """
static int initialised = 0;
int cuInit(unsigned int flags) { (void)flags; initialised = 1; return 0; }
int cuDeviceGetCount(int *count) {
    if (!initialised) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    *count = 1;
    return 0;
}
"""

needs_cc = pytest.mark.skipif(
    shutil.which("cc") is None or not Path("/proc/self/maps").exists(),
    reason="builds a stand-in libcuda.so.1 with cc; reads /proc/self/maps (Linux)",
)


@pytest.fixture
def stand_in_libcuda(tmp_path: Path) -> Path:
    """A stand-in CUDA driver library, ``libcuda.so.1`` (never loaded into this process:
    the tests that map it do so in a subprocess)."""
    source = tmp_path / "libcuda.c"
    source.write_text(STAND_IN_C)
    library = tmp_path / "lib" / "libcuda.so.1"
    library.parent.mkdir()
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def test_mapped_driver_libraries_reads_proc_maps(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    lib = "/usr/lib/x86_64-linux-gnu"
    maps.write_text(
        f"7f0000000000-7f0000001000 r--p 00000000 08:01 1 {lib}/libcuda.so.580.159.04\n"
        f"7f0000001000-7f0000002000 r-xp 00001000 08:01 1 {lib}/libcuda.so.580.159.04\n"
        "7f0000003000-7f0000004000 r--p 00000000 08:01 2 /site/cuda/lib/libcudart.so.13\n"
        "7f0000005000-7f0000006000 r--p 00000000 08:01 3 /opt/stubs/libcuda.so\n"
        "7f0000007000-7f0000008000 rw-p 00000000 00:00 0\n"
        "7f0000009000-7f000000a000 r--p 00000000 08:01 4 /opt/libcuda_helpers.so\n"
    )
    assert _cuda.mapped_driver_libraries(str(maps)) == [
        "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
        "/opt/stubs/libcuda.so",
    ]
    assert _cuda.mapped_driver_libraries(str(tmp_path / "absent")) == []


def test_an_unmapped_driver_is_never_loaded(tmp_path: Path) -> None:
    # a maps line naming a library that is not in the process: RTLD_NOLOAD refuses it
    maps = tmp_path / "maps"
    maps.write_text(f"7f0000000000-7f0000001000 r--p 00000000 08:01 1 {tmp_path}/libcuda.so.1\n")
    assert _cuda.driver_initialised_reason(str(maps)) is None


PROBE = """
import ctypes, sys
from lint_gpu_tests.runtime import _cuda
print("before mapping:", _cuda.cuda_initialised_reason())
library = ctypes.CDLL(sys.argv[1])
print("mapped:", _cuda.mapped_driver_libraries() == [sys.argv[1]])
print("mapped, no cuInit:", _cuda.cuda_initialised_reason())
library.cuInit(0)
print("after cuInit:", _cuda.cuda_initialised_reason())
"""


@needs_cc
def test_driver_probe_tells_cuinit_apart_from_a_mere_mapping(stand_in_libcuda: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(stand_in_libcuda)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert lines[:3] == ["before mapping: None", "mapped: True", "mapped, no cuInit: None"]
    assert lines[3].startswith(
        "after cuInit: the CUDA driver is initialised in this process (libcuda.so.1 is mapped "
        "and cuDeviceGetCount succeeds: 1 device(s)"
    )


CONFTEST = """
import ctypes, os

LIBRARY = ctypes.CDLL(os.environ["STAND_IN_LIBCUDA"])  # as importing a CUDA torch does
if os.environ.get("STAND_IN_CUINIT") == "1":
    LIBRARY.cuInit(0)  # as a CUDA library or a profiler does, below torch
"""

DRIVER_TESTS = """
import os
from pathlib import Path

from lint_gpu_tests.runtime import _cuda, create_new_process_for_each_test


def _record(name):
    mapped = bool(_cuda.mapped_driver_libraries())
    Path(os.environ["RECORD_DIR"], name).write_text(f"{os.getpid()} {mapped}")


@create_new_process_for_each_test()
def test_default_method(tmp_path):
    _record("default")


@create_new_process_for_each_test("fork")
def test_fork_asked_for(tmp_path):
    _record("fork")
"""


@needs_cc
@pytest.mark.parametrize("cuinit", [True, False])
def test_default_isolation_spawns_when_cuda_was_initialised_through_the_driver(
    pytester: pytest.Pytester,
    stand_in_libcuda: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cuinit: bool,
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    monkeypatch.setenv("STAND_IN_LIBCUDA", str(stand_in_libcuda))
    monkeypatch.setenv("STAND_IN_CUINIT", "1" if cuinit else "0")
    monkeypatch.setenv("RECORD_DIR", str(records))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_driver=DRIVER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "default")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    parent = [line for line in out.splitlines() if "ForkAfterCudaWarning" in line]
    for name in ("default", "fork"):
        pid, mapped = (records / name).read_text().split()
        # forked: the child is a copy, the stand-in is mapped there too; spawned: it is not
        assert mapped == ("False" if cuinit else "True"), (name, out)
    if cuinit:
        assert len(parent) == 1, out  # said once, for both tests
        assert "cuDeviceGetCount succeeds" in out
        # filed under the test's own line (the decorator), not a line of the runtime
        result.stdout.fnmatch_lines(["*/test_driver.py:*: ForkAfterCudaWarning: *"])
    else:
        assert parent == [], out


def test_forked_child_that_cannot_initialise_cuda_names_the_fix(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_forked_cuda="""
        from lint_gpu_tests.runtime import create_new_process_for_each_test

        @create_new_process_for_each_test("fork", memory_wait_timeout_s=0)
        def test_uses_cuda():
            # what torch raises in a child forked after the parent ran cuInit (H200)
            raise RuntimeError(
                "CUDA driver initialization failed, you might not have a CUDA gpu."
            )
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the forked child could not initialise CUDA: its parent process had CUDA "
            "initialised when it forked*",
            '*fix: use spawn (create_new_process_for_each_test("spawn")*',
        ]
    )


def test_cuda_hint_names_what_the_parent_has_now(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = "the CUDA driver is initialised in this process (libcuda.so.1 is mapped ...)"
    monkeypatch.setattr(isolation, "cuda_initialised_reason", lambda: reason)
    failed = {
        "outcome": "failed",
        "summary": "RuntimeError: Cannot re-initialize CUDA in forked subprocess.",
        "traceback": "",
    }
    hint = isolation._cuda_hint(failed, "fork")
    assert hint.startswith(
        f"the forked child could not initialise CUDA: the parent process has CUDA "
        f"initialised ({reason}), and a child forked after cuInit cannot use CUDA; "
        "fix: use spawn"
    )
    assert isolation._cuda_hint(failed, "spawn") == ""  # spawned: another cause
    other = dict(failed, summary="ValueError: boom")
    assert isolation._cuda_hint(other, "fork") == ""


def test_probe_never_imports_torch() -> None:
    code = (
        "import sys; from lint_gpu_tests.runtime import _cuda; "
        "_cuda.cuda_initialised_reason(); print('torch' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "False"

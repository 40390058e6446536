"""Run one suite of ``tests/gpu/suites`` as its own pytest session and read its figures.

A fresh session per scenario is what a user's run is: the engines, the plugin's options and
the leak report's baseline all start from a clean process. The suite records figures with
``gpu_probe.record``; this returns them with the session's output. With
``$GPU_RESULTS_DIR`` set, each session's figures (``NAME.json``) and output
(``NAME.out.txt``) are also kept there (``docs/gpu-runtime.md`` quotes them).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUITES = Path(__file__).resolve().parent / "suites"
REPO_ROOT = SUITES.parents[2]

#: No network, no FlashInfer (not shipped in the carried wheels), no usage reports.
ENGINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True)
class Session:
    """One suite's run.

    Attributes:
        returncode: pytest's exit status (0 all passed, 1 some failed).
        output: stdout and stderr together.
        figures: what the suite recorded (``gpu_probe.record``), key -> value.
        wall_s: the session's wall time, seconds.
    """

    returncode: int
    output: str
    figures: dict[str, Any]
    wall_s: float

    def outcomes(self) -> dict[str, str]:
        """Test name -> ``passed``/``failed``/``skipped``/``xfailed``, as the suite saw them."""
        return {
            key.removesuffix(".outcome"): value
            for key, value in self.figures.items()
            if key.endswith(".outcome")
        }


def _plugin_args() -> list[str]:
    """``-p lint_gpu_tests.runtime.plugin`` unless pytest loads it by entry point already."""
    for entry_point in importlib.metadata.entry_points(group="pytest11"):
        if entry_point.value == "lint_gpu_tests.runtime.plugin":
            return []
    return ["-p", "lint_gpu_tests.runtime.plugin"]


def run_suite(
    tmp_path: Path, name: str, files: list[str], *args: str, timeout_s: float = 540
) -> Session:
    """Run ``files`` (names under ``suites/``) with pytest ``args`` in a new process.

    ``$GPU_SUITE_TIMEOUT_S`` overrides ``timeout_s``.

    Raises:
        subprocess.TimeoutExpired: the session ran past ``timeout_s`` seconds (what it
            printed until then is kept in ``$GPU_RESULTS_DIR`` all the same).
    """
    figures_path = tmp_path / f"{name}.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith("GPU_PROBE_")}
    env.update(ENGINE_ENV)
    env["GPU_PROBE_JSON"] = str(figures_path)
    path = [str(REPO_ROOT), str(SUITES), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    command = [
        sys.executable, "-m", "pytest", *_plugin_args(), "-p", "no:cacheprovider",
        "-c", str(SUITES / "pytest.ini"), "--rootdir", str(SUITES), "-rA",
        *[str(SUITES / f) for f in files], *args,
    ]  # fmt: skip
    timeout_s = float(os.environ.get("GPU_SUITE_TIMEOUT_S", timeout_s))
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=SUITES, env=env, capture_output=True, text=True, timeout=timeout_s
        )
        returncode, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as timeout:
        returncode, output = -1, f"{_text(timeout.stdout)}{_text(timeout.stderr)}"
        _keep(name, command, figures_path, returncode, time.monotonic() - started, output)
        raise
    session = Session(
        returncode,
        output,
        json.loads(figures_path.read_text()) if figures_path.exists() else {},
        time.monotonic() - started,
    )
    _keep(name, command, figures_path, returncode, session.wall_s, output)
    print(f"{name}: exit {returncode}, {session.wall_s:.1f} s")
    print(json.dumps(session.figures, indent=1, sort_keys=True))
    return session


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def _keep(
    name: str, command: list[str], figures: Path, returncode: int, wall_s: float, output: str
) -> None:
    """Copy the figures and the output to ``$GPU_RESULTS_DIR``, when it is set."""
    keep = os.environ.get("GPU_RESULTS_DIR")
    if not keep:
        return
    Path(keep).mkdir(parents=True, exist_ok=True)
    if figures.exists():
        shutil.copy(figures, Path(keep) / f"{name}.json")
    (Path(keep) / f"{name}.out.txt").write_text(
        f"$ {' '.join(command)}\n# wall {wall_s:.1f} s, exit {returncode}\n" + output
    )

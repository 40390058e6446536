"""Stand-in for ``vllm``, used only by gpu-test-lint's runtime tests (never installed).

Like a real V1 engine, ``LLM`` starts a child process as its engine core and talks to it
through a pipe; ``llm.llm_engine.engine_core.shutdown()`` ends that process, and so does
the garbage collector finalising the client (a ``weakref.finalize``, as vLLM's client
has). The client keeps a reference cycle, so ``del llm`` alone frees nothing until
``gc.collect()`` runs, as with the real one.

``hold_gib`` (stand-in only): the engine core allocates that many GiB on ``cuda`` with
torch and holds them until it exits. 0 (the default) allocates nothing (CPU tests).
``fail_shutdown`` (stand-in only): ``shutdown()`` raises after recording itself, without
stopping the child (the finalizer still does, at collection).
``ignore_sigterm`` (stand-in only): the engine core ignores SIGTERM and the stop message,
as vLLM's CPU EngineCore has done for longer than vLLM's shutdown grace (it had to be killed).
``workers`` (stand-in only): the engine core starts that many ``VLLM::Worker`` children,
which end when their parent does (vLLM's workers watch their parent the same way),
``worker_linger_s`` seconds later (an orphaned vLLM worker lingers a while). The engine
core reports ready only once each worker has titled itself, so a client that sees the
engine built sees every process under its title.

Like vLLM's, the processes title themselves ``VLLM::EngineCore`` and ``VLLM::Worker``
(written to ``/proc/self/comm``, which keeps 15 characters), and ``shutdown(timeout)``
asks the core to stop, sends SIGTERM, joins for ``timeout`` seconds (5 when ``None``, as
vLLM) and then kills.

``EVENTS`` records, in order, what the stand-in saw.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import weakref
from multiprocessing.connection import Connection
from typing import Any

EVENTS: list[str] = []
GIB = 1 << 30


def _set_title(title: str) -> None:
    try:
        with open("/proc/self/comm", "w") as file:
            file.write(title)
    except OSError:
        pass


def _worker_main(
    parent: int, ignore_sigterm: bool, linger_s: float, titled: Connection
) -> None:
    _set_title("VLLM::Worker")
    if ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    titled.send(os.getpid())  # the engine core reports ready only after its workers did
    titled.close()
    while os.getppid() == parent:
        time.sleep(0.02)
    time.sleep(linger_s)


def _engine_core_main(
    conn: Connection, hold_gib: float, ignore_sigterm: bool, workers: int, linger_s: float
) -> None:
    _set_title("VLLM::EngineCore")
    if ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctx = multiprocessing.get_context("fork")
    titled_r, titled_w = ctx.Pipe(duplex=False)
    children = [
        ctx.Process(
            target=_worker_main, args=(os.getpid(), ignore_sigterm, linger_s, titled_w)
        )
        for _ in range(workers)
    ]
    for child in children:
        child.start()
    for _ in children:
        titled_r.recv()  # a worker's title is written before the client sees "ready"
    titled_r.close()
    titled_w.close()
    held: Any = None
    if hold_gib > 0:
        import torch

        held = torch.empty(int(hold_gib * GIB), dtype=torch.uint8, device="cuda")
        held.zero_()
        torch.cuda.synchronize()
    conn.send(("ready", os.getpid()))
    try:
        conn.recv()  # "stop", or EOF when the client side goes away
    except EOFError:
        pass
    while ignore_sigterm:
        time.sleep(1)
    del held
    os._exit(0)  # like a killed parent: the workers see it and end


def _stop(process: Any, conn: Connection, timeout: float | None) -> None:
    try:
        conn.send("stop")
    except (OSError, ValueError):
        pass
    process.join(0.5)
    if process.is_alive():
        process.terminate()
        process.join(5.0 if timeout is None else timeout)
    if process.is_alive():
        process.kill()
        process.join()
    conn.close()


class EngineCoreClient:
    """Client side of the engine-core process."""

    def __init__(
        self,
        hold_gib: float,
        fail_shutdown: bool,
        start_method: str,
        ignore_sigterm: bool = False,
        workers: int = 0,
        worker_linger_s: float = 0.0,
    ) -> None:
        ctx = multiprocessing.get_context(start_method)
        conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(
            target=_engine_core_main,
            args=(child_conn, hold_gib, ignore_sigterm, workers, worker_linger_s),
            daemon=not workers,  # a daemonic process may not have children
        )
        self.process.start()
        child_conn.close()
        _, self.pid = conn.recv()
        self._conn = conn
        self.fail_shutdown = fail_shutdown
        self._finalizer = weakref.finalize(self, _stop, self.process, conn, 60.0)

    def shutdown(self, timeout: float | None = None) -> None:
        EVENTS.append("engine_core.shutdown")
        if self.fail_shutdown:
            raise RuntimeError("stand-in engine core refused to shut down")
        self._finalizer.detach()
        _stop(self.process, self._conn, timeout)


class LLMEngine:
    def __init__(self, engine_core: EngineCoreClient) -> None:
        self.engine_core = engine_core


class LLM:
    """``LLM(model, **kwargs)``; records its arguments in ``self.kwargs``."""

    def __init__(
        self,
        model: str,
        *,
        hold_gib: float = 0.0,
        fail_shutdown: bool = False,
        start_method: str = "fork",
        ignore_sigterm: bool = False,
        workers: int = 0,
        worker_linger_s: float = 0.0,
        **kwargs: Any,
    ) -> None:
        EVENTS.append("LLM.__init__")
        self.model = model
        self.kwargs = kwargs
        self.llm_engine = LLMEngine(
            EngineCoreClient(
                hold_gib, fail_shutdown, start_method, ignore_sigterm, workers, worker_linger_s
            )
        )
        self._cycle = {"llm": self}  # a reference cycle, as in the real client
        # A tokenizer's worth of small objects: building it runs the collector's young
        # generations, so the engine, like a real one, ends up in the oldest generation,
        # which is collected rarely: after `del llm` nothing frees it for a while.
        self.vocab = [[i] for i in range(20_000)]

    def generate(self, prompts: list[str]) -> list[str]:
        return [p.upper() for p in prompts]

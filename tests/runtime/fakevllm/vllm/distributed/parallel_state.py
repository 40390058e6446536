"""Stand-in for ``vllm.distributed.parallel_state``."""

from __future__ import annotations

import vllm


def cleanup_dist_env_and_memory(shutdown_ray: bool = False) -> None:
    vllm.EVENTS.append("cleanup_dist_env_and_memory")

"""Stand-in for ``vllm.distributed``."""

from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

__all__ = ["cleanup_dist_env_and_memory"]

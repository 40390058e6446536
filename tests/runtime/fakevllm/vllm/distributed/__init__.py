"""Stand-in for ``vllm.distributed``."""

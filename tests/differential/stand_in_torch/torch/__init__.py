"""Stand-in for ``torch``, put on the child's path only when torch is not installed: the
generated modules call ``torch.cuda.empty_cache()``."""

from types import SimpleNamespace


def _empty_cache() -> None:
    """Nothing to release."""


cuda = SimpleNamespace(empty_cache=_empty_cache, is_initialized=lambda: False,
                       is_available=lambda: False, synchronize=lambda: None)

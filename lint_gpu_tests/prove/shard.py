"""``prove --shard K/N``: one part of the modules to prove, the same on every machine given
the same modules and recordings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def shard_of(modules: Sequence[str], index: int, count: int,
             cost: Mapping[str, float] | None = None) -> list[str]:
    """The modules of part ``index`` (1-based) of ``count``, in the order of ``modules``.

    The parts are balanced by ``cost`` (a module's recorded seconds; one without takes the
    mean of those with, or 1): the costliest module first (ties by name), each to the part
    with the least cost so far (ties to the lowest part).

    Raises:
        ValueError: unless ``1 <= index <= count``.
    """
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: K must be between 1 and N")
    known = cost or {}
    given = [known[m] for m in modules if m in known]
    default = sum(given) / len(given) if given else 1.0
    loads = [0.0] * count
    part: dict[str, int] = {}
    for module in sorted(modules, key=lambda m: (-known.get(m, default), m)):
        lightest = min(range(count), key=lambda i: (loads[i], i))
        part[module] = lightest
        loads[lightest] += known.get(module, default)
    return [m for m in modules if part[m] == index - 1]


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` as ``(K, N)``.

    Raises:
        ValueError: unless it is two integers with ``1 <= K <= N``.
    """
    index, _, count = text.partition("/")
    if not (index.strip().isdigit() and count.strip().isdigit()) or \
            not 1 <= int(index) <= int(count):
        raise ValueError(f"--shard {text}: expected K/N with 1 <= K <= N")
    return int(index), int(count)

"""Warm floor: start Python, read and hash (BLAKE2b, as the result cache does) every
``*.py`` file under the paths.

A cached run must at least notice which files changed; ``benchmarks/run.py`` divides
``gpu-test-lint check`` with a full cache by this. Usage: ``python floor_warm.py PATH...``.
"""

import hashlib
import sys

from floor_files import python_files


def main(paths: list[str]) -> int:
    digests = []
    for path in python_files(paths or ["."]):
        with open(path, "rb") as handle:
            digests.append(hashlib.blake2b(handle.read(), digest_size=16).digest())
    print(len(digests), "files hashed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

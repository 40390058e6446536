"""Fix-cost reference: start Python, import LibCST, then parse and print once each file listed
in LISTFILE (one path a line): ``libcst.parse_module(source).code``, nothing else.

``benchmarks/fix_cost.py`` runs this in the same rounds as ``gpu-test-lint check --diff`` over
the files the diff fixes: the loop's time over the number of files is the least a LibCST fixer
pays per fixed file. One small module is parsed first, untimed, so that what LibCST sets up on
its first parse is not counted. Each file must print back unchanged. Prints
``FILES files WALL s wall CPU s cpu`` (the loop's wall and CPU seconds).
Usage: ``python libcst_roundtrip.py LISTFILE``.
"""

import sys
import time

import libcst


def main(args: list[str]) -> int:
    with open(args[0], encoding="utf-8") as handle:
        paths = [line.rstrip("\n") for line in handle if line.strip()]
    warm = libcst.parse_module("import os\n\n\ndef f(x):\n    return os.sep + x\n")
    assert warm.code
    wall, cpu = time.perf_counter(), time.process_time()
    for path in paths:
        with open(path, encoding="utf-8", newline="") as source:
            text = source.read()
        if libcst.parse_module(text).code != text:
            print(f"{path}: LibCST did not print the source back", file=sys.stderr)
            return 2
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{len(paths)} files {wall:.6f} s wall {cpu:.6f} s cpu")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

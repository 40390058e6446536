"""Run flake8 with the gpu-test-lint plugin on or off (``on|off`` as the first argument).

The benchmark uses this to time flake8 with and without the plugin in the same environment:
``off`` drops the plugin from flake8's plugin list before flake8 loads it.
"""

from __future__ import annotations

import sys

import flake8.plugins.finder as finder
from flake8.main.cli import main


def _without_gpu(cfg, opts):  # type: ignore[no-untyped-def]
    return [p for p in _find(cfg, opts) if p.package != "gpu-test-lint"]


if __name__ == "__main__":
    mode = sys.argv.pop(1)
    if mode == "off":
        _find = finder.find_plugins
        finder.find_plugins = _without_gpu
    sys.exit(main())

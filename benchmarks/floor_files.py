"""The ``*.py`` files under some paths, for the floor scripts (``floor_cold.py``,
``floor_warm.py``): a plain ``os.walk`` that skips hidden directories, nothing more."""

import os
from collections.abc import Iterator


def python_files(paths: list[str]) -> Iterator[str]:
    """Yield every ``*.py`` file under ``paths`` (files named directly included)."""
    for top in paths:
        if os.path.isfile(top):
            yield top
            continue
        for directory, subdirs, files in os.walk(top):
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
            for name in files:
                if name.endswith(".py"):
                    yield os.path.join(directory, name)

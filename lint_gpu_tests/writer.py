"""Atomic file writes, for fixed sources and the cache.

A write goes to a temporary file in the target's own directory (so :func:`os.replace` is a
rename on one file system), is flushed to disk, takes over the target's permission bits, and
then replaces the target in one step. A reader, an editor or a concurrent run sees either the
old bytes or the new ones, never half a file; a crash leaves the old file and at worst a
stray ``.<name>.*.tmp`` file. A symlink is written through: its target is replaced, the link
stays a link.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the contents of ``path`` with ``data`` atomically.

    Args:
        path: the file to write; created when missing (mode 0o644 less the umask), else its
            permission bits are kept. A symlink's target is written, the link kept.
        data: the exact bytes to write (no newline or encoding conversion happens).

    Raises:
        OSError: when the directory is not writable or the disk is full; the original file
            is then untouched and no temporary file is left behind.
    """
    target = Path(os.path.realpath(path))
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o644 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_if_changed(path: str | os.PathLike[str], new: bytes, old: bytes | None = None) -> bool:
    """Write ``new`` to ``path`` atomically unless the file already holds exactly ``new``.

    Args:
        path: the file to write.
        new: the bytes it should hold.
        old: the bytes it is known to hold (saves a read), or ``None`` to read them.

    Returns:
        True when the file was written.

    Raises:
        OSError: as :func:`atomic_write`.
    """
    if old is None:
        try:
            old = Path(path).read_bytes()
        except FileNotFoundError:
            old = None
    if old == new:
        return False
    atomic_write(path, new)
    return True

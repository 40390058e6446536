"""Atomic file writes, for fixed sources and the cache.

A write goes to a temporary file in the target's own directory (so :func:`os.replace` is a
rename on one file system), is flushed to disk, takes over the target's permission bits (and
owner and group, where the process may set them), and
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
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    mode: int | None = stat.S_IMODE(old.st_mode) if old is not None else None
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
        if old is not None:
            _keep_owner(tmp, old)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _keep_owner(tmp: str, old: os.stat_result) -> None:
    """Give the new file the old one's owner and group, as far as we may (root can; a user
    can keep a group it belongs to; otherwise the file is ours, as an editor would make it)."""
    new = os.stat(tmp)
    if (new.st_uid, new.st_gid) == (old.st_uid, old.st_gid) or not hasattr(os, "chown"):
        return
    for uid, gid in ((old.st_uid, old.st_gid), (-1, old.st_gid)):
        try:
            os.chown(tmp, uid, gid)
            return
        except OSError:
            continue


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

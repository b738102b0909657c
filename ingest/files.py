"""Reading an ingest file through one descriptor, confined to an allowed folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kb.errors import IngestError

OUTSIDE_ROOT = "outside the ingest root (symbolic link)"


def read_confined(path: Path, root: Path | None) -> bytes:
    """The bytes of ``path``, read from one descriptor whose real path must lie inside ``root``.

    The check is made on the opened descriptor, not on the name, so a symbolic link swapped in after the
    job was created cannot make the worker read a file outside ``root``. Raises :class:`IngestError`.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # O_NONBLOCK: a FIFO cannot hang us
    except FileNotFoundError as exc:
        raise IngestError("file vanished before it could be read") from exc
    except OSError as exc:
        raise IngestError(f"cannot read file: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IngestError("not a regular file")
        if root is not None:
            real, inside = _opened_path(fd, path), root.resolve()
            if real != inside and inside not in real.parents:
                raise IngestError(OUTSIDE_ROOT)
        return fh.read()


def _opened_path(fd: int, path: Path) -> Path:
    """The real path of an open descriptor (Linux: ``/proc/self/fd``; elsewhere realpath + same inode)."""
    proc = Path(f"/proc/self/fd/{fd}")
    if proc.is_symlink():
        return Path(os.readlink(proc).removesuffix(" (deleted)"))
    real = Path(os.path.realpath(path))
    try:
        same = os.path.samestat(os.stat(real), os.fstat(fd))
    except OSError:
        same = False
    if not same:
        raise IngestError("file was replaced while being opened")
    return real

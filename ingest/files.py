"""Reading an ingest file through one descriptor, confined to an allowed folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from kb.core.errors import IngestError

OUTSIDE_ROOT = "outside the ingest root (symbolic link)"


def open_confined(path: Path, root: Path | None, max_bytes: int | None = None) -> BinaryIO:
    """``path`` opened for reading on one descriptor whose real path must lie inside ``root``.

    The check is made on the opened descriptor, not on the name, so a symbolic link swapped in after the
    job was created cannot make the worker read a file outside ``root``. A file over ``max_bytes`` is
    refused before it is read. Raises :class:`IngestError`; the caller closes the file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # O_NONBLOCK: a FIFO cannot hang us
    except FileNotFoundError as exc:
        raise IngestError("file vanished before it could be read") from exc
    except OSError as exc:
        raise IngestError(f"cannot read file: {exc.strerror or exc}") from exc
    fh = os.fdopen(fd, "rb")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise IngestError("not a regular file")
        if root is not None:
            real, inside = _opened_path(fd, path), root.resolve()
            if real != inside and inside not in real.parents:
                raise IngestError(OUTSIDE_ROOT)
            if reason := hard_link(info.st_nlink):
                raise IngestError(reason)
        if max_bytes is not None and info.st_size > max_bytes:
            raise IngestError(too_large(info.st_size, max_bytes))
    except BaseException:
        fh.close()
        raise
    return fh


def read_confined(path: Path, root: Path | None, max_bytes: int | None = None) -> bytes:
    """The bytes of ``path``, read through ``open_confined`` (the same checks); one that grew past
    ``max_bytes`` after the check is refused too. Raises :class:`IngestError`."""
    with open_confined(path, root, max_bytes) as fh:
        data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:  # grew after the check
            raise IngestError(too_large(len(data), max_bytes))
        return data


def hard_link(links: int) -> str | None:
    """The reason a file with ``links`` names is refused in a confined folder: another of its names may lie
    outside the ingest root, and no path check can see it."""
    if links > 1:
        return (f"a hard link (the file has {links} names; one may lie outside the ingest root): "
                "copy the file instead")
    return None


def too_large(size: int, max_bytes: int, what: str = "file") -> str:
    """The reason a file is refused for its size (the limit is ``KB_MAX_FILE_MB``)."""
    return f"{what} too large ({size / 2**20:.1f} MB > {max_bytes / 2**20:g} MB, KB_MAX_FILE_MB)"


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

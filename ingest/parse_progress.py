"""Pages read so far by a parser process, told to the ingesting process through a 16-byte file.

The parser (another process, ``ingest.pipeline.make_executor``) writes ``(pages read, pages)`` after each page;
the ingesting process reads it while it waits, so a long document's "reading" counts up and its job's progress
moves. A file, not shared memory: nothing to unlink in the parser, nothing leaked if it is killed.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_FORMAT = struct.Struct("<qq")


class PageCounter:
    """One parse's counter file (``path``), opened for writing in the parser, for reading in the ingester."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._fd: int | None = None

    def write(self, done: int, total: int) -> None:
        """Pages read so far of ``total`` (in the parser); a counter file gone meanwhile is ignored."""
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_WRONLY)
            except OSError:
                self._fd = -1
        if self._fd >= 0:
            os.pwrite(self._fd, _FORMAT.pack(done, total), 0)

    def read(self) -> tuple[int, int]:
        """``(pages read, pages)`` as last written, ``(0, 0)`` before the first page."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read(_FORMAT.size)
        except OSError:
            return 0, 0
        return _FORMAT.unpack(raw) if len(raw) == _FORMAT.size else (0, 0)

    def close(self) -> None:
        if self._fd is not None and self._fd >= 0:
            os.close(self._fd)
        self._fd = None

    def __getstate__(self) -> dict[str, object]:  # sent to the parser process by its path only
        return {"path": self.path, "_fd": None}


@contextmanager
def page_counter() -> Iterator[PageCounter]:
    """A new counter file for one parse, removed afterwards."""
    fd, path = tempfile.mkstemp(prefix="kb-parse-", suffix=".pages")
    os.close(fd)
    counter = PageCounter(path)
    try:
        yield counter
    finally:
        counter.close()
        Path(path).unlink(missing_ok=True)

"""One computation per key at a time in a process: who asks for a key being computed waits for that result."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """Callers of :meth:`run` with a key already being computed share that computation's result; when it failed
    or was cancelled, each of them computes for itself (the first to ask again leads)."""

    def __init__(self) -> None:
        self._running: dict[K, asyncio.Future[V]] = {}

    async def run(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        while (running := self._running.get(key)) is not None:
            await asyncio.wait({running})
            if not running.cancelled() and running.exception() is None:
                return running.result()
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            value = await compute()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: a waiter sees it and computes itself
            raise
        finally:
            del self._running[key]
        future.set_result(value)
        return value

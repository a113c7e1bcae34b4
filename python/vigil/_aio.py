# SPDX-License-Identifier: MIT
"""asyncio helpers shared by the barrier and the heartbeat."""
import asyncio
import concurrent.futures
import threading
from typing import Any, Optional

_lock = threading.Lock()
_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None


def pool() -> concurrent.futures.ThreadPoolExecutor:
    """The threads blocking calls wait in for asyncio. Not the loop's default
    executor: its few workers could all be taken by barrier waits that need
    one more arrival, from a wait still queued behind them."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=256, thread_name_prefix="vigil-wait")
        return _pool


async def finish(aw: "asyncio.Future[Any]") -> None:  # noqa: UP037
    """Await `aw` to its end even if this task is cancelled meanwhile (then
    re-raise the cancellation): on the way out nothing may stay in flight."""
    cancelled = False
    while not aw.done():
        try:
            await asyncio.shield(aw)
        except asyncio.CancelledError:
            if not aw.done():
                cancelled = True
        except BaseException:
            pass
    if not aw.cancelled():
        aw.exception()  # retrieved: never "exception was never retrieved"
    if cancelled:
        raise asyncio.CancelledError

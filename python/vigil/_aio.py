# SPDX-License-Identifier: MIT
"""asyncio helpers shared by the barrier and the heartbeat."""
from __future__ import annotations

import asyncio
from typing import Any


async def finish(aw: "asyncio.Future[Any]") -> None:
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

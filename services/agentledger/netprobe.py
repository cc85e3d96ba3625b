"""Whether a TCP server accepts a connection: the one probe the stack, the event log's outage
watch and the outage bench share (a connect, then a close; nothing is sent)."""

from __future__ import annotations

import asyncio
import contextlib


async def accepts(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether ``host:port`` accepts a TCP connection within ``timeout_s``."""
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True

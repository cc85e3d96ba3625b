"""The sandbox provider served inside the calling process, on a free 127.0.0.1 port.

Its effects live in a SQLite file, so a later process serving the same file sees every effect
an earlier one performed, even one SIGKILLed right after the provider committed.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Self

from aiohttp import web

from agentledger.providers.faults import FaultSet
from agentledger.providers.sandbox.server import create_app
from agentledger.providers.sandbox.store import SqliteEffectStore


class EmbeddedSandbox:
    """Serves the sandbox API over ``db`` while inside ``async with``; ``url`` says where."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._store = SqliteEffectStore(db)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> Self:
        self.db.parent.mkdir(parents=True, exist_ok=True)
        await self._store.start()
        runner = web.AppRunner(create_app(self._store, FaultSet()), access_log=None)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        runner, self._runner = self._runner, None
        try:
            if runner is not None:
                await runner.cleanup()
        finally:
            await self._store.stop()

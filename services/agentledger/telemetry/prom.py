"""Prometheus metrics: one registry per service process (no global default), served as text."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_log = structlog.get_logger(__name__)
#: The content type of Prometheus' text exposition format.
PROMETHEUS_TEXT = "; ".join(
    p.strip() for p in CONTENT_TYPE_LATEST.split(";") if not p.strip().startswith("charset")
)


def metrics_response(registry: CollectorRegistry) -> web.Response:
    """The registry in Prometheus' text exposition format."""
    response = web.Response(body=generate_latest(registry))
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    response.charset = "utf-8"
    return response


@asynccontextmanager
async def serving_metrics(
    host: str, port: int, render: Callable[[], Awaitable[bytes]]
) -> AsyncIterator[str]:
    """``GET /metrics`` on ``host:port`` (0 = a free port) answering ``await render()``; its URL."""

    async def page(_request: web.Request) -> web.Response:
        return web.Response(body=await render(), content_type=PROMETHEUS_TEXT)

    app = web.Application()
    app.router.add_get("/metrics", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        url = f"http://{host}:{runner.addresses[0][1]}/metrics"
        _log.info("metrics_listening", url=url)
        yield url
    finally:
        await runner.cleanup()

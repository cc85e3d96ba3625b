"""Prometheus metrics: one registry per service process (no global default), served as text."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


def metrics_response(registry: CollectorRegistry) -> web.Response:
    """The registry in Prometheus' text exposition format."""
    response = web.Response(body=generate_latest(registry))
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    response.charset = "utf-8"
    return response

"""An in-memory span exporter behind the process's OpenTelemetry provider, for tracing tests.

OpenTelemetry allows one global tracer provider per process: the first use installs an SDK
provider exporting to one in-memory exporter, and each test starts from an empty exporter.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_EXPORTER = InMemorySpanExporter()


def _installed() -> InMemorySpanExporter:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    return _EXPORTER


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The exporter, empty at the start of the test (and cleared after it)."""
    exporter = _installed()
    exporter.clear()
    yield exporter
    exporter.clear()


def by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The finished spans called ``name``, in the order they ended."""
    return [s for s in exporter.get_finished_spans() if s.name == name]

"""Setting the OpenTelemetry SDK up from the standard ``OTEL_*`` variables (optional extra).

Nothing happens unless ``OTEL_TRACES_EXPORTER`` names an exporter (``console`` or ``otlp``) and
``OTEL_SDK_DISABLED`` is not true; the service name and resource come from ``OTEL_SERVICE_NAME``
and ``OTEL_RESOURCE_ATTRIBUTES`` as the SDK reads them. ``console`` writes one JSON span per line
to ``AGENTLEDGER_TRACES_FILE`` (or stderr), exported as each span ends, so a process killed
mid-run keeps the spans it finished. ``otlp`` needs ``opentelemetry-exporter-otlp-proto-http``.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import import_module
from pathlib import Path
from typing import Any, TextIO

from opentelemetry import trace
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agentledger.errors import ConfigurationError


class TracingSettings(BaseSettings):
    """The OTEL_* variables agentledger acts on (the SDK reads the rest itself)."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    traces_exporter: str = Field(default="none", validation_alias="OTEL_TRACES_EXPORTER")
    sdk_disabled: bool = Field(default=False, validation_alias="OTEL_SDK_DISABLED")
    service_name: str | None = Field(default=None, validation_alias="OTEL_SERVICE_NAME")
    traces_file: Path | None = Field(
        default=None,
        validation_alias="AGENTLEDGER_TRACES_FILE",
        description="where the console exporter writes spans (default stderr)",
    )


def configure_tracing(settings: TracingSettings, default_service: str) -> bool:
    """Install an SDK tracer provider if the settings ask for one; whether one was installed."""
    exporter_name = settings.traces_exporter.strip().lower()
    if settings.sdk_disabled or exporter_name in {"", "none"}:
        return False
    try:
        sdk_trace = import_module("opentelemetry.sdk.trace")
        export = import_module("opentelemetry.sdk.trace.export")
        resources = import_module("opentelemetry.sdk.resources")
    except ImportError as e:
        msg = "OTEL_TRACES_EXPORTER is set but the SDK is missing: pip install 'agentledger[otel]'"
        raise ConfigurationError(msg) from e
    # process.pid tells the spans of a killed worker from those of the one that resumed
    resource = resources.Resource.create(
        {"service.name": settings.service_name or default_service, "process.pid": os.getpid()}
    )
    provider = sdk_trace.TracerProvider(resource=resource)
    if exporter_name == "console":
        out = _open(settings.traces_file)
        exporter = export.ConsoleSpanExporter(out=out, formatter=_one_line)
        provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    elif exporter_name == "otlp":
        try:
            otlp = import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        except ImportError as e:
            msg = "OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http"
            raise ConfigurationError(msg) from e
        provider.add_span_processor(export.BatchSpanProcessor(otlp.OTLPSpanExporter()))
    else:
        msg = f"OTEL_TRACES_EXPORTER={settings.traces_exporter!r}: use console, otlp or none"
        raise ConfigurationError(msg)
    trace.set_tracer_provider(provider)
    return True


def _open(path: Path | None) -> TextIO:
    if path is None:
        return sys.stderr
    return path.open("a", encoding="utf-8", buffering=1)


def _one_line(span: Any) -> str:
    return json.dumps(json.loads(span.to_json()), separators=(",", ":")) + "\n"

"""OpenTelemetry: a run's trace id comes from its run id; traceparent goes to HTTP providers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentledger.errors import ConfigurationError
from agentledger.providers import EffectRequest, HttpProvider
from agentledger.telemetry.otel_setup import TracingSettings, configure_tracing
from agentledger.telemetry.tracing import RUN_ID, child_span, run_root, run_span
from tests.tracing_support import spans

__all__ = ["spans"]


def test_the_root_of_a_run_is_derived_from_its_id() -> None:
    """Two processes compute the same trace id for one run, and different ones for two runs."""
    assert run_root("run-1") == run_root("run-1")
    assert run_root("run-1").trace_id != run_root("run-2").trace_id
    assert run_root("run-1").is_valid


def test_run_spans_join_the_runs_trace_and_link_the_caller(spans: InMemorySpanExporter) -> None:
    """A run span opened inside a caller's span is in the run's trace, linked to the caller."""
    tracer = trace.get_tracer("test")
    with (
        tracer.start_as_current_span("caller") as caller,
        run_span("agentledger.run.open", "r"),
        child_span("agentledger.step", "r"),
    ):
        pass
    finished = {s.name: s for s in spans.get_finished_spans()}
    opened, step = finished["agentledger.run.open"], finished["agentledger.step"]
    assert opened.context is not None
    assert step.context is not None
    assert step.parent is not None
    assert opened.context.trace_id == run_root("r").trace_id
    assert step.parent.span_id == opened.context.span_id
    assert [link.context for link in opened.links] == [caller.get_span_context()]
    assert step.attributes is not None
    assert step.attributes[RUN_ID] == "r"


@pytest.fixture
async def provider_url() -> AsyncIterator[tuple[list[dict[str, str]], str]]:
    """A provider answering every effect with an id; the headers it received; its URL."""
    seen: list[dict[str, str]] = []

    async def perform(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"id": "pay_1", "status": "succeeded"})

    app = web.Application()
    app.router.add_post("/v1/{kind}", perform)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield seen, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_traceparent_is_forwarded_to_http_providers(
    spans: InMemorySpanExporter, provider_url: tuple[list[dict[str, str]], str]
) -> None:
    """An effect sent inside a run's span carries a W3C traceparent of the run's trace."""
    seen, url = provider_url
    async with HttpProvider(url, name="pay") as provider:
        with child_span("agentledger.effect", "run-9") as span:
            await provider.perform(EffectRequest(kind="payments", identity={"a": 1}), "key-1")
    [headers] = seen
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, flags) == ("00", "01")
    assert int(trace_id, 16) == run_root("run-9").trace_id
    assert int(span_id, 16) == span.get_span_context().span_id


def test_tracing_is_off_unless_an_exporter_is_named() -> None:
    """No OTEL_TRACES_EXPORTER (or ``none``, or the SDK disabled) installs nothing; an unknown
    exporter is refused with the variable's name."""
    assert not configure_tracing(TracingSettings.model_construct(traces_exporter="none"), "x")
    disabled = TracingSettings.model_construct(traces_exporter="console", sdk_disabled=True)
    assert not configure_tracing(disabled, "x")
    with pytest.raises(ConfigurationError, match="OTEL_TRACES_EXPORTER"):
        configure_tracing(TracingSettings.model_construct(traces_exporter="zipkin"), "x")


NO_PROVIDER_SCRIPT = """
import asyncio, json
from agentledger.cli import configure_logging
from agentledger.telemetry.tracing import inject_traceparent
from agentledger.testing import LedgerEnvironment
from agentledger.worker import RunSpec

async def main():
    seen = []

    async def noted():
        headers = {}
        inject_traceparent(headers)
        seen.append(headers.get("traceparent"))
        return 1

    async def body(step):
        await noted()
        await step.activity("model", noted)
        return 2

    async with LedgerEnvironment() as env:
        async with env.ledger().run(RunSpec(run_id="run-7", agent="a", plan=["s"])) as run:
            await run.step("s", body)
    print(json.dumps(seen))

configure_logging("WARNING")
asyncio.run(main())
"""


def test_without_a_tracer_provider_steps_carry_the_runs_trace_context() -> None:
    """With no tracer provider set (a fresh process), what a step and an activity send names
    the run's derived trace and root span, as the spans a provider would record would."""
    out = subprocess.run(
        [sys.executable, "-c", NO_PROVIDER_SCRIPT], capture_output=True, text=True, check=True
    )
    parents = json.loads(out.stdout.strip().splitlines()[-1])
    root = run_root("run-7")
    assert parents == [f"00-{root.trace_id:032x}-{root.span_id:016x}-01"] * 2

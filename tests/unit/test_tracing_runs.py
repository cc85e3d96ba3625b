"""The span tree of a run killed after the provider committed and resumed in a new worker, and
the worker's metrics of the same runs."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from agentledger.providers.protocol import EffectRequest
from agentledger.telemetry.tracing import (
    EFFECT_KEY,
    OUTCOME,
    RUN_ID,
    STEP,
    run_root,
)
from agentledger.telemetry.worker_metrics import WorkerMetrics
from agentledger.testing import LedgerEnvironment, SimulatedCrash
from agentledger.worker import Ledger, RunSpec, Step
from tests.tracing_support import spans

__all__ = ["spans"]
SPEC = RunSpec(run_id="traced", agent="t", plan=("fetch", "pay"))
REQUEST = EffectRequest(kind="payments", identity={"order": "o1", "amount": 100})


async def fetch(step: Step) -> Any:
    """One recorded model call."""

    async def model() -> str:
        return "ok"

    return await step.activity("llm", model)


async def pay(step: Step) -> Any:
    """One payment."""
    return (await step.effect("charge", REQUEST)).external_ref


async def both_steps(ledger: Ledger) -> Any:
    """Open the run and walk both steps; the payment's reference."""
    async with ledger.run(SPEC) as run:
        await run.step("fetch", fetch)
        return await run.step("pay", pay)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    """The span's attributes as a plain dict."""
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    """The span id of the span's parent."""
    return span.parent.span_id if span.parent is not None else None


async def test_a_resumed_run_continues_the_trace_of_the_crashed_one(
    spans: InMemorySpanExporter,
) -> None:
    """Crashed after the provider committed: the first process's open, step, activity and
    effect spans and the resume's lookup (LANDED) and replayed step are one trace, keyed by the
    run id, each span under its run span; the crash shows as outcome ``crashed``."""
    metrics = WorkerMetrics()
    async with LedgerEnvironment() as env:
        crashing = env.ledger(kill_switch=env.crash_switch("after_provider_commit"))
        with pytest.raises(SimulatedCrash):
            await both_steps(crashing)
        env.expire_leases()
        ref = await both_steps(env.ledger(metrics=metrics))
    assert ref is not None
    finished = spans.get_finished_spans()
    assert {s.context.trace_id for s in finished if s.context} == {run_root("traced").trace_id}
    assert all(attrs(s)[RUN_ID] == "traced" for s in finished)
    names = [(s.name, attrs(s).get(OUTCOME)) for s in finished]
    assert names == [
        ("agentledger.activity", "recorded"),
        ("agentledger.step", "checkpointed"),
        ("agentledger.effect", "crashed"),
        ("agentledger.step", "crashed"),
        ("agentledger.run.open", "crashed"),
        ("agentledger.effect.lookup", "landed"),
        ("agentledger.step", "replayed"),
        ("agentledger.effect", "replayed"),
        ("agentledger.step", "checkpointed"),
        ("agentledger.run.resume", "succeeded"),
    ]
    opened, resumed = finished[4], finished[9]
    root = run_root("traced").span_id
    assert parent_of(opened) == parent_of(resumed) == root
    assert {parent_of(s) for s in (finished[1], finished[3])} == {opened.context.span_id}
    assert {parent_of(s) for s in (finished[5], finished[6], finished[8])} == {
        resumed.context.span_id
    }
    assert parent_of(finished[7]) == finished[8].context.span_id
    lookup, effect = attrs(finished[5]), attrs(finished[7])
    assert lookup[EFFECT_KEY] == effect[EFFECT_KEY]
    assert (lookup[STEP], effect[STEP]) == (1, 1)

    samples = {
        (s.name, *sorted(s.labels.values())): s.value
        for f in text_string_to_metric_families(metrics.render().decode())
        for s in f.samples
    }
    assert samples[("agentledger_effects_total", "replayed", "worker")] == 1
    assert samples[("agentledger_commits_total", "worker")] >= 2
    assert samples[("agentledger_step_seconds_count", "replayed")] == 1
    assert samples[("agentledger_step_seconds_count", "checkpointed")] == 1
    assert samples[("agentledger_runs_opened_total", "resume")] == 1
    assert samples[("agentledger_open_intents",)] == 0

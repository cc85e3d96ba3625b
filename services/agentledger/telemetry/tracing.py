"""OpenTelemetry spans of runs: one trace per run id, across every process that works on it.

The SDK only depends on ``opentelemetry-api``: without a configured provider every span is a
no-op. A run's spans hang under a virtual root whose trace id and span id are derived from the
run id, so the process that started a run and the one that resumed it after a kill write one
trace (linked by run id, found by ``agentledger.run_id``). A span the caller had open when the
run was opened is kept as a link. :func:`configure_tracing` sets the SDK up from the standard
``OTEL_*`` variables at a service's edge; :func:`inject_traceparent` adds the W3C
``traceparent`` to an outgoing provider request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.trace.span import TraceFlags

TRACER = "agentledger"
RUN_ID = "agentledger.run_id"
STEP = "agentledger.step"
STEP_NAME = "agentledger.step.name"
EFFECT_KEY = "agentledger.effect.idempotency_key"
EFFECT = "agentledger.effect"
ACTIVITY = "agentledger.activity"
OUTCOME = "agentledger.outcome"


def run_root(run_id: str) -> SpanContext:
    """The virtual root of ``run_id``'s trace: ids derived from the run id (never change it)."""
    digest = hashlib.sha256(f"agentledger-run:{run_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return SpanContext(
        trace_id=trace_id,
        span_id=span_id,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def _nothing_records() -> bool:
    """True while no tracer provider is set (by code or OTEL_PYTHON_TRACER_PROVIDER): every
    span is then a no-op carrying its parent's context."""
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER)


@contextmanager
def run_span(
    name: str, run_id: str, attributes: Mapping[str, Any] | None = None
) -> Iterator[trace.Span]:
    """``agentledger.run.open`` / ``.resume`` under the run's root; the caller's span linked."""
    if _nothing_records():
        # What the no-op tracer does, without building the links, attributes and parent
        # context it ignores: the run's root, non-recording, is the current span inside
        # (DESIGN.md §13, session 15)
        root = NonRecordingSpan(run_root(run_id))
        token = context.attach(trace.set_span_in_context(root))
        try:
            yield root
        finally:
            context.detach(token)
        return
    caller = trace.get_current_span().get_span_context()
    links = [Link(caller)] if caller.is_valid else []
    parent = trace.set_span_in_context(NonRecordingSpan(run_root(run_id)))
    with _tracer().start_as_current_span(
        name,
        context=parent,
        kind=SpanKind.INTERNAL,
        links=links,
        attributes={RUN_ID: run_id, **_clean(attributes or {})},
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        try:
            yield span
        except BaseException as e:
            span.set_attribute(OUTCOME, outcome_of(e))
            raise


@contextmanager
def child_span(
    name: str, run_id: str, attributes: Mapping[str, Any] | None = None
) -> Iterator[trace.Span]:
    """A step, activity or effect span under the current one (the run's root if none).

    An exception ending the span sets ``agentledger.outcome`` from its type (``unknown``,
    ``failed``, ``paused`` …; ``crashed`` for a kill or a cancellation).
    """
    parent = trace.get_current_span()
    current = parent.get_span_context()
    if current.is_valid and _nothing_records():
        # Without a tracer provider the child would be a non-recording span of this very
        # context: handing out the current span is the same, without the context switches.
        yield parent
        return
    ctx = (
        None if current.is_valid else trace.set_span_in_context(NonRecordingSpan(run_root(run_id)))
    )
    with _tracer().start_as_current_span(
        name, context=ctx, attributes={RUN_ID: run_id, **_clean(attributes or {})},
        record_exception=True, set_status_on_exception=True,
    ) as span:  # fmt: skip
        try:
            yield span
        except BaseException as e:
            span.set_attribute(OUTCOME, outcome_of(e))
            raise


#: What an exception means as a span's outcome (by class name: no import of the error module).
_OUTCOMES = {
    "EffectUnknownError": "unknown",
    "IdentityMismatchError": "identity_mismatch",
    "EffectFailedError": "failed",
    "RunPausedError": "paused",
    "ApprovalError": "approval",
    "StepRejectedError": "rejected",
    "BudgetExceededError": "budget_exceeded",
    "StaleFenceError": "fenced",
}


def outcome_of(error: BaseException) -> str:
    """The outcome an exception stands for (``error`` for an unexpected one)."""
    if not isinstance(error, Exception):
        return "crashed"
    for cls in type(error).__mro__:
        if cls.__name__ in _OUTCOMES:
            return _OUTCOMES[cls.__name__]
    return "error"


def set_outcome(span: trace.Span, outcome: str, *, error: bool = False) -> None:
    """Record how the span's work ended (``agentledger.outcome``)."""
    span.set_attribute(OUTCOME, outcome)
    if error:
        span.set_status(Status(StatusCode.ERROR, outcome))


def inject_traceparent(headers: MutableMapping[str, str]) -> None:
    """Add ``traceparent`` (and ``tracestate``) of the current span to ``headers``."""
    current = context.get_current()
    if not current:  # no span, no baggage: nothing to propagate (the reconciler's lookups)
        return
    propagate.inject(headers, context=current)


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}

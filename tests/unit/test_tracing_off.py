"""Without a tracer provider, ``run_span``'s shortcut gives what the no-op tracer gave."""

from __future__ import annotations

import json
import subprocess
import sys

#: Run in a fresh process (the test session sets a tracer provider): the old ``run_span`` body,
#: kept here, and the current one, compared on what a caller can see.
SCRIPT = r"""
import json
from collections.abc import Iterator
from contextlib import contextmanager
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanKind
from agentledger.telemetry.tracing import (
    OUTCOME, RUN_ID, _clean, _tracer, inject_traceparent, outcome_of, run_root, run_span,
)

@contextmanager
def reference_run_span(name, run_id, attributes=None) -> Iterator[trace.Span]:
    caller = trace.get_current_span().get_span_context()
    links = [Link(caller)] if caller.is_valid else []
    parent = trace.set_span_in_context(NonRecordingSpan(run_root(run_id)))
    with _tracer().start_as_current_span(
        name, context=parent, kind=SpanKind.INTERNAL, links=links,
        attributes={RUN_ID: run_id, **_clean(attributes or {})},
        record_exception=True, set_status_on_exception=True,
    ) as span:
        try:
            yield span
        except BaseException as e:
            span.set_attribute(OUTCOME, outcome_of(e))
            raise

def seen(opener, run_id, fail):
    out = {"before": str(trace.get_current_span().get_span_context())}
    try:
        with opener("agentledger.run.open", run_id, {"agentledger.agent": "a"}) as span:
            headers = {}
            inject_traceparent(headers)
            out["type"] = type(span).__name__
            out["recording"] = span.is_recording()
            out["context"] = str(span.get_span_context())
            out["current_is_it"] = trace.get_current_span() is span
            out["headers"] = headers
            span.update_name("agentledger.run.resume")
            span.set_attribute("agentledger.run.mode", "resume")
            if fail:
                raise KeyError("x")
    except KeyError as e:
        out["raised"] = repr(e)
    out["after"] = str(trace.get_current_span().get_span_context())
    return out

got = [seen(run_span, r, f) for r in ("run-1", "run-\u00e9") for f in (False, True)]
want = [seen(reference_run_span, r, f) for r in ("run-1", "run-\u00e9") for f in (False, True)]
print(json.dumps({"got": got, "want": want}))
"""


def test_run_span_without_a_provider_is_what_the_no_op_tracer_gave() -> None:
    """The span, its context, the current span inside and after, the traceparent sent and an
    exception passing through are the kept reference's, in a process with no tracer provider."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["got"] == result["want"]
    assert result["got"][0]["type"] == "NonRecordingSpan"
    assert result["got"][0]["headers"]["traceparent"].startswith("00-")
    assert result["got"][1]["raised"] == "KeyError('x')"

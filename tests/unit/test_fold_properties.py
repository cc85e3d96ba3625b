"""Properties of the pure fold: delivery order and duplicates never change the view."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.events import (
    AcceptanceEvaluated,
    ActivityRecorded,
    EffectIntended,
    EffectRecorded,
    RunEvent,
    RunFinished,
    RunStarted,
    StepCheckpointed,
    StepRejected,
    StepStarted,
)
from agentledger.views import RunView, fold

RUN = "run-prop"


def _run_events(steps: int, rejected: set[int], fence_bump_at: int | None) -> list[RunEvent]:
    """A realistic gapless run: steps with activities, effects, checks; some rejected once."""
    events: list[RunEvent] = []
    fence = 1

    def env() -> dict[str, object]:
        return {
            "run_id": RUN,
            "seq": len(events) + 1,
            "fence": fence,
            "worker_id": f"w{fence}",
            "occurred_at": 1000 + len(events),
        }

    events.append(RunStarted(**env(), agent="a", plan=[f"s{i}" for i in range(steps)]))  # type: ignore[arg-type]
    for step in range(steps):
        if fence_bump_at == step:
            fence += 1
        attempts = 2 if step in rejected else 1
        for attempt in range(1, attempts + 1):
            events.append(StepStarted(**env(), step=step, step_name=f"s{step}", attempt=attempt))  # type: ignore[arg-type]
            events.append(
                ActivityRecorded(
                    **env(),
                    step=step,
                    attempt=attempt,
                    ordinal=0,
                    name="llm",  # type: ignore[arg-type]
                    result_json=f'"{step}-{attempt}"',
                    tokens=10 * attempt,
                    usd=0.5,
                )
            )
            key = f"{RUN}:{step}:pay:0"
            events.append(
                EffectIntended(
                    **env(),
                    step=step,
                    ordinal=0,
                    effect="pay",
                    provider="p",  # type: ignore[arg-type]
                    kind="payments",
                    idempotency_key=key,
                    identity_hash="i",
                    payload_hash="p",
                )
            )
            events.append(
                EffectRecorded(
                    **env(),
                    step=step,
                    effect="pay",
                    idempotency_key=key,  # type: ignore[arg-type]
                    outcome="succeeded",
                    external_ref=f"pay_{step}",
                )
            )
            passed = attempt == attempts
            events.append(
                AcceptanceEvaluated(**env(), step=step, attempt=attempt, check="c", passed=passed)  # type: ignore[arg-type]
            )
            if passed:
                events.append(
                    StepCheckpointed(**env(), step=step, step_name=f"s{step}", attempt=attempt)  # type: ignore[arg-type]
                )
            else:
                events.append(
                    StepRejected(
                        **env(), step=step, step_name=f"s{step}", attempt=attempt, reason="no"
                    )  # type: ignore[arg-type]
                )
    events.append(RunFinished(**env(), status="succeeded"))  # type: ignore[arg-type]
    return events


def _by_topic(events: list[RunEvent]) -> dict[str, list[RunEvent]]:
    topics: dict[str, list[RunEvent]] = {}
    for e in events:
        topics.setdefault(type(e).topic_role, []).append(e)
    return topics


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[RunEvent], list[list[RunEvent]]]:
    """A run, and its delivery in batches: topics interleaved, each in order, with dups."""
    steps = draw(st.integers(min_value=1, max_value=6))
    rejected = draw(st.sets(st.integers(min_value=0, max_value=steps - 1)))
    bump = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=steps - 1)))
    events = _run_events(steps, rejected, bump)
    queues = {t: list(es) for t, es in _by_topic(events).items()}
    delivered: list[RunEvent] = []
    while any(queues.values()):
        topic = draw(st.sampled_from(sorted(t for t, q in queues.items() if q)))
        event = queues[topic].pop(0)
        delivered.append(event)
        if draw(st.booleans()) and draw(st.booleans()):
            delivered.append(event)  # at-least-once redelivery
    cuts = sorted(draw(st.sets(st.integers(min_value=0, max_value=len(delivered)), max_size=5)))
    batches, start = [], 0
    for cut in [*cuts, len(delivered)]:
        batches.append(delivered[start:cut])
        start = cut
    return events, batches


def _fold_batches(batches: list[list[RunEvent]]) -> RunView:
    view, parked = RunView(run_id=RUN), []
    for batch in batches:
        result = fold(view, parked + batch)
        view, parked = result.view, result.parked
        assert not result.stale
    assert not parked
    return view


@settings(max_examples=150, deadline=None)
@given(deliveries())
def test_any_interleaving_with_duplicates_gives_the_same_view(
    case: tuple[list[RunEvent], list[list[RunEvent]]],
) -> None:
    """Cross-topic interleavings, batch cuts and redeliveries fold to the in-order view."""
    events, batches = case
    expected = fold(RunView(run_id=RUN), events).view
    assert _fold_batches(batches) == expected


@settings(max_examples=60, deadline=None)
@given(deliveries())
def test_fold_does_not_mutate_its_input_view(
    case: tuple[list[RunEvent], list[list[RunEvent]]],
) -> None:
    """The default fold is pure: the view passed in is unchanged afterwards."""
    events, _ = case
    start = fold(RunView(run_id=RUN), events[:3]).view
    snapshot = start.model_copy(deep=True)
    fold(start, events[3:])
    assert start == snapshot


def test_in_order_run_has_cursor_budget_and_effects() -> None:
    """A folded run knows its cursor, what every attempt spent, and each effect's outcome."""
    events = _run_events(3, {1}, None)
    view = fold(RunView(run_id=RUN), events).view
    assert view.status == "succeeded"
    assert view.cursor == 3
    assert view.budget.steps == 4
    assert view.budget.tokens == 10 + 10 + 20 + 10
    assert view.budget.consecutive_errors == 0
    assert view.steps[1].attempts == 2
    assert view.steps[1].attempt == 2
    assert {e.state for e in view.effects.values()} == {"succeeded"}
    assert view.applied_seq == len(events)

"""The view hash layout: a run encoded into its three hashes decodes back to the same view."""

from __future__ import annotations

from agentledger.views.layout import (
    PARKED_FIELD,
    decode_run,
    encode_effect,
    encode_run,
    encode_step,
)
from agentledger.views.model import (
    ActivityView,
    Approval,
    Budget,
    CheckView,
    EffectView,
    Pause,
    RunView,
    StepView,
    Versions,
)

TRICKY = 'quote " backslash \\ newline \n tab \t unicode é ✓ \u2028 nul-ish \x01'


def rich_view() -> RunView:
    """A view with every kind of field set, strings that need escaping, steps and effects."""
    return RunView(
        run_id=f"run {TRICKY}",
        status="paused",
        agent=TRICKY,
        input_json='{"q": "' + TRICKY.replace("\\", "\\\\").replace('"', '\\"') + '"}',
        plan=["a", TRICKY],
        plan_version=2,
        cursor=1,
        applied_seq=9,
        fence=4,
        fence_since_seq=7,
        worker_id="w-1",
        generation=3,
        versions=Versions(code="c1", prompt=TRICKY),
        budget=Budget(max_usd=2.5, usd=0.25, steps=3, tokens=12, deadline_at=None),
        pause=Pause(reason="effect_unknown", payload_json='{"k": 1}', paused_at=5),
        approvals=[Approval(approval_id="a1", decision="approved", generation=3, note=TRICKY)],
        parent_run_id=None,
        forked_from_step=None,
        error=TRICKY,
        started_at=1,
        updated_at=2,
        finished_at=None,
        recent_digests={7: "d7", 8: "d8", 9: "d9"},
        steps={
            0: StepView(
                step=0,
                name="a",
                status="checkpointed",
                activities={0: ActivityView(ordinal=0, name="read", kind="http", usd=0.5)},
                checks=[CheckView(check="c", passed=True, detail=TRICKY)],
            ),
            10: StepView(step=10, name=TRICKY),
        },
        effects={
            f"run:0:pay:0 {TRICKY}": EffectView(
                idempotency_key=f"run:0:pay:0 {TRICKY}",
                step=0,
                ordinal=0,
                effect="pay",
                provider="p",
                kind="payments",
                identity_hash="i",
                payload_hash="h",
                state="unknown",
                detail=TRICKY,
                intended_at=30,
            ),
            "k2": EffectView(
                idempotency_key="k2",
                step=10,
                ordinal=1,
                effect="mail",
                provider="p",
                kind="mail",
                identity_hash="i2",
                payload_hash="h2",
            ),
        },
    )


def hashes(view: RunView) -> tuple[dict[bytes, bytes], dict[bytes, bytes], dict[bytes, bytes]]:
    """The run, steps and effects hashes as Redis returns them (bytes keys and values)."""
    run = {k.encode(): v for k, v in encode_run(view, parked=2, dropped_from=0).items()}
    steps = {str(n).encode(): encode_step(s) for n, s in view.steps.items()}
    effects = {k.encode(): encode_effect(e) for k, e in view.effects.items()}
    return run, steps, effects


def test_a_rich_view_decodes_back_equal_from_bytes_and_from_str_keys() -> None:
    """Every field, escaped strings, int step keys and effect order survive the round trip."""
    view = rich_view()
    run, steps, effects = hashes(view)
    decoded = decode_run(run, steps, effects)
    assert decoded == view
    assert list(decoded.steps) == [0, 10]
    assert list(decoded.effects) == list(view.effects)
    as_str = decode_run(
        {k.decode(): v for k, v in run.items()},
        {k.decode(): v for k, v in steps.items()},
        {k.decode(): v for k, v in effects.items()},
    )
    assert as_str == view


def test_fields_the_model_does_not_know_are_ignored() -> None:
    """A newer writer's extra run fields (JSON or not) and the bookkeeping fields are skipped."""
    view = RunView(run_id="r", status="running", applied_seq=3)
    run, steps, effects = hashes(view)
    run[b"from_a_newer_writer"] = b"not json {"
    run[b"steps"] = b"{}"  # a split field never comes from the run hash
    assert PARKED_FIELD.encode() in run
    assert decode_run(run, steps, effects) == view


def test_an_empty_view_decodes_with_its_defaults() -> None:
    """A run hash with only the run id gives the model's defaults and no steps or effects."""
    decoded = decode_run({b"run_id": b"r"}, {}, {})
    assert decoded == RunView(run_id="r")

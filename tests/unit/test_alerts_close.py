"""Issue 17 finding 6: a resumed, settled or succeeded run closes its alerts, and the alert
store (``alerts list``) follows what the alerts topic (``alerts tail``) says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentledger.alerts.book import AlertBook
from agentledger.alerts.codes import (
    APPROVAL_REJECTED,
    EFFECT_UNKNOWN,
    RUN_BUDGET_EXCEEDED,
)
from agentledger.alerts.delivery import MemoryDeliveryLedger
from agentledger.alerts.model import condition_key, run_alert_id
from agentledger.alerts.relay import AlertRelay
from agentledger.alerts.store import MemoryAlertStore, adopted_key, adopted_record
from agentledger.errors import EffectUnknownError
from agentledger.events import Alert
from agentledger.projector.findings import gap_alert
from agentledger.providers.faults import FaultRule
from agentledger.providers.protocol import EffectRequest
from agentledger.reconciler.scan import cleared
from agentledger.testing import LedgerEnvironment
from agentledger.views.model import RunView
from agentledger.worker import RunSpec, Step

REQUEST = EffectRequest(kind="payments", identity={"order": "o1", "amount": 100})


async def pay(step: Step) -> Any:
    """One payment effect."""
    done = await step.effect("charge", REQUEST)
    return done.external_ref


def worker_alert(state: str = "open", **detail: Any) -> Alert:
    """A worker's effect.unknown alert about run r1, key k1, as it is on the alerts topic."""
    return Alert(
        alert_id=run_alert_id(EFFECT_UNKNOWN.code, "r1", "k1"),
        code=EFFECT_UNKNOWN.code,
        severity="critical",
        state=state,  # type: ignore[arg-type]
        source="worker",
        run_id="r1",
        idempotency_key="k1",
        worker_id="w1",
        summary="outcome unknown",
        detail_json=json.dumps(detail),
    )


async def worker_alerts_of_a_settled_run() -> list[Alert]:
    """The alert events of a run whose effect became unknown and was settled on resume."""
    async with LedgerEnvironment() as env:
        env.provider.set_faults(FaultRule(mode="drop-after-commit", times=1))
        with pytest.raises(EffectUnknownError):
            async with env.ledger().run(RunSpec(run_id="r1", agent="t", plan=("pay",))) as run:
                await run.step("pay", pay)
        async with env.ledger().run(RunSpec(run_id="r1", agent="t", plan=("pay",))) as run:
            await run.step("pay", pay)
        assert (await env.view("r1")).status == "succeeded"
        return [a for a in env.alerts() if isinstance(a, Alert)]


async def test_a_resumed_run_that_settles_its_unknown_effect_closes_the_alert() -> None:
    """The resume that finds the unknown effect by lookup publishes the alert's closed event,
    under the same alert id, saying why."""
    alerts = await worker_alerts_of_a_settled_run()
    assert [(a.code, a.state) for a in alerts] == [
        (EFFECT_UNKNOWN.code, "open"),
        (EFFECT_UNKNOWN.code, "closed"),
    ]
    opened, closed = alerts
    assert closed.alert_id == opened.alert_id
    assert "settled on resume: LANDED" in json.loads(closed.detail_json)["closed_because"]


async def test_the_store_follows_the_topic_and_a_second_reading_changes_nothing() -> None:
    """Relayed worker alerts open a record (what ``alerts list`` shows) and their closed event
    forgets it; reading the topic again from the start opens nothing again."""
    store = MemoryAlertStore()
    relay = AlertRelay([], MemoryDeliveryLedger(), book=AlertBook(store, source="t"))
    opened, closed = await worker_alerts_of_a_settled_run()
    await relay.handle(opened)
    [record] = await store.active()
    assert (record.alert_id, record.state, record.outbox) == (opened.alert_id, "open", [])
    await relay.handle(closed)
    assert await store.active() == []
    await relay.handle(opened)
    await relay.handle(closed)
    assert await store.active() == []


async def test_the_reconcilers_clearing_closes_a_workers_alert_under_its_id() -> None:
    """The condition key the reconciler and ``effects resolve`` clear is the adopted record's,
    so their closed event names the worker's alert id and the reason."""
    store = MemoryAlertStore()
    assert await store.adopt(worker_alert())
    key = condition_key(EFFECT_UNKNOWN.code, run_id="r1", idempotency_key="k1")
    [event] = await AlertBook(store, source="t").close({key: "NOT_LANDED: checked by hand"})
    assert event.alert_id == run_alert_id(EFFECT_UNKNOWN.code, "r1", "k1")
    assert event.state == "closed"
    assert json.loads(event.detail_json)["closed_because"] == "NOT_LANDED: checked by hand"


async def test_an_acked_adopted_alert_stays_muted_by_its_own_closed_event() -> None:
    """The closed event an ack publishes does not forget the acked record (it stays muted)."""
    store = MemoryAlertStore()
    relay = AlertRelay([], MemoryDeliveryLedger(), book=AlertBook(store, source="t"))
    await relay.handle(worker_alert())
    ack = await store.ack(run_alert_id(EFFECT_UNKNOWN.code, "r1", "k1"), "ana", 5)
    assert ack is not None
    await relay.handle(ack)
    [record] = await store.active()
    assert record.state == "acked"
    await relay.handle(worker_alert("closed", closed_because="settled"))
    assert await store.active() == []


def adopted(alert: Alert) -> Any:
    """The record a relayed alert opens."""
    return adopted_record(alert, adopted_key(alert))


def run_alert(code: str, **detail: Any) -> Alert:
    """A worker's alert ``code`` about run r1."""
    return Alert(
        alert_id=run_alert_id(code, "r1", None),
        code=code,
        severity="warning",
        source="worker",
        run_id="r1",
        summary="s",
        detail_json=json.dumps(detail),
    )


@pytest.mark.parametrize(
    ("alert", "view", "reason"),
    [
        (run_alert(APPROVAL_REJECTED.code), RunView(run_id="r1", status="succeeded"), "succeeded"),
        (run_alert(APPROVAL_REJECTED.code), RunView(run_id="r1", status="paused"), None),
        (gap_alert("r1", 3, [5, 6], 100), RunView(run_id="r1", applied_seq=6), "seq 4 arrived"),
        (gap_alert("r1", 3, [5, 6], 100), RunView(run_id="r1", applied_seq=3), None),
        (
            run_alert(RUN_BUDGET_EXCEEDED.code),
            RunView(run_id="r1", status="budget_exceeded"),
            None,
        ),
    ],
)
def test_a_relayed_alert_clears_when_the_run_got_past_it(
    alert: Alert, view: RunView, reason: str | None
) -> None:
    """A refused approval clears once the run succeeded, a gap once its seq arrived; a budget
    stop only by an ack (it is the run's end)."""
    why = cleared(adopted(alert), view, None, 0, orphan_grace_ms=1000)
    if reason is None:
        assert why is None
    else:
        assert why is not None
        assert reason in why

"""CLI: ``reconciler``, ``alerts list|tail|ack``, ``effects list|compensate|resolve``."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

from agentledger._core.gc_tuning import tune_collector
from agentledger.alerts.ack import ack_alert
from agentledger.alerts.book import AlertBook
from agentledger.alerts.intake import take_in_alerts
from agentledger.alerts.model import AlertRecord
from agentledger.alerts.redis_store import (
    RedisAlertStore,
    RedisDeliveryLedger,
    RedisSinkDeadLetter,
)
from agentledger.bus.consumer import KafkaEventConsumer
from agentledger.bus.reading import RunReader
from agentledger.errors import ConfigurationError, RunError
from agentledger.events.codec import EventCodec
from agentledger.events.models import Alert
from agentledger.events.topics import topic_names
from agentledger.reconciler.app import drain_alerts, open_reconciler, serve
from agentledger.reconciler.effects import (
    EFFECT_STATES,
    effect_row,
    effect_rows,
    find_effect_keys,
)
from agentledger.reconciler.resolve import verdict
from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.reconciler.settle import open_settler
from agentledger.redisclient import redis_client
from agentledger.stack.resolve import resolve_settings
from agentledger.views import RunView, fold
from agentledger.views.redis_store import RedisViewStore

EXIT_NOT_FOUND = 1


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[str(r.get(c, "") if r.get(c) is not None else "-") for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


async def _settings() -> ReconcilerSettings:
    return await resolve_settings(ReconcilerSettings())


def _redis_url(settings: ReconcilerSettings) -> str:
    if settings.redis_url is None:
        raise ConfigurationError("no Redis: set AGENTLEDGER_REDIS_URL or start the local stack")
    return settings.redis_url


# --- agentledger reconciler ------------------------------------------------------------------


async def _reconciler(args: argparse.Namespace) -> int:
    settings = await _settings()
    async with open_reconciler(settings) as app:
        tune_collector()  # the process is set up: what exists now lives as long as it does
        if args.once:
            report = await app.reconciler.run_once()
            relayed = 0 if args.no_relay else await drain_alerts(app)
            data = {**report.to_dict(), "alert_records_relayed": relayed}
            if args.json:
                _out(json.dumps(data, sort_keys=True))
            else:
                _out(" ".join(f"{k}={v}" for k, v in data.items() if v))
            return 0
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(app, stop, relay=not args.no_relay)
    return 0


# --- agentledger alerts ----------------------------------------------------------------------


def _record_row(r: AlertRecord) -> dict[str, Any]:
    data = r.model_dump(mode="json", exclude={"outbox"})
    data["detail"] = json.loads(data.pop("detail_json"))
    return data


async def _alerts_list(args: argparse.Namespace) -> int:
    settings = await _settings()
    redis = redis_client(_redis_url(settings), settings=settings)
    try:
        if args.undelivered:
            entries = await RedisSinkDeadLetter(redis, settings.key_prefix).entries(args.limit)
            rows = [e.model_dump(mode="json") for e in entries]
            if args.json:
                _out(json.dumps(rows, sort_keys=True))
            else:
                flat = [
                    {
                        "sink": e.sink,
                        "alert_id": e.alert.alert_id,
                        "code": e.alert.code,
                        "attempts": e.attempts,
                        "error": e.error,
                    }
                    for e in entries
                ]
                _out(_table(flat, ["sink", "alert_id", "code", "attempts", "error"]))
            return 0
        store = RedisAlertStore(redis, settings.key_prefix)
        ledger = RedisDeliveryLedger(redis, settings.key_prefix)
        await take_in_alerts(settings, AlertBook(store, source="cli"), ledger)
        records = await store.active()
    finally:
        await redis.aclose()
    rows = [_record_row(r) for r in records]
    if args.json:
        _out(json.dumps(rows, sort_keys=True))
    else:
        cols = ["alert_id", "code", "severity", "state", "count", "run_id", "summary"]
        _out(_table(rows, cols))
    return 0


def _alert_line(a: Alert) -> str:
    where = " ".join(
        f"{k}={v}"
        for k, v in (
            ("run", a.run_id),
            ("step", a.step),
            ("effect", a.effect),
            ("worker", a.worker_id),
        )
        if v is not None
    )
    return f"{a.occurred_at} {a.state:6} {a.severity:8} {a.code} x{a.count} {where} {a.summary}"


async def _alerts_tail(args: argparse.Namespace) -> int:
    settings = await _settings()
    async with KafkaEventConsumer(
        settings,
        [topic_names(settings).alerts],
        from_beginning=True,
        until_end=not args.follow,
        client_id="agentledger-alerts-tail",
    ) as consumer:
        async for record in consumer:
            if isinstance(record.event, Alert):
                a = record.event
                _out(
                    json.dumps(a.model_dump(mode="json"), sort_keys=True)
                    if args.json
                    else _alert_line(a)
                )
                sys.stdout.flush()
    return 0


async def _alerts_ack(args: argparse.Namespace) -> int:
    event = await ack_alert(await _settings(), args.alert_id, args.by)
    if event is None:
        sys.stderr.write(f"agentledger: no open alert {args.alert_id}\n")
        return EXIT_NOT_FOUND
    if args.json:
        _out(json.dumps(event.model_dump(mode="json"), sort_keys=True))
    else:
        _out(f"acknowledged {event.alert_id} ({event.code}, seen {event.count}x)")
    return 0


# --- agentledger effects ---------------------------------------------------------------------


async def _effects_list(args: argparse.Namespace) -> int:
    settings = await _settings()
    async with RedisViewStore.from_url(
        _redis_url(settings), key_prefix=settings.key_prefix, settings=settings
    ) as views:
        rows = await effect_rows(views, run_id=args.run_id, state=args.state, limit=args.limit)
        if not rows and args.run_id is not None and await views.load(args.run_id) is None:
            rows = await _effects_from_log(settings, args.run_id, args.state)
        # An empty list would be a lie when no projector ever wrote views under this prefix.
        unindexed = not rows and await views.live_namespace() is None
    note = (
        f"no projector has indexed key prefix {settings.key_prefix!r}: effects may exist in "
        "Kafka (start `agentledger projector`, or run `agentledger views rebuild`; "
        "`effects list --run RUN` reads one run from the log)"
    )
    if args.json:
        _out(json.dumps(rows, sort_keys=True))
        if unindexed:
            sys.stderr.write(f"agentledger: {note}\n")
    elif unindexed:
        _out(note)
    else:
        cols = ["run_id", "step", "effect", "state", "idempotency_key", "external_ref"]
        _out(_table(rows, cols))
    return 0


async def _effects_from_log(
    settings: ReconcilerSettings, run_id: str, state: str | None
) -> list[dict[str, Any]]:
    """The effects of a run the views lack, folded from its events in Kafka."""
    if settings.kafka_bootstrap is None:
        raise ConfigurationError("no Kafka: set AGENTLEDGER_KAFKA_BOOTSTRAP or start the stack")
    reader = RunReader(
        settings.kafka_bootstrap,
        topic_names(settings).run_topics,
        EventCodec(),
        connect_timeout_ms=settings.kafka_connect_timeout_ms,
        read_timeout_ms=settings.kafka_publish_timeout_ms,
        settings=settings,
    )
    try:
        events = await reader.read_run(run_id, settings.run_partitions)
    finally:
        await reader.stop()
    view = fold(RunView(run_id=run_id), events).view
    ordered = sorted(view.effects.values(), key=lambda e: (e.step, e.ordinal))
    return [effect_row(view, e) for e in ordered if state is None or e.state == state]


async def _effects_compensate(args: argparse.Namespace) -> int:
    settings = await _settings()
    async with open_reconciler(settings) as app:
        view = await app.views.load(args.run_id)
        if view is None:
            raise RunError("no such run in the views", run_id=args.run_id)
        keys = find_effect_keys(view, args.effect)
        results = await app.reconciler.compensator.compensate(
            args.run_id, keys, hint_fence=view.fence
        )
    rows = [r.__dict__ for r in results]
    if args.json:
        _out(json.dumps(rows, sort_keys=True))
    else:
        _out(_table(rows, ["effect", "idempotency_key", "outcome", "compensation_key", "detail"]))
    return 0 if all(r.outcome in {"succeeded", "already"} for r in results) else EXIT_NOT_FOUND


async def _effects_resolve(args: argparse.Namespace) -> int:
    v = verdict(
        args.run_id,
        args.effect,
        landed=args.landed,
        external_ref=args.ref,
        note=args.note,
        by=args.by,
    )
    async with open_settler(await _settings()) as settler:
        settled = await settler.settle(args.run_id, args.effect, v)
    if args.json:
        _out(json.dumps(settled.to_dict(), sort_keys=True))
    else:
        _out(settled.summary())
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reconciler``, ``alerts`` and ``effects``."""
    rec = subparsers.add_parser(
        "reconciler",
        help="resolve effect intents without outcome and raise alerts (runs until SIGTERM)",
        description="Asks providers about intents whose writer is gone (never performs one), "
        "records LANDED / NOT_LANDED / UNKNOWN, re-queues orphaned runs, compensates failed "
        "runs' rejected effects, and relays alerts to the log and webhook sinks.",
    )
    rec.add_argument("--once", action="store_true", help="one full pass, then exit (cron, tests)")
    rec.add_argument("--json", action="store_true", help="with --once: print the pass as JSON")
    rec.add_argument("--no-relay", action="store_true", help="do not feed the alert sinks")
    rec.set_defaults(run=_reconciler)

    alerts = subparsers.add_parser("alerts", help="alerts for on-call people")
    sub = alerts.add_subparsers(dest="alerts_command", required=True, metavar="ACTION")
    lst = sub.add_parser("list", help="open (and acknowledged) alerts with their counts")
    lst.add_argument("--json", action="store_true")
    lst.add_argument("--undelivered", action="store_true", help="the webhook's dead letter")
    lst.add_argument("--limit", type=int, default=100)
    lst.set_defaults(run=_alerts_list)
    tail = sub.add_parser("tail", help="print the alert events on the alerts topic")
    tail.add_argument("--json", action="store_true")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    tail.set_defaults(run=_alerts_tail)
    ack = sub.add_parser("ack", help="acknowledge an alert: closes it, mutes its condition")
    ack.add_argument("alert_id")
    ack.add_argument("--by", default="cli", help="who acknowledges (recorded in the event)")
    ack.add_argument("--json", action="store_true")
    ack.set_defaults(run=_alerts_ack)

    effects = subparsers.add_parser("effects", help="effects of runs, as the views know them")
    esub = effects.add_subparsers(dest="effects_command", required=True, metavar="ACTION")
    elist = esub.add_parser("list", help="effects with their state and external reference")
    elist.add_argument("--run", dest="run_id", metavar="RUN", help="only this run")
    elist.add_argument("--state", choices=EFFECT_STATES, help="only effects in this state")
    elist.add_argument("--limit", type=int, default=1000, help="runs to look at (default 1000)")
    elist.add_argument("--json", action="store_true")
    elist.set_defaults(run=_effects_list)
    comp = esub.add_parser(
        "compensate", help="undo a performed effect once (provider compensate, own key)"
    )
    comp.add_argument("run_id", metavar="RUN")
    comp.add_argument("effect", metavar="EFFECT", help="effect name or idempotency key")
    comp.add_argument("--json", action="store_true")
    comp.set_defaults(run=_effects_compensate)
    res = esub.add_parser(
        "resolve",
        help="settle an intended/unknown effect by hand after checking the provider",
        description="Writes the reconciler's EffectReconciled (LANDED / NOT_LANDED) for the "
        "effect as operator:BY under the run's lease, closes its effect.unknown alert, and "
        "requests a resume once nothing is open. Refused while a live worker holds the run.",
    )
    res.add_argument("run_id", metavar="RUN")
    res.add_argument("effect", metavar="EFFECT_KEY", help="idempotency key (or effect name)")
    found = res.add_mutually_exclusive_group(required=True)
    found.add_argument("--landed", action="store_true", help="the provider performed it")
    found.add_argument("--not-landed", action="store_true", help="it did not happen")
    res.add_argument("--ref", help="with --landed: the provider's id of the effect")
    res.add_argument("--note", default="", help="why (recorded in the event's detail)")
    res.add_argument("--by", default="cli", help="who decides (recorded as operator:BY)")
    res.add_argument("--json", action="store_true")
    res.set_defaults(run=_effects_resolve)

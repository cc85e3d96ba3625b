"""CLI: ``agentledger projector`` and ``agentledger views rebuild|verify|dump``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from contextlib import AsyncExitStack
from typing import Any

from agentledger.bus.admin import require_topics
from agentledger.events.codec import EventCodec
from agentledger.events.topics import topic_names
from agentledger.projector.bulk import Progress, Replayer
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.rebuild import (
    compare,
    replay_into_new_namespace,
    swap_in,
    wait_for_progress,
)
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.workers import AUTO_MIN_RECORDS, ProcessReplayer, worker_count
from agentledger.stack.resolve import resolve_settings
from agentledger.views.redis_store import RedisViewStore

EXIT_DIFFERENT = 1
#: The CLI's exit code for an error raised on purpose (agentledger.cli.EXIT_ERROR).
EXIT_UNREACHABLE = 2


def register(subparsers: Any) -> None:
    """Add ``projector`` and ``views`` to the agentledger command."""
    proj = subparsers.add_parser(
        "projector",
        help="run a projector instance (faust worker) folding the run topics into Redis views",
    )
    proj.set_defaults(run=_projector)

    views = subparsers.add_parser("views", help="rebuild, verify or dump the Redis views")
    sub = views.add_subparsers(dest="views_command", required=True, metavar="ACTION")
    rebuild = sub.add_parser(
        "rebuild", help="replay all run topics into a fresh namespace and swap it in"
    )
    rebuild.add_argument("--json", action="store_true", help="print the report as JSON")
    rebuild.set_defaults(run=_rebuild)
    verify = sub.add_parser(
        "verify", help="replay into a scratch namespace and compare it key by key with the live one"
    )
    verify.add_argument(
        "--wait", type=float, default=60.0, help="seconds to wait for the live projector (60)"
    )
    verify.set_defaults(run=_verify)
    dump = sub.add_parser("dump", help="print one run's view")
    dump.add_argument("--run", dest="run_id", required=True, help="the run id")
    dump.add_argument("--json", action="store_true", help="print JSON (default: a summary)")
    dump.set_defaults(run=_dump)


def _projector(_args: argparse.Namespace) -> int:
    """Run one faust worker until SIGTERM/SIGINT, or until a dependency has been unreachable
    longer than the outage budget (then its UnreachableError: one line, exit 2)."""
    from agentledger.projector.app import ProjectorWorker, build_app  # noqa: PLC0415 - faust
    from agentledger.projector.runtime import ProjectorRuntime  # noqa: PLC0415

    settings = asyncio.run(resolve_settings(ProjectorSettings()))
    # faust would wait silently on a Kafka that never answers, or report ready with 0
    # partitions when the topics are missing: both fail here, in one line.
    asyncio.run(require_topics(settings, topic_names(settings).run_topics))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    runtime: ProjectorRuntime | None = None

    def on_fatal() -> None:
        """Past the outage budget: stop the worker as an operator's SIGTERM does (the worker's
        own handler: flush, commit, close), then the error is raised below. Not so for Kafka:
        that stop commits offsets and leaves the group on the broker that is gone, and faust's
        consumer thread dies in aiokafka's fetcher (a traceback, then a 60 s wait). Nothing
        needs the broker: progress lives in Redis (a SIGKILL is survived the same way), so the
        process says its one line and exits at once."""
        fatal = None if runtime is None else runtime.fatal
        if fatal is not None and fatal.what == "Kafka":
            sys.stderr.write(f"agentledger: error: {fatal}\n")
            sys.stderr.flush()
            os._exit(EXIT_UNREACHABLE)
        signal.raise_signal(signal.SIGTERM)

    runtime = ProjectorRuntime(settings, on_fatal=on_fatal)
    app = build_app(settings, runtime)
    worker = ProjectorWorker(
        app,
        loop=loop,
        loglevel=settings.log_level.lower(),
        redirect_stdouts=False,
        quiet=True,
    )
    try:
        worker.execute_from_commandline()
    except SystemExit:
        if runtime.fatal is not None:
            raise runtime.fatal from None
        raise
    return 0


async def _open(
    settings: ProjectorSettings, stack: AsyncExitStack
) -> tuple[RedisViewStore, KafkaLogReader]:
    assert settings.redis_url is not None
    assert settings.kafka_bootstrap is not None
    store = await stack.enter_async_context(
        RedisViewStore.from_url(
            settings.redis_url,
            key_prefix=settings.key_prefix,
            codec=EventCodec(),
            retention_ms=settings.retention,
            settings=settings,
        )
    )
    reader = await stack.enter_async_context(
        KafkaLogReader(
            settings.kafka_bootstrap,
            connect_timeout_ms=settings.kafka_connect_timeout_ms,
            settings=settings,
        )
    )
    return store, reader


def replayer_for(settings: ProjectorSettings) -> Replayer | None:
    """Worker processes for a rebuild with the given settings (None: fold in this process)."""
    if worker_count(settings, settings.run_partitions) <= 1:
        return None
    # one per core unless set: a small log folds faster here than children start
    return ProcessReplayer(
        settings, min_records=AUTO_MIN_RECORDS if settings.rebuild_workers == 0 else 0
    )


def _tell_progress(progress: Progress) -> None:
    """Records, rate and ETA on stderr (stdout keeps the report)."""
    sys.stderr.write(progress.line() + "\n")
    sys.stderr.flush()


async def _rebuild(args: argparse.Namespace) -> int:
    settings = await resolve_settings(ProjectorSettings())
    async with AsyncExitStack() as stack:
        store, reader = await _open(settings, stack)
        replay = await replay_into_new_namespace(
            store,
            reader,
            topic_names(settings).run_topics,
            partitions=settings.run_partitions,
            chunk=settings.rebuild_chunk,
            on_progress=_tell_progress,
            parked_max=settings.projector_parked_max,
            replayer=replayer_for(settings),
        )
        previous = await swap_in(store, replay, grace_ms=settings.rebuild_swap_grace_ms)
    report = {
        "namespace": replay.namespace,
        "previous": previous,
        "records": replay.records,
        "events_applied": replay.applied,
        "seconds": round(replay.seconds, 3),
        "events_per_second": round(replay.events_per_second, 1),
        "ends": {f"{t}:{p}": o for (t, p), o in sorted(replay.ends.items())},
    }
    if args.json:
        sys.stdout.write(json.dumps(report) + "\n")
    else:
        sys.stdout.write(
            f"rebuilt {replay.records} records into namespace {replay.namespace} in "
            f"{replay.seconds:.2f} s ({replay.events_per_second:.0f}/s); "
            f"live now, previous {previous or '-'} deleted\n"
        )
    return 0


async def _verify(args: argparse.Namespace) -> int:
    settings = await resolve_settings(ProjectorSettings())
    async with AsyncExitStack() as stack:
        store, reader = await _open(settings, stack)
        live = await store.live_namespace()
        replay = await replay_into_new_namespace(
            store,
            reader,
            topic_names(settings).run_topics,
            partitions=settings.run_partitions,
            chunk=settings.rebuild_chunk,
            parked_max=settings.projector_parked_max,
            replayer=replayer_for(settings),
        )
        try:
            if live is None:
                sys.stdout.write("no live views (nothing projected yet, or Redis was flushed)\n")
                return EXIT_DIFFERENT if replay.records else 0
            if not await wait_for_progress(store, live, replay.ends, args.wait):
                sys.stdout.write(
                    f"the live projector did not reach the log end within {args.wait} s\n"
                )
                return EXIT_DIFFERENT
            if not await store.is_marked(live):
                sys.stdout.write(
                    f"namespace {live} lost its progress mark: Redis was wiped under it and "
                    "what it holds now was written after the wipe\n"
                )
                return EXIT_DIFFERENT
            await store.prune(live)
            await store.prune(replay.namespace)
            result = compare(await store.snapshot(live), await store.snapshot(replay.namespace))
            if await store.live_namespace() != live:
                result.differences.append(
                    f"the live namespace changed from {live} during the comparison "
                    "(a rebuild was swapped in, or Redis was wiped): verify again"
                )
        finally:
            await store.drop_namespace(replay.namespace)
    for line in result.differences:
        sys.stdout.write(line + "\n")
    sys.stdout.write(
        f"compared {result.keys_compared} keys of namespace {live} with a rebuild of "
        f"{replay.records} records: {len(result.differences)} difference(s); "
        f"{len(result.moved_on)} run(s) moved on since\n"
    )
    return EXIT_DIFFERENT if result.differences else 0


async def _dump(args: argparse.Namespace) -> int:
    settings = await resolve_settings(ProjectorSettings())
    assert settings.redis_url is not None
    async with RedisViewStore.from_url(
        settings.redis_url, key_prefix=settings.key_prefix, settings=settings
    ) as store:
        namespace = await store.live_namespace()
        stored = (
            (await store.load_runs(namespace, [args.run_id])).get(args.run_id)
            if namespace
            else None
        )
    if stored is None:
        sys.stderr.write(f"agentledger: no view of run {args.run_id}\n")
        return EXIT_DIFFERENT
    if args.json:
        body = {
            "namespace": namespace,
            "view": stored.view.model_dump(mode="json"),
            "parked": [
                e.model_dump(mode="json") | {"type": type(e).__name__} for e in stored.parked
            ],
        }
        sys.stdout.write(json.dumps(body, indent=2, sort_keys=True) + "\n")
        return 0
    view = stored.view
    sys.stdout.write(
        f"run {view.run_id} ({view.agent}) status={view.status} cursor={view.cursor}/"
        f"{len(view.plan)} applied_seq={view.applied_seq} fence={view.fence} "
        f"steps={len(view.steps)} effects={len(view.effects)} open={len(view.open_effects())} "
        f"parked={len(stored.parked)} tokens={view.budget.tokens} usd={view.budget.usd:.4f}\n"
    )
    return 0

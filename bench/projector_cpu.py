"""``python -m bench.projector_cpu``: CPU time per event of the projector and of a rebuild.

Events/s on a machine shared with other work scale with how much of a core the process gets;
CPU seconds per event do much less. On fresh topics: a projector is started on the empty topics
and stopped (the live namespace is born), ``--events`` run events are published, one projector
process applies them (its user+system CPU time from ready to the last event applied, read from
/proc, per event), beside redis-server's own CPU time over the same span (INFO cpu: the COMMIT
scripts' work, which a projector waits for unless it overlaps it), then this process rebuilds
the topics into a fresh namespace (its CPU time per record, Redis's not counted). JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from agentledger.cli import configure_logging
from agentledger.events.topics import topic_names
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.rebuild import replay_into_new_namespace
from agentledger.projector.testing import ProjectorProcess, isolated_projector, until
from agentledger.settings import CommonSettings
from agentledger.stack.resolve import resolve_settings
from agentledger.views.redis_store import RedisViewStore
from bench.cpu import cpu_seconds, redis_cpu_seconds
from bench.projector import EVENTS_PER_RUN, _born, _publish


async def bench(events: int) -> dict[str, float]:
    """Publish, project, rebuild; CPU per event of each."""
    base = await resolve_settings(CommonSettings())
    assert base.kafka_bootstrap is not None
    assert base.redis_url is not None
    out: dict[str, float] = {}
    async with isolated_projector(
        base.kafka_bootstrap, base.redis_url, log_level="WARNING"
    ) as settings:
        await _born(settings)
        total, _ = await _publish(settings, max(1, events // EVENTS_PER_RUN))
        async with (
            RedisViewStore.from_url(base.redis_url, key_prefix=settings.key_prefix) as probe,
            ProjectorProcess(settings, name="cpu") as proc,
        ):
            await proc.wait_ready()
            assert proc.pid is not None
            redis0 = await redis_cpu_seconds(probe)
            cpu0, wall0 = cpu_seconds(proc.pid), time.perf_counter()
            await until(proc.metrics, lambda m: int(m["events_applied"]) >= total, 3600)
            cpu1, wall1 = cpu_seconds(proc.pid), time.perf_counter()
            redis1 = await redis_cpu_seconds(probe)
        out["events"] = total
        out["projector_cpu_us_per_event"] = round((cpu1 - cpu0) / total * 1e6, 1)
        # the whole server's: other clients of this stack count too (keep it otherwise idle)
        out["redis_cpu_us_per_event"] = round((redis1 - redis0) / total * 1e6, 1)
        out["projector_events_per_s_from_ready"] = round(total / (wall1 - wall0), 1)
        async with (
            RedisViewStore.from_url(
                base.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            KafkaLogReader(base.kafka_bootstrap) as reader,
        ):
            cpu0 = time.process_time()
            replay = await replay_into_new_namespace(
                store, reader, topic_names(settings).run_topics, partitions=settings.run_partitions
            )
            cpu1 = time.process_time()
        out["rebuild_cpu_us_per_record"] = round((cpu1 - cpu0) / replay.records * 1e6, 1)
        out["rebuild_events_per_s"] = round(replay.events_per_second, 1)
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print JSON."""
    p = argparse.ArgumentParser(prog="python -m bench.projector_cpu", description=__doc__)
    p.add_argument("--events", type=int, default=40_000)
    a = p.parse_args(argv)
    configure_logging("WARNING")
    sys.stdout.write(json.dumps(asyncio.run(bench(a.events))) + "\n")


if __name__ == "__main__":
    main()

"""``python -m bench.bytes [--steps 1000,10000] [--peers agentledger,floor-kafka]``: only the
bench's bytes figure (the same `_bytes_run` as the full bench: one run in a fresh namespace,
bytes at each mark), with the worker's CPU per step, and where agentledger's bytes go: per
topic, data and control batches, batch headers, records per event type, Redis per key kind."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agentledger.cli import configure_logging
from agentledger.events.codec import HEADER_LEN, MAGIC
from agentledger.events.schemas import default_schema_set
from agentledger.events.topics import topic_names
from agentledger.settings import CommonSettings
from agentledger.stack import resolve_endpoints
from bench.child import _bytes_run
from bench.harness import format_value
from bench.peers import load
from bench.peers.base import Env
from bench.peers.kafka_size import kafka_data_dir
from bench.peers.ledger_sdk import settings_for

BREAKDOWN_SETTLE_S = 3.0
BATCH_HEADER_BYTES = 61  # record batch v2: baseOffset .. recordsCount
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, position after it)."""
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _records(payload: bytes, count: int) -> Iterator[tuple[int, bytes]]:
    """(record size on the wire, value) of each record of an uncompressed batch payload."""
    pos = 0
    for _ in range(count):
        length, start = _varint(payload, pos)
        p = start + 1  # attributes
        _, p = _varint(payload, p)  # timestamp delta
        _, p = _varint(payload, p)  # offset delta
        key_len, p = _varint(payload, p)
        p += max(key_len, 0)
        value_len, p = _varint(payload, p)
        value = payload[p : p + value_len] if value_len > 0 else b""
        yield start - pos + length, value
        pos = start + length


def _decompress(codec: int, data: bytes) -> bytes | None:
    if codec == 0:
        return data
    if codec == 1:
        import gzip  # noqa: PLC0415 - only for gzip batches

        return gzip.decompress(data)
    try:
        import cramjam  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
    except ImportError:
        return None
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    return None


@dataclass
class TopicBytes:
    """What one topic's segments hold."""

    segment: int = 0
    data_batches: int = 0
    control_batches: int = 0
    control_bytes: int = 0
    headers: int = 0
    records: int = 0
    payload: int = 0  # the data batches' record bytes as stored (compressed if they are)
    uncompressed: int = 0
    codecs: Counter[str] = field(default_factory=Counter)
    per_event: Counter[str] = field(default_factory=Counter)  # uncompressed record bytes
    per_event_count: Counter[str] = field(default_factory=Counter)


def topic_breakdown(data_dir: Path, topic: str, names: dict[bytes, str]) -> TopicBytes:
    """Parse every v2 record batch of ``topic``'s segments."""
    out = TopicBytes()
    for part_dir in data_dir.iterdir():
        m = _PARTITION_DIR.match(part_dir.name)
        if m is None or m["topic"] != topic:
            continue
        for seg in part_dir.glob("*.log"):
            buf = seg.read_bytes()
            out.segment += len(buf)
            pos = 0
            while pos + BATCH_HEADER_BYTES <= len(buf):
                length = int.from_bytes(buf[pos + 8 : pos + 12], "big")
                end = pos + 12 + length
                attrs = int.from_bytes(buf[pos + 21 : pos + 23], "big")
                count = int.from_bytes(buf[pos + 57 : pos + 61], "big")
                if attrs & 0x20:
                    out.control_batches += 1
                    out.control_bytes += end - pos
                else:
                    out.data_batches += 1
                    out.headers += BATCH_HEADER_BYTES
                    out.records += count
                    codec = attrs & 0x07
                    out.codecs[_CODECS.get(codec, str(codec))] += 1
                    stored = buf[pos + BATCH_HEADER_BYTES : end]
                    out.payload += len(stored)
                    plain = _decompress(codec, stored)
                    if plain is not None:
                        out.uncompressed += len(plain)
                        for size, value in _records(plain, count):
                            fp = value[len(MAGIC) : HEADER_LEN]
                            name = names.get(fp, "?") if value[: len(MAGIC)] == MAGIC else "?"
                            out.per_event[name] += size
                            out.per_event_count[name] += 1
                pos = end
    return out


async def redis_breakdown(redis_url: str, prefix: str) -> tuple[Counter[str], Counter[str]]:
    """MEMORY USAGE of the prefix's keys summed by kind (the key's last part), and their count."""
    import redis.asyncio as aredis  # noqa: PLC0415

    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    client = aredis.Redis.from_url(redis_url)
    try:
        async for raw in client.scan_iter(match=f"{prefix}:*", count=1000):
            key = raw.decode()
            kind = key.rsplit(":", 1)[-1]
            kind = "{..}" if "{" in kind else kind
            sizes[kind] += int(await client.memory_usage(raw, samples=0) or 0)
            counts[kind] += 1
    finally:
        await client.aclose()
    return sizes, counts


def _mb(n: float) -> str:
    return format_value(n, "B")


def _print_breakdown(env: Env, topics: list[str], sizes: Counter[str], n: Counter[str]) -> None:
    names = {fp: name for fp, (name, _) in default_schema_set().writers.items()}
    data_dir = kafka_data_dir(env)
    for topic in topics:
        t = topic_breakdown(data_dir, topic, names)
        print(
            f"  {topic}: segments {_mb(t.segment)}; {t.data_batches} data batches "
            f"({dict(t.codecs)}) headers {_mb(t.headers)}, records {t.records} stored "
            f"{_mb(t.payload)} (uncompressed {_mb(t.uncompressed)}); "
            f"{t.control_batches} commit/abort markers {_mb(t.control_bytes)}"
        )
        for name, size in t.per_event.most_common():
            k = t.per_event_count[name]
            print(f"    {name}: {k} records, {_mb(size)} uncompressed ({size / k:.0f} B each)")
    for kind, size in sizes.most_common():
        print(f"  redis {kind}: {n[kind]} keys, {_mb(size)}")


async def _main(steps: list[int], peers: list[str], namespace: str, breakdown: bool) -> None:
    configure_logging("WARNING")
    settings = CommonSettings()
    endpoints = await resolve_endpoints(settings)
    work = Path(tempfile.mkdtemp(prefix="agentledger-bytes-"))
    env = Env(
        work_dir=str(work),
        kafka_bootstrap=endpoints.kafka_bootstrap,
        redis_url=endpoints.redis_url,
        state_dir=str(settings.state_dir.resolve()),
    )
    print(f"load average {os.getloadavg()[0]:.2f} at start", flush=True)
    for name in peers:
        cls = load(name)
        wall, cpu = time.perf_counter(), time.process_time()
        async with cls.sidecar(env, namespace):
            found = await _bytes_run(cls, env, namespace, max(steps), steps)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            figures = ", ".join(f"{k} steps {_mb(v)}" for k, v in found.items())
            print(
                f"{name}: {figures}; {cpu / max(steps) * 1e6:,.0f} µs CPU/step in this process "
                f"({wall:.0f} s, load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
            if breakdown and name.startswith("agentledger"):
                await asyncio.sleep(BREAKDOWN_SETTLE_S)  # the projector's last batch
                ws = settings_for(env, namespace)
                sizes, counts = await redis_breakdown(env.redis_url or "", ws.key_prefix)
                _print_breakdown(env, list(topic_names(ws).run_topics), sizes, counts)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and measure."""
    p = argparse.ArgumentParser(prog="python -m bench.bytes", description=__doc__)
    p.add_argument("--steps", default="1000", help="comma-separated marks (the run's length)")
    p.add_argument("--peers", default="agentledger,floor-kafka")
    p.add_argument(
        "--namespace", default="bytes-only", help="of the topics and keys (another bench's differ)"
    )
    p.add_argument("--no-breakdown", action="store_true")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    marks = sorted(int(x) for x in a.steps.split(",") if x.strip())
    peers = [x.strip() for x in a.peers.split(",") if x.strip()]
    asyncio.run(_main(marks, peers, a.namespace, not a.no_breakdown))


if __name__ == "__main__":
    main()

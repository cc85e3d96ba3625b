"""The bytes bench's marked probes and its reading of Kafka record batches."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

from bench.bytes import BATCH_HEADER_BYTES, topic_breakdown
from bench.peers.base import MarkedProbe, acts_at


async def test_a_marked_probe_acts_only_at_its_marks() -> None:
    """A MarkedProbe calls its action at the listed step counts and says so; plain probes
    always may act."""
    seen: list[int] = []

    async def act(done: int) -> None:
        seen.append(done)

    probe = MarkedProbe(frozenset({2, 5}), act)
    for done in range(7):
        await probe(done)
    assert seen == [2, 5]
    assert [d for d in range(7) if acts_at(probe, d)] == [2, 5]
    assert all(acts_at(act, d) for d in range(7))


def _zigzag(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _record(value: bytes) -> bytes:
    body = b"\x00" + _zigzag(0) + _zigzag(0) + _zigzag(-1) + _zigzag(len(value)) + value
    body += _zigzag(0)  # no headers
    return _zigzag(len(body)) + body


def _batch(records: list[bytes], *, attrs: int, codec_payload: bytes | None = None) -> bytes:
    payload = b"".join(_record(v) for v in records)
    stored = payload if codec_payload is None else codec_payload
    rest = (
        struct.pack(">iBi", 0, 2, 0)
        + struct.pack(">hiqqqhii", attrs, len(records) - 1, 0, 0, 1, 0, 0, len(records))
        + stored
    )
    return struct.pack(">qi", 0, len(rest)) + rest


def test_the_breakdown_counts_headers_markers_and_records_by_event(tmp_path: Path) -> None:
    """Data batches (plain and gzip) are split into headers and records named by their schema
    fingerprint; control batches are counted as markers."""
    fp = b"\x01" * 8
    value = b"\xc3\x01" + fp + b"x" * 100
    plain = _batch([value, value], attrs=0x10)
    zipped_payload = b"".join(_record(v) for v in [value])
    zipped = _batch([value], attrs=0x11, codec_payload=gzip.compress(zipped_payload))
    marker = _batch([b"\x00\x00\x00\x00\x00\x00"], attrs=0x30)
    part = tmp_path / "t.runs-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(plain + marker + zipped + marker)
    (tmp_path / "other-0").mkdir()
    t = topic_breakdown(tmp_path, "t.runs", {fp: "StepStarted"})
    assert t.segment == len(plain) + len(zipped) + 2 * len(marker)
    assert (t.data_batches, t.control_batches) == (2, 2)
    assert t.control_bytes == 2 * len(marker)
    assert t.headers == 2 * BATCH_HEADER_BYTES
    assert t.records == 3
    assert t.per_event_count == {"StepStarted": 3}
    assert t.per_event["StepStarted"] == 3 * len(_record(value))
    assert dict(t.codecs) == {"none": 1, "gzip": 1}

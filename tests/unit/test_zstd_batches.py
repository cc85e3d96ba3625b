"""zstd record batches through reused contexts: aiokafka's bytes and errors, in its builders."""

from __future__ import annotations

import threading
from collections.abc import Callable

import cramjam
import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from hypothesis import given
from hypothesis import strategies as st

from agentledger import zstd_batches
from agentledger.kafkaclient import kafka_options


def _cramjam(payload: bytes) -> bytes:
    """aiokafka's own zstd decoder (what ``zstd_batches`` falls back to)."""
    return bytes(cramjam.zstd.decompress(payload))


def _frame(data: bytes) -> bytes:
    return bytes(cramjam.zstd.compress(data))


def _outcome(decoder: Callable[[bytes], bytes], payload: bytes) -> object:
    try:
        return decoder(payload)
    except Exception as e:  # noqa: BLE001 - the comparison is of what each raises
        return type(e)


@st.composite
def _payloads(draw: st.DrawFn) -> bytes:
    """One frame, several, a frame with bytes after it, a cut or flipped frame, or noise."""
    texts = draw(st.lists(st.binary(max_size=3000), min_size=1, max_size=3))
    frames = [_frame(t) for t in texts]
    shape = draw(st.sampled_from(["one", "many", "trailing", "cut", "flipped", "noise"]))
    if shape == "one":
        return frames[0]
    if shape == "many":
        return b"".join(frames)
    if shape == "trailing":
        return frames[0] + draw(st.binary(min_size=1, max_size=8))
    if shape == "cut":
        return frames[0][: draw(st.integers(0, len(frames[0]) - 1))]
    if shape == "flipped":
        at = draw(st.integers(0, len(frames[0]) - 1))
        return frames[0][:at] + bytes([frames[0][at] ^ 0xFF]) + frames[0][at + 1 :]
    return draw(st.binary(max_size=64))


@given(_payloads())
def test_decode_gives_what_aiokafkas_decoder_gives(payload: bytes) -> None:
    """Any payload decodes to aiokafka's (cramjam's) bytes, or fails as it fails."""
    assert _outcome(lambda p: zstd_batches.decode(p, _cramjam), payload) == _outcome(
        _cramjam, payload
    )


@given(st.binary(max_size=5000), st.sampled_from([None, 1, 3, 9]))
def test_encode_writes_what_aiokafkas_encoder_writes(payload: bytes, level: int | None) -> None:
    """A payload compresses to cramjam's bytes at the same level (aiokafka's default 3)."""
    expected = bytes(cramjam.zstd.compress(payload, level=3 if level is None else level))
    assert zstd_batches.encode(payload, level) == expected


def test_each_thread_keeps_its_own_decompressor() -> None:
    """Two threads decoding at once each get their own context, and the right bytes."""
    texts = [bytes([n]) * (1000 + n) for n in range(2)]
    found: dict[int, list[bytes]] = {0: [], 1: []}

    def work(n: int) -> None:
        for _ in range(200):
            found[n].append(zstd_batches.decode(_frame(texts[n]), _cramjam))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(out == [texts[n]] * 200 for n, out in found.items())


def test_aiokafkas_record_batches_go_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a Kafka client's options are built, aiokafka's (compiled) record builder encodes a
    zstd batch and its reader decodes it through zstd_batches, records unchanged."""
    kafka_options(None)
    calls: list[bytes] = []
    real = zstd_batches.decode

    def counted(payload: bytes, fallback: Callable[[bytes], bytes]) -> bytes:
        calls.append(payload)
        return real(payload, fallback)

    encoded: list[bytes] = []
    real_encode = zstd_batches.encode

    def counted_encode(payload: bytes, level: int | None = None) -> bytes:
        encoded.append(payload)
        return real_encode(payload, level)

    monkeypatch.setattr(zstd_batches, "decode", counted)
    monkeypatch.setattr(zstd_batches, "encode", counted_encode)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=DefaultRecordBatch.CODEC_ZSTD,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    values = [f"value {n}".encode() * 20 for n in range(5)]
    for n, value in enumerate(values):
        builder.append(n, timestamp=1_000 + n, key=b"k", value=value, headers=[])
    batch = DefaultRecordBatch(bytes(builder.build()))
    assert [r.value for r in batch] == values
    assert (len(encoded), len(calls)) == (1, 1)

"""The codec's generated readers decide nothing the full path (fastavro, then pydantic) would
decide otherwise: same events, same dead-letter reasons, on valid, mangled and odd records."""

from __future__ import annotations

import io
import random
from typing import Any

import fastavro
import pytest

from agentledger.errors import DecodeError
from agentledger.events import EVENT_TYPES, Event, EventCodec, avro_compiled, avro_fast
from agentledger.events.avro_fast import compile_reader
from agentledger.events.codec import HEADER_LEN, MAGIC
from agentledger.events.schemas import default_schema_set

from .event_samples import samples

FAST = EventCodec()
FULL = EventCodec(fast=False)
#: The exec'd readers, whether or not `make venv` compiled them: both paths meet the oracles.
INTERPRETED = EventCodec(compiled=False)
SCHEMAS = default_schema_set()


def _outcome(codec: EventCodec, data: bytes) -> tuple[str, Any]:
    """What decoding ``data`` comes to: the event with its set fields, or the error."""
    try:
        event = codec.decode(data, topic="t", partition=1, offset=2)
    except DecodeError as e:
        return ("error", (type(e), str(e)))
    private = (event.__pydantic_extra__, event.__pydantic_private__)
    return ("event", (type(event), event, sorted(event.model_fields_set), private))


def _body(name: str, record: dict[str, Any]) -> bytes:
    """A record of event ``name`` written by fastavro with its current schema, unchecked."""
    buf = io.BytesIO()
    buf.write(MAGIC + SCHEMAS.current_fingerprints[name])
    fastavro.schemaless_writer(buf, SCHEMAS.current[name], record)
    return buf.getvalue()


@pytest.mark.parametrize("model", EVENT_TYPES, ids=lambda m: m.__name__)
def test_every_current_schema_has_a_fast_reader(model: type[Event]) -> None:
    """Each event's current schema compiles to a reader, so no event type is left slow."""
    name = model.__name__
    assert compile_reader(model, SCHEMAS.current[name], HEADER_LEN) is not None


def test_a_codec_compiles_a_reader_when_it_first_decodes_its_kind() -> None:
    """A new codec holds no reader until a record of a kind is decoded, then that kind's only
    (a resume that decodes no record compiles none), and the record decodes the fast way."""
    codec = EventCodec()
    assert codec._fast == {}
    event = samples()[0]
    data = codec.encode(event)
    assert codec.decode(data) == event
    assert list(codec._fast) == [SCHEMAS.current_fingerprints[type(event).__name__]]


@pytest.mark.parametrize("event", samples(), ids=lambda e: type(e).__name__)
def test_fast_decode_equals_full_decode(event: Event) -> None:
    """Every sample decodes to the same event, with the same set fields, both ways."""
    data = FAST.encode(event)
    assert _outcome(FAST, data) == _outcome(FULL, data)
    assert _outcome(INTERPRETED, data) == _outcome(FULL, data)
    assert FAST.decode(data) == event


def test_mangled_records_get_the_full_paths_verdict() -> None:
    """Flipped, dropped, inserted and appended bytes (seeded, thousands of records) give the
    same event or the same DecodeError (the dead-letter reason) either way."""
    rng = random.Random(1176227)
    errors = 0
    for event in samples():
        data = FAST.encode(event)
        for _ in range(150):
            raw = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(HEADER_LEN, len(raw))
                change = rng.randrange(4)
                if change == 0:
                    raw[at] = rng.randrange(256)
                elif change == 1:
                    del raw[at]
                elif change == 2:
                    raw.insert(at, rng.randrange(256))
                else:
                    raw += bytes([rng.randrange(256)])
            mangled = bytes(raw)
            fast, full = _outcome(FAST, mangled), _outcome(FULL, mangled)
            assert fast == full, mangled.hex()
            errors += fast[0] == "error"
    assert errors > 100  # the mangling did reach the error paths


def _step_started(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "event_id": "e",
        "occurred_at": 1,
        "run_id": "r",
        "seq": 1,
        "fence": 0,
        "worker_id": "w",
        "step": 0,
        "step_name": "s",
        "attempt": 1,
    }
    return record | changes


@pytest.mark.parametrize(
    ("name", "record", "reason"),
    [
        ("StepStarted", _step_started(seq=0), "greater than or equal to 1"),
        ("StepStarted", _step_started(fence=-1), "greater than or equal to 0"),
        ("StepStarted", _step_started(attempt=0), "greater than or equal to 1"),
        ("StepStarted", _step_started(step=-3), "greater than or equal to 0"),
    ],
    ids=["seq-0", "fence-negative", "attempt-0", "step-negative"],
)
def test_bounds_avro_allows_are_still_dead_lettered(
    name: str, record: dict[str, Any], reason: str
) -> None:
    """A record Avro reads but pydantic's bounds refuse is a DecodeError naming the bound."""
    data = _body(name, record)
    with pytest.raises(DecodeError, match=reason):
        FAST.decode(data)
    assert _outcome(FAST, data) == _outcome(FULL, data)
    assert _outcome(INTERPRETED, data) == _outcome(FULL, data)


def test_literal_values_and_model_validators_are_still_checked() -> None:
    """An unknown RunFinished status and misaligned CheckpointSaved blobs are DecodeErrors."""
    finished = {
        "event_id": "e",
        "occurred_at": 1,
        "run_id": "r",
        "seq": 2,
        "fence": 1,
        "worker_id": "w",
        "status": "exploded",
        "result_json": "null",
        "error": None,
    }
    saved = {
        "event_id": "e",
        "occurred_at": 1,
        "run_id": "r",
        "seq": 2,
        "fence": 1,
        "worker_id": "w",
        "step": 0,
        "checkpoint_ns": "",
        "checkpoint_id": "c",
        "parent_checkpoint_id": None,
        "checkpoint_json": "{}",
        "metadata_json": "{}",
        "blob_channels": ["a", "b"],
        "blob_versions": ["1"],
        "blob_kinds": ["full"],
        "blob_bases": [""],
        "blob_types": ["json"],
        "blob_values": [b"1"],
    }
    for name, record, reason in [
        ("RunFinished", finished, "RunFinished failed validation"),
        ("CheckpointSaved", saved, "same length"),
    ]:
        data = _body(name, record)
        with pytest.raises(DecodeError, match=reason):
            FAST.decode(data)
        assert _outcome(FAST, data) == _outcome(FULL, data)
        assert _outcome(INTERPRETED, data) == _outcome(FULL, data)


def test_non_canonical_encodings_decode_as_fastavro_reads_them() -> None:
    """A union index written as -1, a zero as two varint bytes, a boolean byte of 2 and
    trailing bytes: each decodes (or fails) exactly as the full path decodes it."""
    envelope = {k: v for k, v in _step_started().items() if k not in {"step", "step_name"}}
    checked = _body("AcceptanceEvaluated", envelope | {"step": 0, "check": "c", "passed": True})
    finished = _body("RunFinished", envelope | {"status": "failed", "error": "x"})
    started = _body("StepStarted", _step_started())
    cases = [
        checked[:-2] + b"\x04\x00",  # passed written as 2 (fastavro reads true), detail ""
        checked + b"\x00",  # a trailing byte
        # RunFinished's error is ["null", "string"]: index 1 written as zig-zag -1 (byte 0x01)
        finished[: finished.rindex(b"\x02\x02x")] + b"\x01\x02x",
        started[:-1] + b"\x82\x00",  # the attempt (1) written in two bytes
    ]
    for data in cases:
        assert _outcome(FAST, data) == _outcome(FULL, data), data.hex()
        assert _outcome(INTERPRETED, data) == _outcome(FULL, data), data.hex()


def _is_compiled(reader: object) -> bool:
    """Whether ``reader`` is a mypyc-compiled function (exec'd ones carry their bytecode)."""
    return callable(reader) and not hasattr(reader, "__code__")


def test_a_reader_is_served_compiled_only_under_the_hash_of_its_own_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled table is looked up under the hash of the reader's current text: that text
    gets the table's function, an edited text (a stale build's entry) is exec'd instead."""
    schema = SCHEMAS.current["StepStarted"]
    models = {m.__name__: m for m in EVENT_TYPES}
    source = avro_fast.reader_source(models["StepStarted"], schema, HEADER_LEN)
    assert source is not None

    def built(data: bytes) -> object:
        return ("built", data)

    monkeypatch.setattr(avro_compiled, "readers", lambda: {avro_fast.source_hash(source): built})
    assert compile_reader(models["StepStarted"], schema, HEADER_LEN) is built
    assert compile_reader(models["StepStarted"], schema, HEADER_LEN, compiled=False) is not built
    edited = source.replace("raise NotFast", "raise NotFast  # edited", 1)
    monkeypatch.setattr(avro_fast, "reader_source", lambda *_: edited)
    stale = compile_reader(models["StepStarted"], schema, HEADER_LEN)
    assert stale is not built
    assert stale is not None
    assert hasattr(stale, "__code__")  # exec'd from the edited text
    data = FAST.encode(samples_of("StepStarted"))
    assert stale(data) == INTERPRETED.decode(data)


def samples_of(name: str) -> Event:
    """The first sample event of type ``name``."""
    return next(e for e in samples() if type(e).__name__ == name)


@pytest.mark.skipif(
    not avro_compiled.readers(),
    reason="the compiled readers are not built here (make venv NATIVE=0, or no C compiler)",
)
def test_a_built_module_serves_every_current_reader_compiled() -> None:
    """Where `make venv` built the readers (CI does), every fast reader of the default codec is
    the compiled function, so the oracles above ran against the compiled code."""
    for event in samples():
        data = FAST.encode(event)
        assert FAST.decode(data) == INTERPRETED.decode(data)
    assert FAST._fast
    assert all(_is_compiled(r) for r in FAST._fast.values())
    assert not any(_is_compiled(r) for r in INTERPRETED._fast.values())
    assert avro_compiled.main(["--check"]) == 0

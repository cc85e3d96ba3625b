"""The Avro contract: schemas, round trips, evolution, and typed errors for bad bytes."""

from __future__ import annotations

import copy
import io
import json
import types
import typing
from pathlib import Path
from typing import Any

import fastavro
import pytest
from pydantic_core import PydanticUndefined

from agentledger.errors import DecodeError, UnknownSchemaError
from agentledger.events import EVENT_TYPES, EventCodec, StepCheckpointed
from agentledger.events.codec import MAGIC
from agentledger.events.schemas import default_schema_dir, default_schema_set, fingerprint

from .event_samples import samples

SCHEMA_DIR = default_schema_dir()
GOLDEN_DIR = Path(__file__).parents[1] / "fixtures" / "wire"


def test_every_schema_file_parses_and_is_named_after_its_record() -> None:
    """Each schemas/*.avsc is one valid Avro record whose name is the file name."""
    files = sorted(SCHEMA_DIR.glob("*.avsc"))
    assert {f.stem for f in files} == {cls.__name__ for cls in EVENT_TYPES}
    for path in files:
        parsed = fastavro.parse_schema(json.loads(path.read_text()))
        assert parsed["name"] == f"agentledger.events.{path.stem}"


def _avro_type(annotation: Any) -> Any:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return ["null", _avro_type(inner)]
    if origin is typing.Literal:
        return "string"
    if origin is list:
        return {"type": "array", "items": _avro_type(args[0])}
    return {str: "string", int: "long", float: "double", bool: "boolean", bytes: "bytes"}[
        annotation
    ]


@pytest.mark.parametrize("model", EVENT_TYPES, ids=lambda m: m.__name__)
def test_model_mirrors_its_schema(model: Any) -> None:
    """A model's fields, types and defaults are exactly those of its Avro record, in order."""
    schema = json.loads((SCHEMA_DIR / f"{model.__name__}.avsc").read_text())
    fields = [(f["name"], f["type"], f.get("default", "<none>")) for f in schema["fields"]]
    expected = []
    for name, info in model.model_fields.items():
        has_default = info.default is not PydanticUndefined and info.default_factory is None
        expected.append(
            (name, _avro_type(info.annotation), info.default if has_default else "<none>")
        )
    assert fields == expected


@pytest.mark.parametrize("event", samples(), ids=lambda e: type(e).__name__)
def test_every_event_round_trips(event: Any) -> None:
    """Encoding then decoding gives back an equal event."""
    codec = EventCodec()
    assert codec.decode(codec.encode(event)) == event


def test_golden_records_of_every_released_version_still_decode() -> None:
    """Bytes written by earlier releases (tests/fixtures/wire/<version>/) decode to their JSON."""
    codec = EventCodec()
    versions = sorted(p for p in GOLDEN_DIR.iterdir() if p.is_dir())
    assert versions, "no golden wire fixtures"
    checked = 0
    for version in versions:
        for path in sorted(version.glob("*.bin")):
            expected = json.loads(path.with_suffix(".json").read_text())
            decoded = codec.decode(path.read_bytes()).model_dump(mode="json")
            assert {k: decoded[k] for k in expected} == expected, path
            checked += 1
    assert checked >= len(EVENT_TYPES)


def test_record_written_with_an_older_schema_reads_with_the_current_one() -> None:
    """A field added with a default is filled in when reading data that predates it."""
    current = default_schema_set()
    old = copy.deepcopy(json.loads((SCHEMA_DIR / "StepCheckpointed.avsc").read_text()))
    old["fields"] = [
        f for f in old["fields"] if f["name"] not in {"result_ref_uri", "result_ref_hash"}
    ]
    codec = EventCodec(current.with_writer(old))
    old_writer = EventCodec(current.with_writer(old))
    record = {
        "event_id": "e",
        "occurred_at": 1,
        "run_id": "r",
        "seq": 3,
        "fence": 1,
        "worker_id": "w",
        "step": 0,
        "step_name": "s",
        "attempt": 1,
        "result_json": "1",
    }
    parsed_old = fastavro.parse_schema(old)
    buf = io.BytesIO()
    buf.write(MAGIC + fingerprint(parsed_old))
    fastavro.schemaless_writer(buf, parsed_old, record)
    event = codec.decode(buf.getvalue())
    assert isinstance(event, StepCheckpointed)
    assert event.result_ref_uri is None
    assert event.result_json == "1"
    assert old_writer.decode(buf.getvalue()) == event


def test_unknown_fingerprint_is_a_typed_error_naming_the_record_position() -> None:
    """A record from an unknown schema raises UnknownSchemaError with topic, partition, offset."""
    codec = EventCodec()
    data = codec.encode(samples()[0])
    bad = data[:2] + b"\x01" * 8 + data[10:]
    with pytest.raises(UnknownSchemaError) as info:
        codec.decode(bad, topic="t", partition=2, offset=41)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 2, 41)
    assert "t[2]@41" in str(info.value)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b"",
        lambda b: b'{"json": true}',
        lambda b: b[:11],
        lambda b: b[: len(b) // 2],
        lambda b: b[:10] + b"\xff" * 40,
    ],
    ids=["empty", "not-avro", "header-only", "truncated", "wrong-type"],
)
def test_malformed_bytes_raise_decode_error_not_a_crash(mangle: Any) -> None:
    """Truncated, foreign or mistyped bytes give a DecodeError, never another exception."""
    codec = EventCodec()
    data = codec.encode(samples()[0])
    with pytest.raises(DecodeError) as info:
        codec.decode(mangle(data), topic="steps", partition=0, offset=7)
    assert info.value.offset == 7


def test_schema_field_defaults_exist_for_every_optional_field() -> None:
    """Every nullable field defaults to null, so it can be added to a schema compatibly."""
    for path in SCHEMA_DIR.glob("*.avsc"):
        for f in json.loads(path.read_text())["fields"]:
            if isinstance(f["type"], list) and "null" in f["type"]:
                assert f.get("default", "missing") is None, (path.stem, f["name"])


def test_pydantic_default_is_not_undefined_sentinel() -> None:
    """Sanity: the mirror test compares real defaults (guards the helper above)."""
    assert StepCheckpointed.model_fields["result_json"].default == "null"
    assert PydanticUndefined is not None

"""Schema fingerprints: the table-driven CRC-64-AVRO gives the bytes fastavro's gave."""

from __future__ import annotations

import json

import fastavro.schema

from agentledger.events.schemas import crc64_avro, default_schema_dir, fingerprint


def _fastavro_fingerprint(schema: dict[str, object]) -> bytes:
    canonical = fastavro.schema.to_parsing_canonical_form(schema)
    return int(fastavro.schema.fingerprint(canonical, "CRC-64-AVRO"), 16).to_bytes(8, "little")


def test_crc64_avro_of_nothing_is_the_specifications_empty_value() -> None:
    """The CRC of no bytes is the Avro specification's EMPTY seed, and one byte changes it."""
    assert crc64_avro(b"") == 0xC15D213AA4D7A795
    assert crc64_avro(b"a") != crc64_avro(b"b")


def test_every_schema_fingerprint_is_byte_for_byte_what_fastavro_gives() -> None:
    """Each current and historical schema keeps the fingerprint records were written with."""
    paths = sorted(default_schema_dir().glob("*.avsc"))
    paths += sorted(default_schema_dir().glob("history/*/*.avsc"))
    assert paths
    for path in paths:
        schema = fastavro.parse_schema(json.loads(path.read_text()))
        assert fingerprint(schema) == _fastavro_fingerprint(schema), path.name

"""Loads the Avro contract: current schemas from ``schemas/``, older ones from ``schemas/history/``.

A schema is identified on the wire by the CRC-64-AVRO fingerprint of its parsing canonical
form (Avro single-object encoding). Every schema this project ever wrote with stays in
``schemas/history/<version>/<Record>.avsc`` so that any older record can still be read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
import fastavro.schema

from agentledger.errors import ConfigurationError

NAMESPACE = "agentledger.events"


def default_schema_dir() -> Path:
    """``schemas/`` at the top of the repository (services/agentledger/events -> ../../..)."""
    return Path(__file__).resolve().parents[3] / "schemas"


#: The Rabin fingerprint's seed (the Avro specification's "EMPTY").
_CRC64_EMPTY = 0xC15D213AA4D7A795


def _crc64_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_CRC64_EMPTY & -(fp & 1))
        table.append(fp)
    return tuple(table)


_CRC64_TABLE = _crc64_table()


def crc64_avro(data: bytes) -> int:
    """CRC-64-AVRO of ``data``, table-driven as in the Avro specification (fastavro's takes
    about 0.4 ms per schema: some 10 ms of every process's start went into fingerprints)."""
    fp = _CRC64_EMPTY
    table = _CRC64_TABLE
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def fingerprint(schema: dict[str, Any]) -> bytes:
    """The 8-byte little-endian CRC-64-AVRO fingerprint of a schema's canonical form."""
    canonical = fastavro.schema.to_parsing_canonical_form(schema)
    # fastavro's hex digest is of the little-endian bytes and was read back as one number and
    # written "little": the bytes on the wire are the CRC's big-endian bytes (kept as written).
    return crc64_avro(canonical.encode()).to_bytes(8, "big")


@dataclass(frozen=True)
class SchemaSet:
    """Reader schemas by record name, and every known writer schema by fingerprint."""

    current: dict[str, dict[str, Any]]
    current_fingerprints: dict[str, bytes]
    writers: dict[bytes, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def with_writer(self, schema: dict[str, Any]) -> SchemaSet:
        """A copy that also knows ``schema`` as a writer (used for history and tests)."""
        parsed = _parse(schema)
        name = _short_name(parsed["name"])
        writers = dict(self.writers)
        writers[fingerprint(parsed)] = (name, parsed)
        return SchemaSet(self.current, self.current_fingerprints, writers)


def _parse(schema: Any) -> dict[str, Any]:
    parsed = fastavro.parse_schema(schema)
    if not isinstance(parsed, dict):
        msg = f"an event schema must be one Avro record, got {type(parsed).__name__}"
        raise ConfigurationError(msg)
    return parsed


def _short_name(full_name: str) -> str:
    return full_name.rsplit(".", 1)[-1]


def _read_schema(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        parsed = _parse(raw)
    except (OSError, ValueError, fastavro.schema.SchemaParseException) as e:
        msg = f"schema file {path} is not a valid Avro schema: {e}"
        raise ConfigurationError(msg) from e
    if _short_name(parsed["name"]) != path.stem:
        msg = f"schema file {path} defines record {parsed['name']}; file name must be record name"
        raise ConfigurationError(msg)
    return parsed


def load_schema_set(schema_dir: Path) -> SchemaSet:
    """Read every current and historical schema under ``schema_dir``."""
    if not schema_dir.is_dir():
        msg = f"Avro schema directory {schema_dir} does not exist (is the repository complete?)"
        raise ConfigurationError(msg)
    current: dict[str, dict[str, Any]] = {}
    current_fps: dict[str, bytes] = {}
    writers: dict[bytes, tuple[str, dict[str, Any]]] = {}
    for path in sorted(schema_dir.glob("*.avsc")):
        parsed = _read_schema(path)
        fp = fingerprint(parsed)
        current[path.stem] = parsed
        current_fps[path.stem] = fp
        writers[fp] = (path.stem, parsed)
    for path in sorted(schema_dir.glob("history/*/*.avsc")):
        parsed = _read_schema(path)
        writers.setdefault(fingerprint(parsed), (path.stem, parsed))
    return SchemaSet(current, current_fps, writers)


@cache
def default_schema_set() -> SchemaSet:
    """The schema set of this checkout, loaded once."""
    return load_schema_set(default_schema_dir())

"""Avro single-object encoding of events: ``C3 01`` + 8-byte schema fingerprint + Avro binary.

Any record written by any version of this project decodes, because every writer schema is kept
(see :mod:`agentledger.events.schemas`) and Avro schema resolution fills added fields with
their defaults. Anything else raises a typed :class:`DecodeError` naming where the bytes came
from, so a consumer can dead-letter it and go on.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pydantic

from agentledger.errors import DecodeError, UnknownSchemaError
from agentledger.events.avro_fast import DOUBTS, NotFast, Reader, compile_reader
from agentledger.events.avro_writers import Writer, compile_writer
from agentledger.events.models import EVENT_BY_NAME, Event
from agentledger.events.schemas import SchemaSet, default_schema_set

MAGIC = b"\xc3\x01"
HEADER_LEN = len(MAGIC) + 8


_READERS: dict[tuple[type[Event], bytes, bool], Reader | None] = {}


def _reader(model: type[Event], fp: bytes, schema: dict[str, Any], compiled: bool) -> Reader | None:
    """The fast reader of ``model`` records written with ``schema``, made once per process
    (the fingerprint covers the field names, types and order: all the reader depends on)."""
    key = (model, fp, compiled)
    if key not in _READERS:
        _READERS[key] = compile_reader(model, schema, HEADER_LEN, compiled=compiled)
    return _READERS[key]


class EventCodec:
    """Encodes events with the current schemas and decodes records of any known schema."""

    def __init__(
        self, schemas: SchemaSet | None = None, *, fast: bool = True, compiled: bool = True
    ) -> None:
        """``fast=False`` decodes (and encodes) every record the full way (fastavro, then
        pydantic; ``model_dump`` then fastavro), and
        ``compiled=False`` takes the exec'd fast readers even when compiled ones were built
        (see :mod:`agentledger.events.avro_compiled`): tests compare the paths."""
        # records written with a current schema (nearly all) take a generated reader that
        # answers only when it is sure, else the full path below decides (see avro_fast). A
        # reader is compiled when its first record is decoded: a process that decodes few
        # kinds (a resume reads a view, decodes no record) does not compile two dozen.
        self._fast: dict[bytes, Reader] = {}
        # encoding: a header and a fast writer per event class (None: fastavro writes it)
        self._writers: dict[type[Event], tuple[bytes, Writer | None]] = {}
        self._fast_writes = fast
        self._use_compiled = compiled
        self._uncompiled: dict[bytes, tuple[type[Event], dict[str, Any]]] = {}
        # The default schema set is read (24 files parsed and fingerprinted, ~3 ms) when the
        # first record is encoded or decoded: a resume from the views does neither before it
        # is ready.
        self._schemas: SchemaSet | None = None
        if schemas is not None:
            self._use(schemas)

    def _use(self, schemas: SchemaSet) -> SchemaSet:
        missing = set(EVENT_BY_NAME) - set(schemas.current)
        if missing:
            msg = f"no Avro schema for events {sorted(missing)} in schemas/"
            raise DecodeError(msg)
        for name, fp in schemas.current_fingerprints.items() if self._fast_writes else ():
            model = EVENT_BY_NAME.get(name)
            known = schemas.writers.get(fp)
            if model is None or known is None or known[1] is not schemas.current[name]:
                continue
            self._uncompiled[fp] = (model, known[1])
        self._schemas = schemas
        return schemas

    def _compiled(self, fp: bytes) -> Reader | None:
        """The fast reader of ``fp``, compiled now if it is its first record (None: none)."""
        if self._schemas is None:
            self._use(default_schema_set())
        wanted = self._uncompiled.pop(fp, None)
        if wanted is None:
            return None
        reader = _reader(wanted[0], fp, wanted[1], self._use_compiled)
        if reader is not None:
            self._fast[fp] = reader
        return reader

    @property
    def schemas(self) -> SchemaSet:
        """The schema set this codec reads and writes with (the default one read now if no
        record was encoded or decoded yet)."""
        found = self._schemas
        return found if found is not None else self._use(default_schema_set())

    def encode(self, event: Event) -> bytes:
        """Serialize ``event`` with its current schema (the fast writer's bytes are fastavro's:
        see :mod:`agentledger.events.avro_writers`)."""
        kind = type(event)
        known = self._writers.get(kind)
        if known is None:
            known = self._writers[kind] = self._writer_of(kind)
        header, writer = known
        if writer is not None:
            try:
                return header + writer(event)
            except (NotFast, KeyError, UnicodeEncodeError):
                pass  # not a value the fast writer vouches for: fastavro decides
        return self._slow_encode(event)

    def _writer_of(self, kind: type[Event]) -> tuple[bytes, Writer | None]:
        name = kind.__name__
        schemas = self.schemas
        header = MAGIC + schemas.current_fingerprints[name]
        fast = compile_writer(kind, schemas.current[name]) if self._fast_writes else None
        return header, fast

    def _slow_encode(self, event: Event) -> bytes:
        """``event`` written by fastavro from its ``model_dump`` (the reference encoding)."""
        name = type(event).__name__
        buf = io.BytesIO()
        buf.write(MAGIC)
        schemas = self.schemas
        buf.write(schemas.current_fingerprints[name])
        fastavro.schemaless_writer(buf, schemas.current[name], event.model_dump())
        return buf.getvalue()

    def decode(
        self,
        data: bytes | None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> Event:
        """Deserialize one record; raise DecodeError (never anything else) if it cannot be."""
        # the common case first and without the error context's dict (built only on a failure:
        # a rebuild decodes every record of the log through here)
        if type(data) is bytes and data[:2] == MAGIC:
            fp = data[2:HEADER_LEN]
            fast = self._fast.get(fp)
            if fast is None and (self._uncompiled or self._schemas is None):
                fast = self._compiled(fp)
            if fast is not None:
                try:
                    found = fast(data)
                except DOUBTS:
                    pass  # not a record the fast reader vouches for: the full path decides
                else:
                    if isinstance(found, Event):
                        return found
                    where = {"topic": topic, "partition": partition, "offset": offset}
                    model = EVENT_BY_NAME[self.schemas.writers[fp][0]]
                    return self._validated(model, found, where)
        return self._decode_full(data, {"topic": topic, "partition": partition, "offset": offset})

    def _decode_full(self, data: bytes | None, where: dict[str, Any]) -> Event:
        """:meth:`decode` of what the fast readers do not vouch for: checks, fastavro, pydantic."""
        if data is None:
            raise DecodeError("record has no value (tombstone)", **where)
        if len(data) < HEADER_LEN or data[:2] != MAGIC:
            raise DecodeError(
                f"not Avro single-object encoded ({len(data)} bytes, header {data[:2].hex()})",
                **where,
            )
        fp = bytes(data[2:HEADER_LEN])
        schemas = self.schemas
        known = schemas.writers.get(fp)
        if known is None:
            raise UnknownSchemaError(
                f"unknown schema fingerprint {fp.hex()} (written by a newer or foreign producer)",
                **where,
            )
        name, writer = known
        model = EVENT_BY_NAME.get(name)
        reader = schemas.current.get(name)
        if model is None or reader is None:
            raise UnknownSchemaError(f"record {name} is no longer a known event", **where)
        try:
            record = fastavro.schemaless_reader(
                io.BytesIO(data[HEADER_LEN:]), writer, None if writer is reader else reader
            )
        except (EOFError, ValueError, IndexError, UnicodeDecodeError, TypeError) as e:
            raise DecodeError(f"corrupt {name} body: {type(e).__name__}: {e}", **where) from e
        if not isinstance(record, dict):
            raise DecodeError(f"{name} body is not a record", **where)
        return self._validated(model, record, where)

    @staticmethod
    def _validated(model: type[Event], record: dict[str, Any], where: dict[str, Any]) -> Event:
        try:
            return model.model_validate(record)
        except pydantic.ValidationError as e:
            msg = f"{model.__name__} failed validation: {e.errors()[0]['msg']}"
            raise DecodeError(msg, **where) from e

"""The codec's generated writers put on the wire exactly the bytes fastavro writes from
``model_dump`` (the encoding every stored record has), for every event kind and any values."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.events import EVENT_TYPES, Event, EventCodec
from agentledger.events.avro_writers import compile_writer
from agentledger.events.codec import MAGIC
from agentledger.events.schemas import default_schema_set

from .event_samples import samples

FAST = EventCodec()
SCHEMAS = default_schema_set()


def _fastavro(event: Event) -> bytes:
    """The reference: the single-object header plus fastavro's body of ``model_dump``."""
    name = type(event).__name__
    buf = io.BytesIO()
    buf.write(MAGIC + SCHEMAS.current_fingerprints[name])
    fastavro.schemaless_writer(buf, SCHEMAS.current[name], event.model_dump())
    return buf.getvalue()


def _values(avro: Any) -> st.SearchStrategy[Any]:
    """Any value fastavro writes for ``avro``, with the edges (64-bit bounds, empty, unicode)."""
    if isinstance(avro, list):
        return st.none() | _values(avro[1])
    if isinstance(avro, dict):
        return st.lists(_values(avro["items"]), max_size=5)
    return {
        "long": st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-300, 300),
        "string": st.text(max_size=300),
        "bytes": st.binary(max_size=300),
        "double": st.floats(allow_nan=False),
        "boolean": st.booleans(),
    }[avro]


def _events() -> st.SearchStrategy[Event]:
    """Events of every kind with arbitrary field values (built unchecked: the writer must
    match fastavro on values pydantic would refuse too)."""

    def kind(model: type[Event]) -> st.SearchStrategy[Event]:
        fields = SCHEMAS.current[model.__name__]["fields"]
        values = st.fixed_dictionaries({f["name"]: _values(f["type"]) for f in fields})
        return values.map(lambda v: model.model_construct(**v))

    return st.one_of([kind(m) for m in EVENT_TYPES])


@pytest.mark.parametrize("model", EVENT_TYPES, ids=lambda m: m.__name__)
def test_every_current_schema_has_a_fast_writer(model: type[Event]) -> None:
    """Each event's current schema compiles to a writer, so no event kind is left slow."""
    assert compile_writer(model, SCHEMAS.current[model.__name__]) is not None


@pytest.mark.parametrize("event", samples(), ids=lambda e: type(e).__name__)
def test_every_sample_encodes_to_fastavros_bytes(event: Event) -> None:
    """Every sample event is written byte for byte as fastavro writes it, and reads back."""
    data = FAST.encode(event)
    assert data == _fastavro(event)
    assert FAST.decode(data) == event


@settings(max_examples=400, deadline=None)
@given(_events())
def test_any_values_encode_to_fastavros_bytes(event: Event) -> None:
    """Whatever the field values (64-bit bounds, long and non-ASCII text, empty and full
    arrays, nulls), the fast writer's bytes are fastavro's."""
    assert FAST.encode(event) == _fastavro(event)


# model_dump warns about the tuple (a value pydantic would have made a list): expected here
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_values_the_writer_cannot_vouch_for_take_fastavros_path() -> None:
    """An int past 64 bits, an int where a double goes, a tuple for an array and a lone
    surrogate are written (or refused) by fastavro, as before the fast writers."""
    base = samples()[0]
    kind = type(base)
    fields = dict(base.__dict__)
    long_field = next(n for n, v in fields.items() if type(v) is int)
    too_big = kind.model_construct(**{**fields, long_field: 1 << 64})
    with pytest.raises((OverflowError, ValueError)):
        _fastavro(too_big)
    with pytest.raises((OverflowError, ValueError)):
        FAST.encode(too_big)
    text_field = next(n for n, v in fields.items() if type(v) is str)
    surrogate = kind.model_construct(**{**fields, text_field: "a\ud800b"})
    with pytest.raises(UnicodeEncodeError):
        FAST.encode(surrogate)
    for model in EVENT_TYPES:
        schema = SCHEMAS.current[model.__name__]
        for f in schema["fields"]:
            if f["type"] == "double" or (isinstance(f["type"], list) and "double" in f["type"]):
                event = next(e for e in samples() if type(e) is model)
                odd = model.model_construct(**{**event.__dict__, f["name"]: 3})
                assert FAST.encode(odd) == _fastavro(odd)
            if isinstance(f["type"], dict) and f["type"]["type"] == "array":
                event = next(e for e in samples() if type(e) is model)
                as_tuple = tuple(event.__dict__[f["name"]])
                odd = model.model_construct(**{**event.__dict__, f["name"]: as_tuple})
                assert FAST.encode(odd) == _fastavro(odd)

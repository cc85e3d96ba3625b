"""The codec reads the default schema set when its first record is encoded or decoded, not
when it is made, and each of its paths then works as a codec made with the set."""

from __future__ import annotations

import pytest

from agentledger.events import EventCodec
from agentledger.events import codec as codec_module
from agentledger.events.schemas import SchemaSet, default_schema_set

from .event_samples import samples


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each read of the default schema set by the codec module, counted."""
    counted: list[int] = []

    def counting() -> SchemaSet:
        counted.append(1)
        return default_schema_set()

    monkeypatch.setattr(codec_module, "default_schema_set", counting)
    return counted


def test_making_a_codec_reads_no_schema(reads: list[int]) -> None:
    """EventCodec() reads nothing; its first encode reads the set once."""
    codec = EventCodec()
    assert reads == []
    for event in samples():
        codec.encode(event)
    assert reads == [1]


@pytest.mark.parametrize("fast", [True, False])
def test_a_first_decode_reads_the_set_and_decodes_as_an_eager_codec(
    reads: list[int], fast: bool
) -> None:
    """A codec whose first call is a decode gives what a codec made with the set gives."""
    eager = EventCodec(default_schema_set(), fast=fast)
    for event in samples():
        record = eager.encode(event)
        lazy = EventCodec(fast=fast)
        assert lazy.decode(record) == eager.decode(record) == event
    assert len(reads) == len(samples())


def test_the_schemas_property_reads_the_default_set(reads: list[int]) -> None:
    """``codec.schemas`` is the default set, read on first use."""
    codec = EventCodec()
    assert codec.schemas is default_schema_set()
    assert codec.schemas is default_schema_set()
    assert reads == [1]

"""Our partitioner matches Kafka's default partitioner for keyed records."""

from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given
from hypothesis import strategies as st

from agentledger.bus.partitioning import (
    key_for,
    murmur2,
    partition_for,
    producer_partition,
    run_key,
)
from tests.unit.event_samples import samples

# From the Java client's UtilsTest.testMurmur2: the reference values of Kafka itself.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "signed"), JAVA_MURMUR2.items())
def test_murmur2_matches_the_java_client(key: bytes, signed: int) -> None:
    """murmur2 gives the Java client's reference hashes (as unsigned 32-bit values)."""
    assert murmur2(key) == signed & 0xFFFFFFFF


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1024))
def test_partition_matches_aiokafka_default_partitioner(key: bytes, partitions: int) -> None:
    """For any key and partition count we pick the partition aiokafka's producer picks."""
    everything = list(range(partitions))
    assert partition_for(key, partitions) == DefaultPartitioner()(key, everything, everything)
    assert murmur2(key) == aiokafka_murmur2(key)


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1024))
def test_the_producer_partitions_keyed_records_as_aiokafka_would(key: bytes, n: int) -> None:
    """The partitioner our producer is built with picks aiokafka's default's partition for a
    keyed record, asked once or again (remembered), whatever the partition ids are."""
    ids = [p * 3 + 1 for p in range(n)]  # not 0..n-1: the result is an element of the list
    default = DefaultPartitioner()(key, ids, ids[:1])
    assert producer_partition(key, ids, ids[:1]) == default
    assert producer_partition(key, ids, ids[:1]) == default


def test_the_producer_spreads_unkeyed_records_over_available_partitions() -> None:
    """An unkeyed record goes to an available partition (any, if none is available)."""
    assert {producer_partition(None, [0, 1, 2], [2]) for _ in range(50)} == {2}
    assert {producer_partition(None, [0, 1, 2], []) for _ in range(200)} == {0, 1, 2}


def test_run_ids_spread_over_partitions() -> None:
    """Many run ids use every one of a few partitions (the key is not constant)."""
    rng = random.Random(7)
    used = {partition_for(run_key(f"run-{rng.random()}"), 8) for _ in range(500)}
    assert used == set(range(8))


def test_zero_partitions_is_refused() -> None:
    """A partition count below one is a caller bug, not a modulo by zero."""
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for(b"k", 0)


def test_run_events_and_requests_are_keyed_by_run_id() -> None:
    """Every run event and run request is keyed by its run id; dead letters have no key."""
    for event in samples():
        kind = type(event).__name__
        run_id = getattr(event, "run_id", None)
        key = key_for(event)
        if kind == "Alert":
            assert key == event.alert_id.encode()  # type: ignore[attr-defined]
        elif kind == "DeadLettered":
            assert key is None
        else:
            assert key == run_key(str(run_id)), kind

"""A transaction's records are grouped by the partition the producer's partitioner gives them,
each partition's in the order they came; unkeyed records are left to the producer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.bus.batching import Record, by_partition
from agentledger.bus.partitioning import producer_partition

TOPICS = {"t.steps": [0, 1, 2, 3, 4, 5], "t.effects": [0, 1, 2, 3, 4, 5], "t.alerts": [0, 1, 2]}

records = st.lists(
    st.tuples(
        st.sampled_from(sorted(TOPICS)),
        st.none() | st.binary(min_size=1, max_size=12),
        st.binary(max_size=8),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(records)
def test_records_are_grouped_where_the_producer_puts_them_in_order(batch: list[Record]) -> None:
    """Every keyed record is in the group of the partition producer_partition picks for it,
    each group in the records' order; the unkeyed ones come back in order; none is lost."""
    groups, unkeyed = by_partition(batch, TOPICS)
    expected: dict[tuple[str, int], list[tuple[bytes, bytes]]] = {}
    for topic, key, value in batch:
        if key is not None:
            every = TOPICS[topic]
            tp = (topic, producer_partition(key, every, every))
            expected.setdefault(tp, []).append((key, value))
    assert groups == expected
    assert unkeyed == [r for r in batch if r[1] is None]

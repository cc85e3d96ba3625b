"""The fleet's offset book: a partition is committed only up to its lowest unsettled request."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentledger.fleet.offsets import OffsetBook

TP = ("requests", 0)


def test_position_waits_for_the_lowest_unsettled_request() -> None:
    """Settling later requests does not move the position past an earlier unsettled one."""
    book = OffsetBook()
    book.assign(TP)
    for offset in (10, 11, 12):
        book.take(TP, offset)
    book.settle(TP, 11)
    book.settle(TP, 12)
    assert book.due() == {TP: 10}
    book.settle(TP, 10)
    assert book.due() == {TP: 13}


def test_due_reports_only_positions_that_moved() -> None:
    """A committed position is not reported again until it advances."""
    book = OffsetBook()
    book.take(TP, 0)
    book.settle(TP, 0)
    book.committed(book.due())
    assert book.due() == {}
    book.take(TP, 1)
    assert book.due() == {}
    book.settle(TP, 1)
    assert book.due() == {TP: 2}


def test_a_revoked_partition_commits_nothing_more() -> None:
    """After a rebalance took the partition away, settling its requests changes nothing."""
    book = OffsetBook()
    book.take(TP, 5)
    book.revoke(TP)
    assert book.settle(TP, 5) is False
    assert book.due() == {}
    assert TP not in book.assigned()


def test_due_can_be_limited_to_some_partitions() -> None:
    """A revocation commits the partitions it loses, not the others."""
    book = OffsetBook()
    other = ("requests", 1)
    for tp in (TP, other):
        book.take(tp, 0)
        book.settle(tp, 0)
    assert book.due(only={other}) == {other: 1}


@given(st.lists(st.integers(min_value=0, max_value=200), min_size=1, unique=True), st.data())
def test_the_position_never_skips_an_unsettled_request(
    offsets: list[int], data: st.DataObject
) -> None:
    """Whatever subset is settled, every offset below the committable position is settled."""
    book = OffsetBook()
    for offset in sorted(offsets):
        book.take(TP, offset)
    settled = data.draw(st.sets(st.sampled_from(offsets)))
    for offset in settled:
        book.settle(TP, offset)
    position = book.position(TP)
    assert position is not None
    assert all(o in settled for o in offsets if o < position)
    assert position == max(offsets) + 1 or position in set(offsets) - settled

"""Port choice: keep the previous ports when free, otherwise fresh distinct ones."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from agentledger.stack.ports import choose_ports, ephemeral_port, port_is_free


def _fresh(ports: list[int]) -> Iterator[int]:
    yield from ports


def test_free_preferred_ports_are_kept() -> None:
    """Preferred ports that are free are chosen as they are."""
    fresh = _fresh([50000, 50001])
    assert choose_ports([40000, 40001], lambda _p: True, lambda: next(fresh)) == [40000, 40001]


def test_a_taken_preferred_port_is_replaced_by_a_fresh_one() -> None:
    """A preferred port that is taken is swapped for a fresh port; the free one is kept."""
    fresh = _fresh([50000])
    chosen = choose_ports([40000, 40001], lambda p: p != 40000, lambda: next(fresh))
    assert chosen == [50000, 40001]


def test_chosen_ports_are_distinct() -> None:
    """A fresh port equal to one already chosen (or preferred) is skipped."""
    fresh = _fresh([40001, 50000, 50001])
    chosen = choose_ports([None, 40001], lambda _p: True, lambda: next(fresh))
    assert chosen == [50000, 40001]
    fresh = _fresh([50000, 50000, 50001])
    assert choose_ports([None, None], lambda _p: True, lambda: next(fresh)) == [50000, 50001]


def test_port_is_free_sees_a_listener() -> None:
    """A port with a listening socket is not free; once closed it is free again."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not port_is_free(port)
    assert port_is_free(port)


@pytest.mark.parametrize("_round", range(3))
def test_ephemeral_port_can_be_bound(_round: int) -> None:
    """The kernel-chosen port can be bound right after it was chosen."""
    port = ephemeral_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))

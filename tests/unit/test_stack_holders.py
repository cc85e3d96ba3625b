"""Holders of a shared local stack: live ones are counted, dead ones pruned."""

from __future__ import annotations

import os
from pathlib import Path

from agentledger.stack.holders import holder_name, live_holders, parse_holder, register


def test_holder_names_round_trip_and_are_unique() -> None:
    """A holder file name gives back pid and start ticks; two holders never share a name."""
    name = holder_name(123, 456)
    assert parse_holder(name) == (123, 456)
    assert holder_name(123, 456) != name
    assert parse_holder("README") is None
    assert parse_holder("1-x-y") is None


def test_live_holders_keep_ours_and_prune_the_dead(tmp_path: Path) -> None:
    """Our own holder counts; a holder whose process is gone is removed."""
    mine = register(tmp_path)
    again = register(tmp_path)  # the same process holding twice
    dead = tmp_path / holder_name(os.getpid(), 1)  # our pid, but another start time
    dead.touch()
    (tmp_path / "notes.txt").touch()
    assert sorted(live_holders(tmp_path)) == sorted([mine, again])
    assert not dead.exists()
    mine.unlink()
    assert live_holders(tmp_path) == [again]

"""The ``agentledger worker`` process tunes its garbage collector once the worker is set up."""

from __future__ import annotations

import argparse
import asyncio
import gc
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest

from agentledger._core.gc_tuning import GC_THRESHOLDS
from agentledger.fleet import commands
from agentledger.fleet.settings import FleetSettings


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's thresholds and frozen objects restored after the test."""
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


class _Worker:
    """A FleetWorker that is set up at once and records the collector around ``started``."""

    seen: ClassVar[list[tuple[tuple[int, int, int], tuple[int, int, int]]]] = []

    def __init__(self, settings: FleetSettings, agent: Any) -> None:
        del settings, agent

    async def serve(
        self, stop: asyncio.Event, *, started: Callable[[], None] | None = None
    ) -> None:
        del stop
        before = gc.get_threshold()
        if started is not None:
            started()
        self.seen.append((before, gc.get_threshold()))


@pytest.mark.usefixtures("collector")
def test_the_worker_command_tunes_the_collector_once_the_worker_is_set_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``agentledger worker`` hands the worker tune_collector as its ``started`` hook: after
    set-up the collector runs at the services' thresholds with what exists frozen."""

    async def settings(**overrides: Any) -> FleetSettings:
        return FleetSettings().model_copy(update=overrides)

    _Worker.seen = []
    monkeypatch.setattr(commands, "FleetWorker", _Worker)
    monkeypatch.setattr(commands, "_settings", settings)
    monkeypatch.setattr(commands, "load_agent", lambda target, s: object())
    gc.set_threshold(700, 10, 10)
    args = argparse.Namespace(agent="m:f", concurrency=None)
    assert asyncio.run(commands._worker(args)) == 0
    assert _Worker.seen == [((700, 10, 10), GC_THRESHOLDS)]
    assert gc.get_freeze_count() > 0

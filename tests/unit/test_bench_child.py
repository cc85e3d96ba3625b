"""The bench's concurrency figure drops a repeat whose runs hang, and says so."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from bench import child
from bench.peers.base import Env, Peer, Probe
from bench.workload import Params


class _Peer(Peer):
    """A peer whose runs return at once, except the ones named in ``hang``."""

    name: ClassVar[str] = "fake"

    def __init__(self, hang: set[str]) -> None:
        super().__init__(Env(work_dir="."), "t")
        self.hang = hang

    async def start(self) -> None:
        """Nothing to connect."""

    async def stop(self) -> None:
        """Nothing to close."""

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """Return at once, or never for a hanging run."""
        if run_id in self.hang:
            await asyncio.Event().wait()
        return [0.001] * steps

    async def stored_bytes(self) -> int:
        """Nothing stored."""
        return 0


PARAMS = Params(
    latency_steps=1,
    latency_repeats=1,
    concurrent_runs=3,
    concurrent_steps=2,
    concurrent_repeats=2,
    bytes_marks=(1,),
    resume_steps=1,
    resume_repeats=1,
)


async def test_a_hanging_repeat_is_reported_and_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat with a run that never returns is not a figure; the other repeat still is."""
    monkeypatch.setattr(child, "CONCURRENT_TIMEOUT_S", 0.2)
    result: dict[str, Any] = {"errors": {}}
    await child._concurrency(_Peer(hang={"conc-0-1"}), PARAMS, result)
    assert [r["runs"] for r in result["concurrent_runs"]] == [3]
    assert "repeat 0: 1 of 3 runs had not returned" in result["errors"]["concurrency_hangs"]

"""Asking a FenceGuard once per commit which of the batched publishes come from stale writers.

A claim is (run_id, fence, owner). The owner is the events' ``worker_id``: every writer writes
its run events as the owner it took the lease as (the SDK, fork, the LangGraph saver and the
reconciler's claims, including an operator's verdict). Comparing the owner as well as the fence
refuses a writer whose acquisition a Redis failover lost and whose fence was granted again to
another owner (DESIGN.md §15).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentledger.bus.port import FenceGuard, Holder
from agentledger.errors import StaleFenceError
from agentledger.events.models import Event, RunEvent

Claim = tuple[str, int, str]


def claims_of(events: Iterable[Event]) -> set[Claim]:
    """The (run_id, fence, owner) claims of the run events among ``events``."""
    return {(e.run_id, e.fence, e.worker_id) for e in events if isinstance(e, RunEvent)}


def claim_rounds(claims: Iterable[Claim]) -> list[dict[str, Holder]]:
    """Split claims into dicts with one holder per run (usually one dict: one writer per run)."""
    rounds: list[dict[str, Holder]] = []
    for run_id, fence, owner in sorted(claims):
        for round_ in rounds:
            if run_id not in round_:
                round_[run_id] = Holder(fence, owner)
                break
        else:
            rounds.append({run_id: Holder(fence, owner)})
    return rounds


async def stale_claims(guard: FenceGuard, batches: Sequence[Sequence[Event]]) -> set[Claim]:
    """The claims of all ``batches`` that ``guard`` says are stale (one call per round)."""
    claims: set[Claim] = set()
    for batch in batches:
        claims |= claims_of(batch)
    stale: set[Claim] = set()
    for round_ in claim_rounds(claims):
        stale |= {(run_id, *round_[run_id]) for run_id in await guard.stale(round_)}
    return stale


def stale_error(events: Sequence[Event], stale: set[Claim]) -> StaleFenceError | None:
    """The error for a publish that carries a stale claim, or None if all its claims are live."""
    for run_id, fence, owner in sorted(claims_of(events) & stale):
        return StaleFenceError(
            f"fence {fence} of {owner!r} is no longer the run's lease; its events were not written",
            run_id=run_id,
        )
    return None

"""Riding out a Kafka or Redis outage: one waiter per dependency, with backoff and a budget.

A call that fails because its dependency is unreachable is tried again with backoff until the
dependency answers or the process has waited ``budget_s`` (``AGENTLEDGER_OUTAGE_BUDGET_S``)
since the outage began; it then raises :class:`UnreachableError` naming the dependency and the
wait. Only calls that are safe to repeat go through :func:`ride_out` (reads, idempotent scripts,
a client start); the commit loop of the event log resolves a commit of unknown outcome from the
log itself before writing again.

The table of outages is per process, on purpose: an outage is a fact about an endpoint, shared
by every caller of the process, so it is logged once (not once per call), and the gauge and the
health pages of a service read it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import structlog
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agentledger.errors import UnreachableError

_log = structlog.get_logger(__name__)
T = TypeVar("T")

#: Default of ``AGENTLEDGER_OUTAGE_BUDGET_S``: a broker or Redis restart takes seconds.
DEFAULT_BUDGET_S = 120.0
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 2.0
BUDGET_VARIABLE = "AGENTLEDGER_OUTAGE_BUDGET_S"


@dataclass(eq=False)
class Outage:
    """One dependency at one endpoint, as this process sees it: up, or down since a moment."""

    dependency: str
    endpoint: str
    down_since: float | None = None
    last_error: str = ""

    def waiting_s(self, now: float | None = None) -> float:
        """Seconds since the outage began (0 while the dependency answers)."""
        if self.down_since is None:
            return 0.0
        return max((time.monotonic() if now is None else now) - self.down_since, 0.0)

    def failed(self, error: BaseException, budget_s: float, *, since: float | None = None) -> float:
        """Note a failed call; the first failure of an outage logs one line. Returns the wait.

        ``since`` is when the failed call began (monotonic): a call that timed out waiting for
        the dependency dates the outage from its start, not from its timeout.
        """
        self.last_error = str(error)
        if self.down_since is None:
            self.down_since = time.monotonic() if since is None else since
            _log.warning(
                "dependency_unreachable_waiting",
                dependency=self.dependency,
                endpoint=self.endpoint,
                budget_s=budget_s,
                error=self.last_error[:300],
            )
        return self.waiting_s()

    def recovered(self) -> None:
        """Note a call that went through; ends the outage (one line saying how long it was)."""
        if self.down_since is not None:
            _log.warning(
                "dependency_back",
                dependency=self.dependency,
                endpoint=self.endpoint,
                waited_s=round(self.waiting_s(), 2),
            )
            self.down_since = None

    def past_budget(self, budget_s: float, error: BaseException) -> UnreachableError:
        """The error of a caller that waited the whole budget."""
        waited = self.waiting_s()
        hint = (
            f"gave up after waiting {waited:.1f} s ({BUDGET_VARIABLE}={budget_s:g}); "
            f"last error: {error}"
        )
        return UnreachableError(self.dependency, self.endpoint, hint, waited_s=waited)


_TABLE: dict[tuple[str, str], Outage] = {}


def outage_of(dependency: str, endpoint: str) -> Outage:
    """The process's outage record of ``dependency`` at ``endpoint`` (created on first use)."""
    key = (dependency, endpoint)
    found = _TABLE.get(key)
    if found is None:
        found = _TABLE[key] = Outage(dependency, endpoint)
    return found


def waiting() -> dict[str, float]:
    """Seconds this process has been waiting, per dependency (the longest of its endpoints)."""
    now = time.monotonic()
    found: dict[str, float] = {}
    for outage in _TABLE.values():
        found[outage.dependency] = max(found.get(outage.dependency, 0.0), outage.waiting_s(now))
    return found


def problems() -> list[str]:
    """One line per dependency this process is waiting for (for ``/health``)."""
    now = time.monotonic()
    return [
        f"{o.dependency} at {o.endpoint} unreachable for {o.waiting_s(now):.1f} s "
        f"({o.last_error[:200]})"
        for o in _TABLE.values()
        if o.down_since is not None
    ]


def unreachable_in(error: BaseException) -> UnreachableError | None:
    """The UnreachableError that ``error`` is or was raised from (its cause or context), if any."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        if isinstance(found, UnreachableError):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


def spent(error: BaseException, budget_s: float) -> tuple[Outage, UnreachableError | None] | None:
    """Count a failure caused by an unreachable dependency towards that dependency's outage.

    For a service's outermost loop, which retries failed work: None if ``error`` was not caused
    by an unreachable dependency; else the outage it counts towards, and the error to give up
    with once the outage has lasted ``budget_s`` (None while it has not). The caller ends the
    outage with :meth:`Outage.recovered` once work goes through again.
    """
    unreachable = unreachable_in(error)
    if unreachable is None:
        return None
    down = outage_of(unreachable.what, unreachable.endpoint)
    if down.failed(unreachable, budget_s) < budget_s:
        return down, None
    if unreachable.waited_s is not None and unreachable.waited_s >= budget_s:
        return down, unreachable  # the waiter already gave up, naming its wait
    return down, down.past_budget(budget_s, unreachable)


def backoff(attempt: int) -> float:
    """The pause before retry ``attempt`` (1, 2 …): doubling from 50 ms, at most 2 s."""
    return float(min(FIRST_BACKOFF_S * 2 ** (attempt - 1), MAX_BACKOFF_S))


async def ride_out(
    call: Callable[[], Awaitable[T]],
    *,
    dependency: str,
    endpoint: str,
    budget_s: float,
    retry_on: tuple[type[BaseException], ...] = (UnreachableError,),
) -> T:
    """``await call()``, tried again with backoff while it raises ``retry_on``, until the
    dependency's outage has lasted ``budget_s`` (then UnreachableError naming the wait).

    ``call`` must be safe to repeat. A budget of 0 raises the first failure as it is.
    """
    outage = outage_of(dependency, endpoint)
    attempt = 0
    while True:
        try:
            result = await call()
        except retry_on as e:
            if budget_s <= 0:
                raise
            waited = outage.failed(e, budget_s)
            if waited >= budget_s:
                raise outage.past_budget(budget_s, e) from e
            attempt += 1
            await asyncio.sleep(min(backoff(attempt), budget_s - waited))
        else:
            outage.recovered()
            return result


#: What aiokafka logs at every reconnection attempt while a broker is down: many lines per
#: second, each saying what the waiter's one line says.
_CONNECTION_NOISE = (
    "Unable connect to",
    "Unable to update metadata",
    "Unable to request metadata",
    "Unable to bootstrap",
)
#: Errors of a produce response that only say the broker is not there (the sender retries).
_UNREACHABLE_BROKER = ("NodeNotReadyError", "KafkaConnectionError")


class ConnectionNoiseFilter(logging.Filter):
    """Drops aiokafka's per-attempt connection failures (the outage waiter logs one line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for an aiokafka record about a failed connection attempt."""
        if not record.name.startswith("aiokafka"):
            return True
        message = str(record.msg)
        if message.startswith(_CONNECTION_NOISE):
            return False
        if message.startswith("Got error produce response"):
            return not any(name in record.getMessage() for name in _UNREACHABLE_BROKER)
        return True


class OutageCollector(Collector):
    """``agentledger_dependency_waiting_seconds{dependency}`` for a service's registry."""

    def __init__(self, service: str, dependencies: tuple[str, ...] = ("Kafka", "Redis")) -> None:
        self._service = service
        self._dependencies = dependencies

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The seconds waited so far in the current outage of each dependency (0 when up)."""
        gauge = GaugeMetricFamily(
            "agentledger_dependency_waiting_seconds",
            "seconds this process has been waiting for an unreachable dependency (0 when up)",
            labels=["service", "dependency"],
        )
        now = waiting()
        for dependency in sorted({*self._dependencies, *now}):
            gauge.add_metric([self._service, dependency.lower()], now.get(dependency, 0.0))
        yield gauge

"""What every Kafka client here shares: the bootstrap check, a bounded start, a safe stop."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol, TypeVar

import structlog
from aiokafka.errors import ConcurrentTransactions, KafkaError, for_code

from agentledger.bus.diagnosis import raise_if_security
from agentledger.errors import ConfigurationError, UnreachableError
from agentledger.outage import ride_out
from agentledger.settings import CommonSettings
from agentledger.tasks import run_bounded

_log = structlog.get_logger(__name__)
STOP_TIMEOUT_S = 10.0


class _Client(Protocol):
    async def start(self) -> Any: ...

    async def stop(self) -> Any: ...


C = TypeVar("C", bound=_Client)
T = TypeVar("T")


class _ConnectFailures(logging.Filter):
    """Drops aiokafka's per-attempt "Unable connect to" errors while a start is in progress:
    the start's own error says once what failed and which setting to fix."""

    def __init__(self) -> None:
        super().__init__("aiokafka")
        self.starts = 0

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unable connect to")


_QUIET = _ConnectFailures()


@contextlib.contextmanager
def starting_quietly() -> Iterator[None]:
    """Hold aiokafka's connection-attempt errors back for the duration of a client's start."""
    logger = logging.getLogger("aiokafka")
    if _QUIET.starts == 0:
        logger.addFilter(_QUIET)
    _QUIET.starts += 1
    try:
        yield
    finally:
        _QUIET.starts -= 1
        if _QUIET.starts == 0:
            logger.removeFilter(_QUIET)


async def _awaited(awaitable: Awaitable[T]) -> T:
    """``awaitable`` as a coroutine, so it can run as a task of its own."""
    return await awaitable


def bootstrap_of(settings: CommonSettings) -> str:
    """The bootstrap servers, which the CLI resolves before any client is built."""
    if not settings.kafka_bootstrap:
        msg = (
            "kafka_bootstrap is not set: resolve the endpoints first "
            "(agentledger.stack.resolve.resolve_settings) or set AGENTLEDGER_KAFKA_BOOTSTRAP"
        )
        raise ConfigurationError(msg)
    return settings.kafka_bootstrap


async def start_client(
    client: _Client,
    *,
    bootstrap: str,
    timeout_ms: int,
    role: str,
    settings: CommonSettings | None = None,
    start: Callable[[Any], Awaitable[object]] | None = None,
) -> None:
    """Start an aiokafka client within ``timeout_ms`` or raise UnreachableError naming the servers.

    ``start(client)``, when given, starts it instead of ``client.start()`` (the transactional
    producer's start in fewer round trips: :mod:`agentledger.bus.producer_start`).

    aiokafka retries some steps forever (finding the transaction coordinator, the producer id),
    so an unreachable broker would otherwise hang the caller. The start runs in a task of its
    own waited on with a deadline (:func:`agentledger.tasks.run_bounded`), not ``wait_for``: on
    Python 3.11 ``wait_for`` drops a cancellation that arrives as the start completes, and the
    cancelled service then runs on forever; nor a bare ``asyncio.timeout``, whose one
    cancellation aiokafka may swallow. A start that fails or is
    cancelled half-way stops the client, so none of its sockets is left open. When a security
    setting is why (``settings``: a refused login, an untrusted certificate, a protocol
    mismatch), ConfigurationError names it instead (:mod:`agentledger.bus.diagnosis`).
    """
    starting = client.start() if start is None else start(client)
    try:
        with starting_quietly():
            await run_bounded(_awaited(starting), timeout_ms / 1000, name=f"starting the {role}")
    except (TimeoutError, KafkaError, OSError) as e:
        await stop_client(client)
        try:
            await raise_if_security(settings, bootstrap)
        except ConfigurationError as problem:
            raise problem from None
        hint = (
            f"the {role} did not start within {timeout_ms} ms ({type(e).__name__}: {e}); "
            "is the broker up (agentledger stack status) and AGENTLEDGER_KAFKA_BOOTSTRAP right?"
        )
        raise UnreachableError("Kafka", bootstrap, hint) from e
    except BaseException:
        await stop_client(client)
        raise


async def started(
    make: Callable[[], C],
    *,
    bootstrap: str,
    timeout_ms: int,
    role: str,
    budget_s: float,
    settings: CommonSettings | None = None,
    start: Callable[[C], Awaitable[object]] | None = None,
) -> C:
    """A client made by ``make`` and started (see :func:`start_client`); while the broker is
    unreachable, a fresh client is made and started again until the outage budget is spent.

    A fresh one each time: an aiokafka client that failed to start was stopped, and a stopped
    client cannot start again. A security mistake (ConfigurationError) is not waited out.
    """

    async def attempt() -> C:
        client = make()
        await start_client(
            client,
            bootstrap=bootstrap,
            timeout_ms=timeout_ms,
            role=role,
            settings=settings,
            start=start,
        )
        return client

    return await ride_out(attempt, dependency="Kafka", endpoint=bootstrap, budget_s=budget_s)


async def stop_client(client: _Client) -> None:
    """Stop a client, bounded in time; a failure to stop is logged, never raised.

    A cancellation during the stop is kept, and a stop that swallows the cancellation sent at
    the deadline (aiokafka's consumer close does) is abandoned, not awaited forever
    (:func:`agentledger.tasks.run_bounded`).
    """
    try:
        await run_bounded(_awaited(client.stop()), STOP_TIMEOUT_S, name="stopping a Kafka client")
    except (TimeoutError, KafkaError, OSError) as e:
        _log.warning("kafka_client_stop_failed", error=f"{type(e).__name__}: {e}")


def tune_concurrent_transactions_backoff(backoff_ms: float) -> None:
    """Set how long aiokafka waits after CONCURRENT_TRANSACTIONS on the first AddPartitionsToTxn.

    Right after a commit the coordinator still writes the markers (KAFKA-5477) and answers the
    next transaction's AddPartitionsToTxn with CONCURRENT_TRANSACTIONS; aiokafka then sleeps a
    module-level 20 ms (``BACKOFF_OVERRIDE``), not ``retry_backoff_ms``. Measured here, the
    markers take a few ms, so 20 ms tripled a single run's commit latency. The value is
    process-wide (aiokafka reads the module global at each retry).

    The same wait applies to InitProducerId answered CONCURRENT_TRANSACTIONS: a producer that
    starts with the id of one that died with a transaction open (a worker restarted under its
    transactional id after a SIGKILL mid-commit) waits while the coordinator aborts it, and
    aiokafka would retry after ``retry_backoff_ms`` (100 ms) where the abort takes a few ms.
    """
    with contextlib.suppress(ImportError):
        from aiokafka.producer import sender  # noqa: PLC0415 - aiokafka internals, guarded

        if hasattr(sender, "BACKOFF_OVERRIDE"):
            sender.BACKOFF_OVERRIDE = backoff_ms / 1000
            _retry_init_pid_soon(sender)
            return
    _log.warning("aiokafka_backoff_not_tuned", reason="aiokafka has no BACKOFF_OVERRIDE")


def _retry_init_pid_soon(sender: Any) -> None:
    """Make aiokafka's InitProducerId handler retry CONCURRENT_TRANSACTIONS after the module's
    BACKOFF_OVERRIDE (once per process; a later tuning changes the value it reads)."""
    handler = getattr(sender, "InitPIDHandler", None)
    if handler is None or getattr(handler, "_agentledger_tuned", False):
        return
    original = handler.handle_response

    def handle_response(self: Any, response: Any) -> float | None:
        backoff: float | None = original(self, response)
        if backoff is not None and for_code(response.error_code) is ConcurrentTransactions:
            return min(backoff, float(sender.BACKOFF_OVERRIDE))
        return backoff

    handler.handle_response = handle_response
    handler._agentledger_tuned = True

"""The CONCURRENT_TRANSACTIONS backoff we tune still exists in aiokafka and takes our value."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from aiokafka.errors import ConcurrentTransactions, CoordinatorLoadInProgressError
from aiokafka.producer import sender

from agentledger.bus.clients import tune_concurrent_transactions_backoff


@pytest.fixture
def restore_backoff() -> Iterator[None]:
    """Put aiokafka's module-level backoff back after the test."""
    before = sender.BACKOFF_OVERRIDE
    yield
    sender.BACKOFF_OVERRIDE = before


@pytest.mark.usefixtures("restore_backoff")
def test_backoff_is_set_in_seconds() -> None:
    """A 1 ms setting becomes aiokafka's 0.001 s wait after CONCURRENT_TRANSACTIONS.

    If aiokafka renames or drops BACKOFF_OVERRIDE this fails, and the tuning must be redone.
    """
    tune_concurrent_transactions_backoff(1.0)
    waited_s = sender.BACKOFF_OVERRIDE
    assert waited_s == pytest.approx(0.001)


class _Sender:
    """What aiokafka's InitProducerId handler reads of its sender."""

    _retry_backoff = 0.1

    def __init__(self) -> None:
        self._txn_manager = SimpleNamespace(transactional_id="w", transaction_timeout_ms=10_000)
        self.dead: list[object] = []

    def _coordinator_dead(self, kind: object) -> None:
        self.dead.append(kind)


@pytest.mark.usefixtures("restore_backoff")
def test_init_producer_id_during_an_abort_is_retried_after_the_tuned_backoff() -> None:
    """InitProducerId answered CONCURRENT_TRANSACTIONS (the coordinator still aborting a dead
    predecessor's open transaction) is retried after the tuned 1 ms, not aiokafka's 100 ms; a
    coordinator still loading keeps aiokafka's wait."""
    tune_concurrent_transactions_backoff(1.0)
    handler = sender.InitPIDHandler(_Sender())
    busy = SimpleNamespace(error_code=ConcurrentTransactions.errno)
    loading = SimpleNamespace(error_code=CoordinatorLoadInProgressError.errno)
    assert handler.handle_response(busy) == pytest.approx(0.001)
    assert handler.handle_response(loading) == pytest.approx(0.1)

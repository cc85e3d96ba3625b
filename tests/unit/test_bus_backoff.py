"""The CONCURRENT_TRANSACTIONS backoff we tune still exists in aiokafka and takes our value."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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

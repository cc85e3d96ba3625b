"""A failed Kafka call is classified by what it says about the broker: an outage to wait out,
a refusal to report at once, or a deadline of ours that only the broker can explain."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import (
    InvalidTxnState,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    NotLeaderForPartitionError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnknownTopicOrPartitionError,
)

from agentledger.bus.diagnosis import Failure, explain_deadline, failure_of
from agentledger.errors import UnreachableError


def delivery_failed() -> KafkaError:
    """What aiokafka raises when its sender task dies on a lost connection: a bare KafkaError
    raised from the connection error."""
    try:
        try:
            raise KafkaConnectionError("Connection at 127.0.0.1:1 closed")
        except KafkaConnectionError as e:
            raise KafkaError("Unexpected error during batch delivery") from e
    except KafkaError as wrapped:
        return wrapped


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (TimeoutError(), Failure.DEADLINE),  # an OSError subclass: never an outage by type
        (KafkaTimeoutError(), Failure.DEADLINE),
        (KafkaConnectionError("gone"), Failure.OUTAGE),
        (NodeNotReadyError(), Failure.OUTAGE),
        (RequestTimedOutError(), Failure.OUTAGE),
        (UnreachableError("Kafka", "127.0.0.1:1", "down"), Failure.OUTAGE),
        (ConnectionRefusedError(), Failure.OUTAGE),
        (NotLeaderForPartitionError(), Failure.OUTAGE),
        (UnknownTopicOrPartitionError(), Failure.REFUSED),
        (TopicAuthorizationFailedError(), Failure.REFUSED),
        (TransactionalIdAuthorizationFailed(), Failure.REFUSED),
        (InvalidTxnState(), Failure.REFUSED),
        (KafkaError("no cause given"), Failure.DEADLINE),
        (delivery_failed(), Failure.OUTAGE),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v.value,
)
def test_failures_are_classified_by_type(error: BaseException, failure: Failure) -> None:
    """Each error type maps to the classification its meaning implies."""
    assert failure_of(error) is failure


class Metadata:
    """The part of aiokafka's ClusterMetadata that explain_deadline reads."""

    def __init__(self, topics: set[str], unauthorized: set[str] | None = None) -> None:
        self._topics = topics
        self.unauthorized_topics = unauthorized or set()

    def topics(self) -> set[str]:
        """The topics the broker listed."""
        return self._topics


class Client:
    """A client whose metadata request answers ``answer`` (or raises it, or never returns)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def fetch_all_metadata(self) -> Metadata:
        """The broker's answer."""
        if self.answer is None:
            await asyncio.sleep(3600)
        if isinstance(self.answer, BaseException):
            raise self.answer
        assert isinstance(self.answer, Metadata)
        return self.answer


@pytest.mark.parametrize(
    ("answer", "failure", "reason"),
    [
        (None, Failure.OUTAGE, "did not answer"),
        (KafkaConnectionError("gone"), Failure.OUTAGE, "did not answer"),
        (Metadata({"t.steps"}), Failure.REFUSED, "'t.alerts'] do not exist"),
        (Metadata({"t.steps"}, {"t.alerts"}), Failure.REFUSED, "not authorized"),
        (Metadata({"t.steps", "t.alerts"}), Failure.OUTAGE, "did not complete"),
    ],
    ids=["silent", "refusing-connections", "missing-topic", "unauthorized", "all-there"],
)
async def test_a_deadline_is_explained_by_the_brokers_metadata(
    answer: Any, failure: Failure, reason: str
) -> None:
    """A missed deadline is an outage when the broker does not answer or has every topic, and
    refused when a topic of the transaction is missing or not authorized."""
    diagnosis = await explain_deadline(Client(answer), {"t.steps", "t.alerts"}, 0.05)
    assert diagnosis.failure is failure
    assert reason in diagnosis.reason

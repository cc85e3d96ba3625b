"""The run topics checked over a client already connected (the producer's), in one request.

One metadata request naming the run topics with ``allow_auto_topic_creation`` false: a broker
that auto-creates the topics a request names creates none of them here, a missing one comes
back as UNKNOWN_TOPIC_OR_PARTITION and is named in the one-line ConfigurationError the admin
check gives. The answer is installed in the client's metadata (the leaders the end offsets are
asked of) and the run topics are tracked from then on, so they are not asked for again.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from aiokafka.errors import KafkaError, UnknownTopicOrPartitionError, for_code
from aiokafka.protocol.metadata import MetadataRequest

#: Metadata v4 brought ``allow_auto_topic_creation``.
NO_CREATE_SINCE = 4


class RunTopicsRequest(MetadataRequest):  # type: ignore[misc]  # aiokafka is untyped
    """The request that checks the run topics without creating any of them: from v4 it names
    them with ``allow_auto_topic_creation`` false; a broker older than that cannot be told not
    to create a topic, so it is asked for every topic (naming none: none is created), as the
    reader's consumer asked it before."""

    def __init__(self, run_topics: Sequence[str]) -> None:
        super().__init__(list(run_topics), allow_auto_topic_creation=False)
        self.names = list(run_topics)

    def build(self, request_struct_class: Any) -> Any:
        version = request_struct_class.API_VERSION
        if version >= NO_CREATE_SINCE:
            return request_struct_class(self.names, False)
        return request_struct_class([] if version == 0 else None)


def partition_counts(answer: Any, run_topics: Sequence[str]) -> tuple[dict[str, int], list[str]]:
    """Each run topic's partition count in a metadata answer, and the run topics it lacks (in
    their order); a topic error other than "unknown topic" is raised."""
    counts: dict[str, int] = {}
    for topic_data in answer.topics:
        if answer.API_VERSION == 0:
            error_code, topic, partitions = topic_data
        else:
            error_code, topic, _internal, partitions = topic_data
        if topic not in run_topics:
            continue
        error = for_code(error_code)
        if error is UnknownTopicOrPartitionError:
            continue
        if error.errno != 0:
            raise error(f"metadata of {topic}")
        counts[topic] = len(partitions)
    return counts, [t for t in run_topics if t not in counts]


async def check_run_topics(
    client: Any, run_topics: Sequence[str], answer: Any = None
) -> tuple[dict[str, int], list[str]]:
    """Ask the run topics' metadata over ``client`` (a started ``AIOKafkaClient``), or read
    ``answer`` (a :class:`RunTopicsRequest`'s, which the client's bootstrap asked): their
    partition counts and the missing ones; the answer is installed in the client when none is
    missing. KafkaError when no broker answers."""
    if answer is None:
        nodes = [broker.nodeId for broker in client.cluster.brokers()]
        if not nodes:
            raise KafkaError("the client knows no broker")
        node = random.choice(nodes)
        answer = await client.send(node, RunTopicsRequest(run_topics))
    counts, missing = partition_counts(answer, run_topics)
    if not missing:
        client.cluster.update_metadata(answer)
        tracked = getattr(client, "_topics", None)
        if isinstance(tracked, set):  # tracked as add_topic would, without a request of its own
            client._topics = tracked | set(run_topics)
    return counts, missing

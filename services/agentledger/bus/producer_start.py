"""A transactional producer's start in fewer round trips (DESIGN.md §13, "Resume, session 17").

aiokafka's ``AIOKafkaProducer.start`` connects to a bootstrap server (TCP, ApiVersions), asks
it for metadata naming no topic, closes that connection, opens another one to the same broker
(TCP, ApiVersions) to ask FindCoordinator, then a third to the coordinator (TCP, ApiVersions)
to ask InitProducerId; the run topics are then checked in a metadata request of their own.
:func:`start_producer` does the same steps, with three differences:

- the bootstrap metadata request is the run topics' check (:class:`RunTopicsRequest`: it names
  them and creates none); its answer is handed back for the check to read, so the check asks
  nothing of its own;
- the bootstrap connection is kept as the connection to the broker it reached, when that
  broker advertises the very host and port it was reached at (same TLS peer name, same login):
  FindCoordinator goes over it instead of over a new one;
- with one broker in the cluster (the transaction coordinator can be no other), the
  coordinator's connection is opened beside FindCoordinator instead of after it.

InitProducerId is still asked of the coordinator FindCoordinator named, over its own
connection, and it is still the last step of the start: nothing is read of the run partitions
before it returned (DESIGN.md §9). Where aiokafka lacks what this leans on, it starts as
aiokafka does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.client import ConnectionGroup
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError, KafkaError

from agentledger.bus.run_topics import RunTopicsRequest

_aiokafka_log = logging.getLogger("aiokafka")

#: what :func:`start_producer` reads of an aiokafka client (private to aiokafka)
_CLIENT_PARTS = (
    "hosts",
    "cluster",
    "_conns",
    "_client_id",
    "_request_timeout_ms",
    "_ssl_context",
    "_security_protocol",
    "_connections_max_idle_ms",
    "_sasl_mechanism",
    "_sasl_plain_username",
    "_sasl_plain_password",
    "_sasl_kerberos_service_name",
    "_sasl_kerberos_domain_name",
    "_sasl_oauth_token_provider",
    "_on_connection_closed",
    "_sync_task",
    "_md_synchronizer",
    "_get_conn_lock",
)


def _understood(producer: AIOKafkaProducer) -> bool:
    client = producer.client
    sender = getattr(producer, "_sender", None)
    return (
        sender is not None
        and callable(getattr(sender, "start", None))
        and all(hasattr(client, part) for part in _CLIENT_PARTS)
    )


async def start_producer(producer: AIOKafkaProducer, run_topics: Sequence[str]) -> Any:
    """Start ``producer`` (bootstrap, FindCoordinator, InitProducerId); the answer of the run
    topics' metadata request its bootstrap sent, or None when it started as aiokafka does."""
    if not _understood(producer):
        await producer.start()
        return None
    client = producer.client
    answer = await _bootstrap(client, RunTopicsRequest(run_topics))
    coordinator = _open_coordination_soon(client)
    try:
        await producer._sender.start()
    finally:
        if coordinator is not None:
            if not coordinator.done():
                coordinator.cancel()
            with contextlib.suppress(BaseException):
                await coordinator
    return answer


async def _bootstrap(client: Any, request: RunTopicsRequest) -> Any:
    """aiokafka's ``AIOKafkaClient.bootstrap`` with ``request`` as its metadata request, the
    connection kept for the broker it reached; the answer."""
    for host, port, _ in client.hosts:
        try:
            conn = await create_conn(
                host,
                port,
                client_id=client._client_id,
                request_timeout_ms=client._request_timeout_ms,
                ssl_context=client._ssl_context,
                security_protocol=client._security_protocol,
                max_idle_ms=client._connections_max_idle_ms,
                on_close=client._on_connection_closed,
                sasl_mechanism=client._sasl_mechanism,
                sasl_plain_username=client._sasl_plain_username,
                sasl_plain_password=client._sasl_plain_password,
                sasl_kerberos_service_name=client._sasl_kerberos_service_name,
                sasl_kerberos_domain_name=client._sasl_kerberos_domain_name,
                sasl_oauth_token_provider=client._sasl_oauth_token_provider,
            )
        except (OSError, KafkaError, TimeoutError) as err:
            # aiokafka's wording: the start's quiet filter (bus/clients.py) holds it back
            _aiokafka_log.error('Unable connect to "%s:%s": %s', host, port, err)
            continue
        try:
            answer = await conn.send(request)
        except (KafkaError, TimeoutError) as err:
            _aiokafka_log.warning('Unable to request metadata from "%s:%s": %s', host, port, err)
            conn.close()
            continue
        client.cluster.update_metadata(answer)
        _keep(client, conn, host, port)
        break
    else:
        msg = f"Unable to bootstrap from {client.hosts}"
        raise KafkaConnectionError(msg)
    if client._sync_task is None:
        client._sync_task = asyncio.ensure_future(client._md_synchronizer())
    return answer


def _keep(client: Any, conn: Any, host: str, port: int) -> None:
    """Keep the bootstrap connection as the connection to the broker that advertises the host
    and port it was opened to (else as aiokafka keeps it: as the bootstrap connection while
    the cluster names no broker, closed otherwise)."""
    brokers = list(client.cluster.brokers())
    for broker in brokers:
        if broker.host == host and broker.port == port:
            conn_id = (broker.nodeId, ConnectionGroup.DEFAULT)
            if conn_id not in client._conns:
                client._conns[conn_id] = conn
                return
    if not brokers:
        client._conns[("bootstrap", ConnectionGroup.DEFAULT)] = conn
    else:
        conn.close()


def _open_coordination_soon(client: Any) -> asyncio.Task[Any] | None:
    """With one broker, begin opening its coordination connection (where InitProducerId is
    asked) while FindCoordinator is asked; None otherwise."""
    brokers = list(client.cluster.brokers())
    if len(brokers) != 1:
        return None
    node = brokers[0].nodeId
    opening: asyncio.Task[Any] = asyncio.ensure_future(
        client.ready(node, group=ConnectionGroup.COORDINATION)
    )
    return opening

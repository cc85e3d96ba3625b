"""Issue 8's row: the LangGraph peers' loop graph (``operator.add`` lists, durability="sync"),
checkpointed by agentledger's AgentLedgerSaver on the local stack's Kafka and Redis.

Register it in ``bench.peers.PEERS`` as
``"langgraph-agentledger": "bench.peers.langgraph_agentledger:AgentLedgerSaverPeer"``.
Each checkpoint is a CheckpointSaved event (lists stored as the part appended since the
previous version), each task's writes a WritesSaved, in Kafka transactions under the thread's
lease; a projector folds them into Redis views, which a resuming process reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, ClassVar

from bench.peers.base import Env, PeerUnavailableError, safe_name
from bench.peers.kafka_size import topic_bytes
from bench.peers.langgraph_saver import LangGraphPeer
from bench.peers.ledger_sdk import fresh_namespace  # the SDK row's topics and projector

try:
    from agentledger.integrations.langgraph import AgentLedgerSaver, SaverSettings
except ImportError as e:  # pragma: no cover - depends on the langgraph extra
    msg = f"AgentLedgerSaver needs the langgraph extra ({e}); pip install -e '.[langgraph]'"
    raise PeerUnavailableError(msg) from e

from agentledger.events.topics import topic_names


def saver_settings_for(env: Env, namespace: str) -> SaverSettings:
    """The saver's settings in one namespace: its own topics and keys; a stable worker and
    producer id, so a resuming process is the crashed one restarted and takes its lease back."""
    if env.kafka_bootstrap is None or env.redis_url is None:
        raise PeerUnavailableError("AgentLedgerSaver needs the local stack (Kafka and Redis)")
    tag = "bench-lg-" + safe_name(namespace)
    return SaverSettings(
        kafka_bootstrap=env.kafka_bootstrap,
        redis_url=env.redis_url,
        topic_prefix=f"{tag}.",
        key_prefix=tag,
        worker_id=f"{tag}-worker",
        transactional_id=f"{tag}-producer",
        idle_release_ms=600_000,
        log_level="WARNING",
    )


class AgentLedgerSaverPeer(LangGraphPeer):
    """LangGraph's loop graph with AgentLedgerSaver as its checkpointer."""

    name: ClassVar[str] = "langgraph-agentledger"

    @classmethod
    @asynccontextmanager
    async def sidecar(cls, env: Env, namespace: str) -> AsyncIterator[None]:
        """Fresh topics and keys for the namespace, and a projector folding them into views."""
        log_name = f"projector-{safe_name(namespace)}-langgraph.log"
        async with fresh_namespace(env, saver_settings_for(env, namespace), log_name):
            yield

    async def _open_saver(self, stack: AsyncExitStack) -> Any:
        """The saver, on the namespace's topics and keys."""
        self._settings = saver_settings_for(self.env, self.namespace)
        return await stack.enter_async_context(AgentLedgerSaver.from_settings(self._settings))

    async def stored_bytes(self) -> int:
        """On-disk segment bytes of the namespace's run topics (steps, effects, acceptance)."""
        names = topic_names(saver_settings_for(self.env, self.namespace))
        return topic_bytes(self.env, names.run_topics)

    def notes(self) -> list[str]:
        """How this row writes."""
        return [
            *super().notes(),
            "AgentLedgerSaver: Kafka transactions (acks=all, group commit) under the thread's "
            "Redis lease; lists stored as appended parts; reads from the projector's views",
        ]


async def measure(env: Env, namespace: str, steps: int) -> dict[str, Any]:
    """One run of ``steps`` steps in a fresh namespace: per-step latencies (s) and bytes stored.

    For a bench that does not go through the peer registry: ``await measure(env, "ns", 1000)``.
    """
    async with (
        AgentLedgerSaverPeer.sidecar(env, namespace),
        AgentLedgerSaverPeer(env, namespace) as peer,
    ):
        latencies = await peer.run(f"run-{steps}", steps)
        stored = await peer.stored_bytes()
    return {"steps": steps, "latencies_s": latencies, "stored_bytes": stored}

"""The systems the bench compares, by name; each module is imported only when its peer runs, so
a peer whose package is missing fails alone, with the reason."""

from __future__ import annotations

import importlib

from bench.peers.base import Peer, PeerUnavailableError

# name -> "module:class"; the order is the order of the report's columns.
PEERS: dict[str, str] = {
    "agentledger": "bench.peers.ledger:LedgerPeer",
    "agentledger-before": "bench.peers.ledger_sdk:LedgerBeforePeer",
    "agentledger-raw": "bench.peers.ledger_raw:LedgerRawPeer",
    "langgraph-agentledger": "bench.peers.langgraph_agentledger:AgentLedgerSaverPeer",
    "pydantic-ai-agentledger": "bench.peers.pydantic_ai_peer:PydanticAiLedgerPeer",
    "pydantic-ai": "bench.peers.pydantic_ai_peer:PydanticAiPeer",
    "langgraph-sqlite": "bench.peers.langgraph_saver:SqlitePeer",
    "langgraph-sqlite-delta": "bench.peers.langgraph_saver:SqliteDeltaPeer",
    "langgraph-postgres": "bench.peers.langgraph_saver:PostgresPeer",
    "langgraph-postgres-delta": "bench.peers.langgraph_saver:PostgresDeltaPeer",
    "langgraph-redis": "bench.peers.langgraph_saver:RedisPeer",
    "dbos-postgres": "bench.peers.dbos_peer:DbosPeer",
    "floor-kafka": "bench.peers.floor:KafkaFloor",
    "floor-kafka-txn": "bench.peers.floor:KafkaTxnFloor",
    "floor-kafka-txn3": "bench.peers.floor:KafkaTxn3Floor",
    "floor-redis": "bench.peers.floor:RedisFloor",
    "floor-postgres": "bench.peers.floor:PostgresFloor",
}
OURS = "agentledger"
# Left out of --quick to stay under 5 minutes on 2 cores (run them by name with --peers).
FULL_ONLY: frozenset[str] = frozenset({"langgraph-sqlite-delta", "langgraph-postgres-delta"})
# Run only when named with --peers: the SDK-less write path of agentledger (a diagnostic), and
# the Pydantic AI rows (Pydantic AI prepares each request from the whole history, so a run's time
# grows with the square of its length: the full preset's 10,000 steps would take hours; run them
# with --quick).
OPT_IN: frozenset[str] = frozenset({"agentledger-raw", "pydantic-ai-agentledger", "pydantic-ai"})


def load(name: str) -> type[Peer]:
    """The peer class registered as ``name``; PeerUnavailableError if its packages are missing."""
    try:
        target = PEERS[name]
    except KeyError:
        msg = f"unknown peer {name!r}; known: {', '.join(PEERS)}"
        raise PeerUnavailableError(msg) from None
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        msg = f"cannot import {module_name}: {e} (pip install -e '.[bench]')"
        raise PeerUnavailableError(msg) from e
    cls: type[Peer] = getattr(module, attr)
    return cls

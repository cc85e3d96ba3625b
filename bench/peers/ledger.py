"""agentledger's row: the worker SDK (``agentledger.worker``); the raw KafkaEventLog path of
``ledger_raw`` stays available as the ``agentledger-raw`` peer for comparison."""

from __future__ import annotations

from bench.peers.ledger_sdk import LedgerSdkPeer as LedgerPeer

__all__ = ["LedgerPeer"]

"""Adapters that put agentledger under other agent frameworks (each needs its optional extra)."""

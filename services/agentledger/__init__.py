"""agentledger: a durable record of AI-agent runs that survives kill -9 at any instant."""

from __future__ import annotations

__version__ = "0.1.0"

"""The sandbox provider: a separate HTTP process with a durable store, used as the outside world.

Start it with ``agentledger sandbox serve`` or, from tests and the demo, with
:class:`SandboxProcess`; talk to it with :data:`SandboxProvider` (the HTTP adapter) and inspect
it with :class:`SandboxClient`.
"""

from __future__ import annotations

from agentledger.providers.http import HttpProvider
from agentledger.providers.sandbox.client import SandboxClient, SandboxEffect
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.providers.sandbox.settings import SandboxSettings

SandboxProvider = HttpProvider
"""The sandbox speaks the generic Idempotency-Key protocol, so its adapter is HttpProvider."""

__all__ = [
    "SandboxClient",
    "SandboxEffect",
    "SandboxProcess",
    "SandboxProvider",
    "SandboxSettings",
]

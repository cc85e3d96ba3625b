"""Fixtures of the fleet integration tests: a sandbox provider process and fleet settings on it.

The session stack and ``ledger_settings`` come from ``tests/conftest.py``. A module changes the
fleet settings it needs by overriding ``fleet_overrides``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentledger.fleet import FleetSettings
from agentledger.fleet.testing import fleet_settings
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(tmp_path: Path) -> AsyncIterator[SandboxProcess]:
    """A sandbox provider process of this test."""
    async with SandboxProcess(tmp_path / "sandbox.db") as process:
        yield process


@pytest.fixture
def fleet_overrides() -> dict[str, Any]:
    """Fleet settings a module sets on top of ``fleet``'s defaults (none here)."""
    return {}


@pytest.fixture
def fleet(
    ledger_settings: CommonSettings, sandbox: SandboxProcess, fleet_overrides: dict[str, Any]
) -> FleetSettings:
    """Fleet settings on the test's topics and keys, short leases, effects to the sandbox.

    Runs resume from the log (no views, no barrier) unless ``fleet_overrides`` says otherwise.
    """
    defaults: dict[str, Any] = {
        "provider_url": sandbox.url,
        "worker_id": f"w-{uuid.uuid4().hex[:6]}",
        "lease_ttl_ms": 3_000,
        "use_views": False,
        "resume_barrier_s": 0.0,
        "kafka_transaction_timeout_ms": 3_000,
    }
    return fleet_settings(ledger_settings, **{**defaults, **fleet_overrides})

"""Fixtures shared by the chaos tests (a module may define its own ``sandbox`` instead)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from agentledger.providers.sandbox.process import SandboxProcess


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(tmp_path: Path) -> AsyncIterator[SandboxProcess]:
    """The external world of this test."""
    async with SandboxProcess(tmp_path / "sandbox.db") as process:
        yield process

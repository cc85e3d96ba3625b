"""The sandbox's store outlives its process: restarts and SIGKILL keep every committed effect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentledger.errors import ProviderUnavailableError
from agentledger.providers import EffectRequest, FaultRule, HttpProvider
from agentledger.providers.sandbox import SandboxClient, SandboxProcess

pytestmark = pytest.mark.integration

TICKET = EffectRequest(
    kind="tickets", identity={"order": "o-42", "queue": "refunds"}, free_text={"note": "late"}
)


async def test_effects_survive_a_restart(tmp_path: Path) -> None:
    """After a restart on the same file, effects are listed and a repeat performs nothing."""
    async with SandboxProcess(tmp_path / "effects.sqlite3") as sandbox:
        first_pid = sandbox.pid
        async with HttpProvider(sandbox.url) as provider:
            created = await provider.perform(TICKET, "ticket-1")
        await sandbox.restart()
        assert sandbox.pid != first_pid
        async with HttpProvider(sandbox.url) as provider, SandboxClient(sandbox.url) as client:
            replayed = await provider.perform(TICKET, "ticket-1")
            found = await provider.lookup("tickets", "ticket-1")
            effects = await client.effects()
    assert replayed == created
    assert found.result == created
    assert [effect.id for effect in effects] == [created.external_ref]


async def test_committed_effect_survives_sigkill(tmp_path: Path) -> None:
    """An effect whose answer was dropped is still there after the sandbox is killed -9."""
    sandbox = SandboxProcess(
        tmp_path / "killed.sqlite3", faults=[FaultRule(mode="drop-after-commit", times=1)]
    )
    async with sandbox:
        async with HttpProvider(sandbox.url) as provider:
            with pytest.raises(ProviderUnavailableError):
                await provider.perform(TICKET, "ticket-2")
        await sandbox.kill()
        await sandbox.start()
        async with HttpProvider(sandbox.url) as provider, SandboxClient(sandbox.url) as client:
            found = await provider.lookup("tickets", "ticket-2")
            effects = await client.effects()
    assert found.found
    assert [effect.idempotency_key for effect in effects] == ["ticket-2"]


async def test_stop_is_idempotent(tmp_path: Path) -> None:
    """Stopping twice is harmless and leaves no process behind."""
    sandbox = SandboxProcess(tmp_path / "stop.sqlite3")
    await sandbox.start()
    pid = sandbox.pid
    await sandbox.stop()
    await sandbox.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

"""`agentledger sandbox serve`: announces its URL, serves, stops on SIGTERM, refuses bad flags."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from agentledger.providers import EffectRequest, HttpProvider
from agentledger.providers.sandbox import SandboxClient

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "agentledger.cli"]


async def test_serve_announces_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    """The command prints its URL as JSON, performs effects into --db, and exits 0 on SIGTERM."""
    db = tmp_path / "cli.sqlite3"
    proc = await asyncio.create_subprocess_exec(
        *CLI, "sandbox", "serve", "--port", "0", "--db", str(db),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            ready = json.loads(await proc.stdout.readline())
        assert ready["event"] == "sandbox_listening"
        url = ready["url"]
        request = EffectRequest(kind="payments", identity={"amount": 1})
        async with HttpProvider(url) as provider, SandboxClient(url) as client:
            await provider.perform(request, "cli-key")
            assert [e.idempotency_key for e in await client.effects()] == ["cli-key"]
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            _, stderr = await proc.communicate()
    assert proc.returncode == 0, stderr.decode()
    assert db.exists()


@pytest.mark.parametrize(
    ("flags", "variable"),
    [
        (["--port", "70000"], "AGENTLEDGER_SANDBOX_PORT"),
        (["--faults", '{"mode": "explode"}'], "AGENTLEDGER_SANDBOX_FAULTS"),
        (["--faults", "not json"], "AGENTLEDGER_SANDBOX_FAULTS"),
        (["--host", " "], "AGENTLEDGER_SANDBOX_HOST"),
    ],
)
async def test_bad_flags_exit_2_naming_the_setting(
    tmp_path: Path, flags: list[str], variable: str
) -> None:
    """Invalid settings end with exit code 2 and one line naming the setting, no traceback."""
    proc = await asyncio.create_subprocess_exec(
        *CLI, "sandbox", "serve", "--db", str(tmp_path / "x.sqlite3"), *flags,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(30):
        _, stderr = await proc.communicate()
    assert proc.returncode == 2
    assert variable in stderr.decode()
    assert "Traceback" not in stderr.decode()

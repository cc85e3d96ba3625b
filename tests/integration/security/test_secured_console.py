"""`agentledger console` as a process over the secured stack: the runs list and a run page
read from TLS Redis with the ACL user (and Kafka over SASL_SSL/SCRAM for the lookup)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from agentledger.projector.testing import (
    ProjectorProcess,
    free_port,
    projector_settings,
    settings_env,
    until,
)
from agentledger.stack.secure import SecureStack
from agentledger.views.model import RunView
from agentledger.views.redis_store import RedisViewStore

from .conftest import isolated
from .test_secured_services import one_run

pytestmark = pytest.mark.integration
READY_S = 120.0


async def page(url: str) -> tuple[int, str]:
    """GET ``url``: the status and the body (0 and the error while nothing listens)."""
    timeout = aiohttp.ClientTimeout(total=30)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url) as response:
            return response.status, await response.text()
    except aiohttp.ClientConnectionError as e:
        return 0, str(e)


async def console_pages(
    settings: dict[str, str], tmp_path: Path
) -> tuple[int | None, tuple[int, str], tuple[int, str], str]:
    """`agentledger console` at DEBUG with exactly these AGENTLEDGER_* variables: its exit code
    after SIGTERM, /runs, /runs/sec-c, and everything it logged."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(settings)
    port = free_port()
    log_file = tmp_path / "console.log"
    with log_file.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentledger.cli", "--log-level", "DEBUG",
            "console", "--port", str(port),
            env=env, stdout=log, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        listed = await until(
            lambda: page(f"{base}/runs"),
            lambda r: r[0] != 0 or proc.returncode is not None,
            timeout_s=READY_S,
        )
        shown = await page(f"{base}/runs/sec-c")
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 60)
    return proc.returncode, listed, shown, log_file.read_text()


async def test_the_console_serves_runs_from_the_secured_stack(
    secure: SecureStack, tmp_path: Path
) -> None:
    """With the secure settings only, the console lists a run the projector folded into TLS
    Redis and shows its page with every effect; its DEBUG log never contains the password."""
    async for common in isolated(secure, "SCRAM-SHA-256"):
        settings = projector_settings(common, projector_group=f"{common.key_prefix}-projector")
        async with ProjectorProcess(settings) as projector:
            await projector.wait_ready(timeout_s=READY_S)
            await one_run(common, "sec-c")
            async with RedisViewStore.from_url(
                str(common.redis_url), key_prefix=common.key_prefix, settings=common
            ) as views:
                view = await until(
                    lambda: views.load("sec-c"),
                    lambda v: isinstance(v, RunView) and v.status == "succeeded",
                    timeout_s=90,
                )
        assert isinstance(view, RunView)
        assert view.effects
        code, listed, shown, text = await console_pages(settings_env(settings), tmp_path)
        assert listed[0] == 200, text[-3000:]
        assert "sec-c" in listed[1]
        assert shown[0] == 200, text[-3000:]
        assert "succeeded" in shown[1]
        for key in view.effects:
            assert key in shown[1]
        assert code == 0, text[-3000:]
        assert "console_listening" in text
        assert secure.password not in text

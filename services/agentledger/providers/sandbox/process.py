"""Start the sandbox provider as a child process on a free port and wait until it is healthy."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Literal, Self

from agentledger.errors import StackError
from agentledger.providers.faults import FaultRule
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.service import READY_EVENT

_STOP_GRACE_S = 5.0
_LOG_TAIL_BYTES = 2000


class SandboxProcess:
    """A sandbox child process; ``async with`` starts it, leaving stops it (idempotent).

    The first start binds ``port`` (0 = any free port, chosen by the OS, so there is no race);
    :meth:`restart` comes back on the same port and database file, as a restarted provider would.
    Logs go to ``log_path`` (default: next to the database).
    """

    def __init__(
        self,
        db_path: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Sequence[FaultRule] = (),
        log_path: Path | None = None,
        synchronous: Literal["NORMAL", "FULL"] = "FULL",
        startup_timeout_s: float = 20.0,
    ) -> None:
        self.db_path = db_path
        self.host = host
        self.port = port
        self.faults = tuple(faults)
        self.log_path = log_path or db_path.with_name(db_path.name + ".log")
        self.synchronous = synchronous
        self.startup_timeout_s = startup_timeout_s
        self._proc: asyncio.subprocess.Process | None = None
        self._log: IO[bytes] | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123``."""
        if self._url is None:
            msg = "the sandbox is not running"
            raise StackError(msg)
        return self._url

    @property
    def pid(self) -> int:
        """Process id of the running sandbox."""
        if self._proc is None:
            msg = "the sandbox is not running"
            raise StackError(msg)
        return self._proc.pid

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def command(self) -> list[str]:
        """The command line that starts the sandbox."""
        cmd = [
            sys.executable,
            "-m",
            "agentledger.providers.sandbox",
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--db",
            str(self.db_path),
            "--synchronous",
            self.synchronous,
        ]
        if self.faults:
            rules = [rule.model_dump(mode="json", exclude_none=True) for rule in self.faults]
            cmd += ["--faults", json.dumps(rules)]
        return cmd

    async def start(self) -> None:
        """Spawn the process, read its ready line, check ``/healthz`` (idempotent)."""
        if self._proc is not None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._proc = await asyncio.create_subprocess_exec(
            *self.command(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._log,
        )
        try:
            async with asyncio.timeout(self.startup_timeout_s):
                url = await self._await_ready(self._proc)
            async with SandboxClient(url) as client:
                if not await client.healthy():
                    msg = f"sandbox at {url} is up but /healthz failed; see {self.log_path}"
                    raise StackError(msg)
        except TimeoutError as e:
            await self.stop()
            msg = (
                f"sandbox did not start within {self.startup_timeout_s}s; "
                f"log {self.log_path}:\n{self._log_tail()}"
            )
            raise StackError(msg) from e
        except BaseException:
            await self.stop()
            raise
        self._url = url
        self.port = int(url.rsplit(":", 1)[1])

    async def _await_ready(self, proc: asyncio.subprocess.Process) -> str:
        if proc.stdout is None:
            msg = "sandbox stdout is not a pipe"
            raise StackError(msg)
        while True:
            line = await proc.stdout.readline()
            if not line:
                code = await proc.wait()
                msg = (
                    f"sandbox exited with status {code} before it was ready; "
                    f"log {self.log_path}:\n{self._log_tail()}"
                )
                raise StackError(msg)
            with contextlib.suppress(ValueError):
                announced = json.loads(line)
                if isinstance(announced, dict) and announced.get("event") == READY_EVENT:
                    return str(announced["url"])

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; safe to call twice."""
        await self._end(signal.SIGTERM)

    async def kill(self) -> None:
        """SIGKILL at once, as a crash would; safe to call twice."""
        await self._end(signal.SIGKILL)

    async def restart(self) -> None:
        """Stop and start again on the same port and database."""
        await self.stop()
        await self.start()

    async def _end(self, signum: signal.Signals) -> None:
        proc, self._proc, self._url = self._proc, None, None
        if proc is not None:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signum)
                try:
                    async with asyncio.timeout(_STOP_GRACE_S):
                        await proc.wait()
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()
            if proc.stdout is not None:
                await proc.stdout.read()
        log, self._log = self._log, None
        if log is not None:
            log.close()

    def _log_tail(self) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "(no log)"
        return data[-_LOG_TAIL_BYTES:].decode("utf-8", "replace")

"""Throwaway loopback servers for the bench: free ports, child processes, an fsync-always Redis."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self


class BenchServerError(RuntimeError):
    """A server the bench needs could not be started; the message says why and what to do."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tcp_answers(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class ChildServer:
    """A server process the bench started itself, in its own temp dir; stop() is idempotent."""

    def __init__(self, name: str, root: Path | None = None) -> None:
        self.name = name
        self.root = root or Path(tempfile.mkdtemp(prefix=f"agentledger-bench-{name}-"))
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def log_file(self) -> Path:
        """The server's stdout and stderr."""
        return self.root / f"{self.name}.log"

    def spawn(self, argv: Sequence[str]) -> None:
        """Start the server process (its output goes to :attr:`log_file`)."""
        self._log = self.log_file.open("ab")
        self._proc = subprocess.Popen(
            list(argv), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    async def wait_ready(self, within_s: float = 60.0) -> None:
        """Wait until the port accepts connections; fail with the log's tail if the process dies."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                break
            if await asyncio.to_thread(tcp_answers, self.port):
                return
            await asyncio.sleep(0.1)
        tail = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
        msg = f"{self.name} did not come up on 127.0.0.1:{self.port}; its log ends with:\n{tail}"
        raise BenchServerError(msg)

    async def stop(self, sig: signal.Signals = signal.SIGTERM, grace: float = 30.0) -> None:
        """Stop the process (signal, then SIGKILL after ``grace``) and delete the temp dir."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            try:
                await asyncio.to_thread(proc.wait, grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait)
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self.root, ignore_errors=True)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server."""
        await self.stop()


class FsyncRedis(ChildServer):
    """A redis-server with ``appendonly yes`` and ``appendfsync always``: the fsync floor."""

    def __init__(self) -> None:
        super().__init__("redis-fsync")

    @property
    def url(self) -> str:
        """redis://127.0.0.1:PORT/0."""
        return f"redis://127.0.0.1:{self.port}/0"

    async def __aenter__(self) -> Self:
        """Start redis-server in the temp dir."""
        exe = shutil.which("redis-server")
        if exe is None:
            msg = "redis-server is not on PATH (Debian: apt-get install -y redis-server)"
            raise BenchServerError(msg)
        conf = self.root / "redis.conf"
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.root}\nappendonly yes\n"
            'appendfsync always\nsave ""\ndaemonize no\nprotected-mode yes\n'
        )
        self.spawn([exe, str(conf)])
        await self.wait_ready()
        return self


def run_as_postgres_user() -> list[str]:
    """The argv prefix to run a PostgreSQL binary: none, or ``setpriv`` to the postgres user as
    root (PostgreSQL refuses to run as root; setpriv execs, so signals reach postgres itself)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]

"""A throwaway Debian PostgreSQL on a free loopback port in a temp dir (fsync and
synchronous_commit on), for the Postgres-backed peers and the Postgres floor."""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Self

import psycopg

from bench.servers import BenchServerError, ChildServer, run_as_postgres_user

USER = "bench"
# Durable settings that matter for a fair comparison, stated rather than left to defaults.
SERVER_SETTINGS: dict[str, str] = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_connections": "400",
    "shared_buffers": "256MB",
    # Room for the GBs of WAL a full-snapshot checkpointer writes, so that a checkpoint storm
    # does not dominate its figures; durability is unchanged (fsync + synchronous_commit).
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
}


def find_bindir() -> Path | None:
    """The newest Debian PostgreSQL bin dir (``/usr/lib/postgresql/<v>/bin``), if any."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if found:
        return Path(found[-1]).parent
    exe = shutil.which("postgres")
    return Path(exe).resolve().parent if exe else None


async def ensure_bindir() -> Path:
    """Find PostgreSQL's binaries, installing Debian's ``postgresql`` first when root."""
    bindir = find_bindir()
    if bindir is not None:
        return bindir
    if os.geteuid() != 0:
        msg = "PostgreSQL is not installed; as root run: apt-get install -y postgresql"
        raise BenchServerError(msg)
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "postgresql"]):
        proc = await asyncio.to_thread(
            subprocess.run,
            argv,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if proc.returncode != 0:
            msg = f"{' '.join(argv)} failed: {proc.stderr[-1000:]}"
            raise BenchServerError(msg)
    bindir = find_bindir()
    if bindir is None:
        msg = "apt-get installed postgresql but no postgres binary was found"
        raise BenchServerError(msg)
    return bindir


class LocalPostgres(ChildServer):
    """initdb + postgres in a temp dir; ``async with`` starts it, leaving stops and deletes it."""

    def __init__(self) -> None:
        super().__init__("postgres")
        self.version = ""

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq URL for ``dbname`` as the trust-authenticated bench user."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    async def __aenter__(self) -> Self:
        """initdb, start the server, wait until it accepts connections."""
        bindir = await ensure_bindir()
        self.version = bindir.parent.name
        data = self.root / "data"
        sockets = self.root / "sockets"
        sockets.mkdir()
        prefix = run_as_postgres_user()
        if prefix:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(sockets, "postgres", "postgres")
        init = await asyncio.to_thread(
            subprocess.run,
            [
                *prefix,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if init.returncode != 0:
            msg = f"initdb failed: {init.stderr[-1500:]}"
            raise BenchServerError(msg)
        settings = [f"-c{k}={v}" for k, v in SERVER_SETTINGS.items()]
        self.spawn(
            [
                *prefix,
                str(bindir / "postgres"),
                "-D",
                str(data),
                "-p",
                str(self.port),
                "-k",
                str(sockets),
                "-clisten_addresses=127.0.0.1",
                *settings,
            ]
        )
        await self.wait_ready()
        await self._wait_accepting()
        return self

    async def _wait_accepting(self) -> None:
        """The port opens before recovery ends; wait until a query succeeds."""
        last: Exception | None = None
        for _ in range(100):
            try:
                async with await psycopg.AsyncConnection.connect(self.dsn(), autocommit=True) as c:
                    await c.execute("select 1")
                    return
            except psycopg.OperationalError as e:
                last = e
                await asyncio.sleep(0.1)
        msg = f"postgres on port {self.port} never accepted queries: {last}"
        raise BenchServerError(msg)

    async def create_database(self, name: str) -> str:
        """CREATE DATABASE ``name`` (dropping an old one) and return its DSN."""
        async with await psycopg.AsyncConnection.connect(self.dsn(), autocommit=True) as c:
            await c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await c.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    async def stop(self, sig: signal.Signals = signal.SIGINT, grace: float = 30.0) -> None:
        """Fast shutdown (SIGINT), then delete the data dir."""
        await super().stop(sig, grace)

"""The sandbox's durable effect store: SQLite in WAL mode, every answer committed first.

All SQLite work runs on one dedicated thread, so the event loop never blocks on an fsync and
check-then-insert is serialised; ``BEGIN IMMEDIATE`` keeps it safe even if two processes share
the file.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from pydantic import JsonValue

from agentledger.errors import ProviderError, ProviderRequestError
from agentledger.providers.hashing import canonical_json, identity_hash
from agentledger.providers.semantics import (
    StoredEffect,
    check_compensable,
    check_replay,
    compensation_identity,
    compensation_kind,
    new_effect,
)

_T = TypeVar("_T")
_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    identity_hash TEXT NOT NULL,
    payload TEXT NOT NULL,
    response TEXT NOT NULL,
    compensates TEXT UNIQUE,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS lookups (
    idempotency_key TEXT PRIMARY KEY,
    count INTEGER NOT NULL
);
"""
_COLUMNS = "id, kind, idempotency_key, identity_hash, payload, response, created_at, compensates"


def _row(row: tuple[Any, ...]) -> StoredEffect:
    return StoredEffect(
        id=row[0],
        kind=row[1],
        idempotency_key=row[2],
        identity_hash=row[3],
        payload=json.loads(row[4]),
        response=json.loads(row[5]),
        created_at=row[6],
        compensates=row[7],
    )


class SqliteEffectStore:
    """Effects and lookup counts in one SQLite file; an async context manager."""

    def __init__(self, path: Path, *, synchronous: Literal["NORMAL", "FULL"] = "FULL") -> None:
        self.path = path
        self._synchronous = synchronous
        self._executor: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None

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

    async def start(self) -> None:
        """Open (and create) the database (idempotent)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-db")
            await self._run(self._open)

    async def stop(self) -> None:
        """Close the database (idempotent)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(executor, self._close)
            executor.shutdown(wait=True)

    async def perform(
        self,
        *,
        kind: str,
        key: str,
        payload: dict[str, JsonValue],
        identity: dict[str, JsonValue],
        token: str,
        created_at: str,
    ) -> tuple[StoredEffect, bool]:
        """Store the effect unless ``key`` is known; True when it was performed now."""
        fresh = new_effect(
            kind=kind,
            key=key,
            payload=payload,
            identity=identity,
            token=token,
            created_at=created_at,
        )
        return await self._run(lambda: self._perform(fresh))

    async def lookup(self, kind: str, key: str) -> StoredEffect | None:
        """The effect of ``kind`` stored under ``key``, counting the lookup durably."""
        return await self._run(lambda: self._lookup(kind, key))

    async def compensate(
        self, *, kind: str, target_id: str, key: str, token: str, created_at: str
    ) -> tuple[StoredEffect, bool]:
        """Store a compensation of ``target_id`` unless ``key`` is known; True when new."""
        return await self._run(lambda: self._compensate(kind, target_id, key, token, created_at))

    async def effects(self, kind: str | None = None) -> list[StoredEffect]:
        """Every effect performed, in the order performed."""
        return await self._run(lambda: self._effects(kind))

    async def lookups(self) -> dict[str, int]:
        """Lookups answered, per idempotency key."""
        return await self._run(self._lookups)

    # --- on the database thread ---------------------------------------------------------

    async def _run(self, fn: Callable[[], _T]) -> _T:
        if self._executor is None:
            msg = f"sandbox store {self.path} is not open"
            raise ProviderError(msg)
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(_SCHEMA)
        db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
        self._db = db

    def _close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            msg = f"sandbox store {self.path} is not open"
            raise ProviderError(msg)
        return self._db

    def _transaction(self, fn: Callable[[sqlite3.Connection], _T], *, durable: bool) -> _T:
        db = self._conn()
        level = self._synchronous if durable else "NORMAL"
        db.execute(f"PRAGMA synchronous={level}")
        db.execute("BEGIN IMMEDIATE")
        try:
            result = fn(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    def _by_key(self, db: sqlite3.Connection, key: str) -> StoredEffect | None:
        row = db.execute(
            f"SELECT {_COLUMNS} FROM effects WHERE idempotency_key = ?",  # noqa: S608  # fixed columns
            (key,),
        ).fetchone()
        return None if row is None else _row(row)

    def _insert(self, db: sqlite3.Connection, effect: StoredEffect) -> None:
        db.execute(
            f"INSERT INTO effects ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608  # fixed columns
            (
                effect.id,
                effect.kind,
                effect.idempotency_key,
                effect.identity_hash,
                canonical_json(effect.payload).decode("utf-8"),
                canonical_json(effect.response).decode("utf-8"),
                effect.created_at,
                effect.compensates,
            ),
        )

    def _perform(self, fresh: StoredEffect) -> tuple[StoredEffect, bool]:
        def body(db: sqlite3.Connection) -> tuple[StoredEffect, bool]:
            recorded = self._by_key(db, fresh.idempotency_key)
            if recorded is not None:
                check_replay(
                    recorded,
                    kind=fresh.kind,
                    key=fresh.idempotency_key,
                    ident_hash=fresh.identity_hash,
                )
                return recorded, False
            self._insert(db, fresh)
            return fresh, True

        return self._transaction(body, durable=True)

    def _lookup(self, kind: str, key: str) -> StoredEffect | None:
        def body(db: sqlite3.Connection) -> StoredEffect | None:
            db.execute(
                "INSERT INTO lookups (idempotency_key, count) VALUES (?, 1) "
                "ON CONFLICT (idempotency_key) DO UPDATE SET count = count + 1",
                (key,),
            )
            recorded = self._by_key(db, key)
            return recorded if recorded is not None and recorded.kind == kind else None

        # A lost lookup count is harmless, so it is not fsynced; the effects are.
        return self._transaction(body, durable=False)

    def _compensate(
        self, kind: str, target_id: str, key: str, token: str, created_at: str
    ) -> tuple[StoredEffect, bool]:
        comp_kind = compensation_kind(kind)
        identity = compensation_identity(target_id)

        def body(db: sqlite3.Connection) -> tuple[StoredEffect, bool]:
            recorded = self._by_key(db, key)
            if recorded is not None:
                check_replay(recorded, kind=comp_kind, key=key, ident_hash=identity_hash(identity))
                return recorded, False
            row = db.execute(
                f"SELECT {_COLUMNS} FROM effects WHERE id = ? AND kind = ?",  # noqa: S608  # fixed columns
                (target_id, kind),
            ).fetchone()
            if row is None:
                msg = f"no {kind} object {target_id} to compensate"
                raise ProviderRequestError(msg, status=404)
            done = db.execute(
                f"SELECT {_COLUMNS} FROM effects WHERE compensates = ?",  # noqa: S608  # fixed columns
                (target_id,),
            ).fetchone()
            check_compensable(_row(row), None if done is None else _row(done), key)
            fresh = new_effect(
                kind=comp_kind,
                key=key,
                payload={},
                identity=identity,
                token=token,
                created_at=created_at,
                compensates=target_id,
            )
            self._insert(db, fresh)
            return fresh, True

        return self._transaction(body, durable=True)

    def _effects(self, kind: str | None) -> list[StoredEffect]:
        db = self._conn()
        if kind is None:
            rows = db.execute(f"SELECT {_COLUMNS} FROM effects ORDER BY seq").fetchall()  # noqa: S608  # fixed columns
        else:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM effects WHERE kind = ? ORDER BY seq",  # noqa: S608  # fixed columns
                (kind,),
            ).fetchall()
        return [_row(row) for row in rows]

    def _lookups(self) -> dict[str, int]:
        rows = self._conn().execute("SELECT idempotency_key, count FROM lookups").fetchall()
        return {str(key): int(count) for key, count in rows}

"""PostgreSQL helpers shared by the Postgres-backed peers: a database per namespace, sizes."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from bench.peers.base import Env


async def ensure_database(env: Env, name: str, *, fresh: bool) -> str:
    """The DSN of database ``name``; a fresh one is dropped and created again."""
    admin = env.pg_database_dsn("postgres")
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as c:
        if fresh:
            await c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        cur = await c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if await cur.fetchone() is None:
            await c.execute(f'CREATE DATABASE "{name}"')
    return env.pg_database_dsn(name)


async def relation_bytes(dsn: str, tables: Sequence[str], schema: str = "public") -> int:
    """Sum of pg_total_relation_size (heap, TOAST, indexes) of the tables that exist."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        cur = await c.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname = ANY(%s)",
            (schema, list(tables)),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def schema_bytes(dsn: str, schema: str) -> int:
    """Sum of pg_total_relation_size of every table in ``schema``."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        cur = await c.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0

"""Commands packed by the view store's connections: the same bytes redis-py sends."""

from __future__ import annotations

import pytest
import redis.exceptions
from redis.asyncio.connection import Connection

from agentledger.redisclient import _pack_command


def _connection(encoding: str = "utf-8", errors: str = "strict") -> Connection:
    return Connection(encoding=encoding, encoding_errors=errors)


@pytest.mark.parametrize(
    "args",
    [
        ("EVALSHA", "a" * 40, 2, "k1", b"k2", 0, -7, 12345678901234, 1.5, "h\u00e9", b"", ""),
        ("HSET", "key", "field", b"\x00\xff"),
        ("CLIENT SETNAME", "x"),
        (b"SCRIPT LOAD", "return 1"),
        ("SET", "k", 10**30, -(2**63), 1e300, float("inf"), memoryview(b"ab")),
    ],
)
def test_packing_matches_redis_py(args: tuple[object, ...]) -> None:
    """Bytes, strs (non-ASCII too), ints of any sign and size, floats, buffers and multi-word
    command names pack to exactly what redis-py's own packer makes of them (hiredis's packer
    when it is installed, else the loop)."""
    connection = _connection()
    assert _pack_command(connection, *args) == [b"".join(connection.pack_command(*args))]


def test_another_encoding_goes_through_the_connections_encoder() -> None:
    """A connection set to another encoding encodes strs with it, as redis-py does."""
    connection = _connection("latin-1")
    args = ("SET", "k", "caf\u00e9")
    assert _pack_command(connection, *args) == [b"".join(connection.pack_command(*args))]
    assert b"caf\xe9" in _pack_command(connection, *args)[0]


def test_a_bool_is_refused_as_redis_py_refuses_it() -> None:
    """A bool argument raises redis-py's DataError instead of being sent as 1 or True."""
    with pytest.raises(redis.exceptions.DataError):
        _pack_command(_connection(), "SET", "k", True)

"""Choosing loopback ports: keep the previous ones when free, otherwise ask the kernel for new."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence

from agentledger.netprobe import accepts as tcp_accepts

LOOPBACK = "127.0.0.1"


def port_is_free(port: int) -> bool:
    """Whether a listener could bind ``127.0.0.1:port`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Servers (the JVM, Redis) bind with SO_REUSEADDR, so connections of a stopped server
        # lingering in TIME_WAIT do not make its port unusable; test the same way.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def ephemeral_port() -> int:
    """A port the kernel says is free on loopback (free now; a race is still possible)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def choose_ports(
    preferred: Sequence[int | None],
    is_free: Callable[[int], bool],
    fresh: Callable[[], int],
) -> list[int]:
    """One distinct port per slot: the preferred one when it is free, otherwise a fresh one."""
    chosen: list[int] = []
    for want in preferred:
        if want is not None and want not in chosen and is_free(want):
            chosen.append(want)
            continue
        while True:
            port = fresh()
            if port not in chosen and port not in preferred:
                chosen.append(port)
                break
    return chosen


def free_ports(preferred: Sequence[int | None]) -> list[int]:
    """Distinct free loopback ports, keeping the preferred ones that are still free."""
    return choose_ports(preferred, port_is_free, ephemeral_port)


async def accepts(port: int, limit_s: float = 1.0) -> bool:
    """Whether something accepts TCP connections on ``127.0.0.1:port``."""
    return await tcp_accepts(LOOPBACK, port, limit_s)

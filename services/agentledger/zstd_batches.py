"""zstd record batches decoded with one reused context per thread, beneath aiokafka.

aiokafka decodes a zstd record batch with ``cramjam.zstd.decompress``, which builds a fresh
decompression context on every call: ~50 us a batch whatever its size (DESIGN.md §16, session
14). A projector that keeps up reads batches of a few records each, so that was several us of
every record it applied. :func:`decode` gives the same bytes through a ``zstandard``
decompressor kept per thread (~1 us); a payload it cannot vouch for as exactly one whole frame
(more frames, trailing bytes, a truncated or corrupt frame) goes to aiokafka's own function, so
what is decoded, and what fails, is what aiokafka decides.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import zstandard

#: aiokafka's own zstd decoder, as it was before :func:`install`.
_ORIGINAL: Callable[[bytes], bytes] | None = None
_local = threading.local()


def decode(payload: bytes, fallback: Callable[[bytes], bytes]) -> bytes:
    """The decompressed bytes of ``payload``: through this thread's reused decompressor when it
    is exactly one complete frame, else ``fallback(payload)`` (its result or its error)."""
    decompressor: zstandard.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    try:
        stream = decompressor.decompressobj()
        out = stream.decompress(payload)
    except zstandard.ZstdError:
        return fallback(payload)
    if not stream.eof or stream.unused_data:
        return fallback(payload)
    return out


def _decode(payload: bytes) -> bytes:
    assert _ORIGINAL is not None
    return decode(payload, _ORIGINAL)


def install() -> None:
    """Make aiokafka's record readers (the Cython ones and the pure ones) decode zstd batches
    with :func:`decode`; idempotent. Every module of aiokafka that took ``zstd_decode`` by name
    gets the new one."""
    global _ORIGINAL  # noqa: PLW0603 - one patch of a third-party module, made once
    if _ORIGINAL is not None:
        return
    import aiokafka.codec  # noqa: PLC0415 - only what builds Kafka clients pays the import
    from aiokafka.record import default_records  # noqa: PLC0415 - as above

    _ORIGINAL = aiokafka.codec.zstd_decode
    modules: list[object] = [aiokafka.codec, default_records]
    try:
        from aiokafka.record._crecords import (  # noqa: PLC0415 - absent without extensions
            default_records as compiled,
        )
    except ImportError:  # pragma: no cover - aiokafka built without its C extensions
        pass
    else:
        modules.append(compiled)
    for module in modules:
        if getattr(module, "zstd_decode", None) is _ORIGINAL:
            module.zstd_decode = _decode  # type: ignore[attr-defined]

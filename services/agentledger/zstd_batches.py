"""zstd record batches encoded and decoded with contexts reused per thread, beneath aiokafka.

aiokafka compresses and decompresses a zstd record batch with ``cramjam.zstd``, which builds a
fresh context on every call: ~70 us to write a batch and ~50 us to read one, whatever its size
(DESIGN.md §16, session 14). A worker publishes a step as a few small batches, and a projector
that keeps up reads batches of a few records each, so that was several us of every record.
``zstandard``'s compressor and decompressor kept per thread do the same in ~7 and ~1 us:

- :func:`encode` writes the bytes cramjam writes at the same level (both are libzstd's one-shot
  frame with its content size; a test compares them);
- :func:`decode` gives the same bytes; a payload it cannot vouch for as exactly one whole frame
  (more frames, trailing bytes, a truncated or corrupt frame) goes to aiokafka's own function,
  so what is decoded, and what fails, is what aiokafka decides.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import zstandard

#: aiokafka's own zstd decoder, as it was before :func:`install`.
_ORIGINAL: Callable[[bytes], bytes] | None = None
#: The level aiokafka compresses zstd batches at when its producer names none (Kafka's default).
DEFAULT_LEVEL = 3
_local = threading.local()
_installing = threading.Lock()


def encode(payload: bytes, level: int | None = None) -> bytes:
    """``payload`` as one zstd frame at ``level`` (None: :data:`DEFAULT_LEVEL`), through this
    thread's compressor for that level."""
    level = DEFAULT_LEVEL if level is None else level
    compressors: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if compressors is None:
        compressors = _local.compressors = {}
    compressor = compressors.get(level)
    if compressor is None:
        compressor = compressors[level] = zstandard.ZstdCompressor(level=level)
    return compressor.compress(payload)


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


def _encode(payload: bytes, level: int | None = None) -> bytes:
    return encode(payload, level)


def install() -> None:
    """Make aiokafka's record builders and readers (the Cython ones and the pure ones) encode
    and decode zstd batches with :func:`encode` and :func:`decode`; idempotent. Every module of
    aiokafka that took ``zstd_encode``/``zstd_decode`` by name gets the new ones."""
    if _ORIGINAL is not None:
        return
    import aiokafka.codec  # noqa: PLC0415 - only what builds Kafka clients pays the import
    from aiokafka.record import default_records  # noqa: PLC0415 - as above

    with _installing:  # clients may be built on two threads: patch once, keep the original
        if _ORIGINAL is None:
            _patch(aiokafka.codec, default_records)


def _patch(codec: Any, default_records: Any) -> None:
    global _ORIGINAL  # noqa: PLW0603 - one patch of a third-party module, made once
    _ORIGINAL = codec.zstd_decode
    encoder = codec.zstd_encode
    modules: list[object] = [codec, default_records]
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
        if getattr(module, "zstd_encode", None) is encoder:
            module.zstd_encode = _encode  # type: ignore[attr-defined]

"""The blob-store port: large payloads kept outside the log as references (uri + sha256)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from agentledger.errors import PayloadError


@dataclass(frozen=True)
class BlobRef:
    """Where a payload is and the sha256 (hex) of its bytes."""

    uri: str
    sha256: str


class BlobStore(ABC):
    """Content-addressed storage of payload bytes; ``get`` verifies the hash."""

    @abstractmethod
    async def put(self, data: bytes) -> BlobRef:
        """Store ``data`` durably (idempotent: same bytes, same reference)."""

    @abstractmethod
    async def get(self, ref: BlobRef) -> bytes:
        """The bytes of ``ref``; PayloadError if missing or altered."""


def _verified(ref: BlobRef, data: bytes) -> bytes:
    actual = hashlib.sha256(data).hexdigest()
    if actual != ref.sha256:
        msg = f"blob {ref.uri} has sha256 {actual}, the event recorded {ref.sha256}"
        raise PayloadError(msg)
    return data


class MemoryBlobStore(BlobStore):
    """Blobs in a dict, for tests."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    async def put(self, data: bytes) -> BlobRef:
        """Keep ``data`` under ``mem://<sha256>``."""
        digest = hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return BlobRef(f"mem://{digest}", digest)

    async def get(self, ref: BlobRef) -> bytes:
        """The stored bytes, verified."""
        data = self.blobs.get(ref.uri.removeprefix("mem://"))
        if data is None:
            raise PayloadError(f"blob {ref.uri} is not in this memory store")
        return _verified(ref, data)


class FileBlobStore(BlobStore):
    """Blobs as files ``<root>/<aa>/<sha256>`` (a shared file system for a fleet), fsynced."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    async def put(self, data: bytes) -> BlobRef:
        """Write ``data`` atomically (temp file, fsync, rename) unless already there."""
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():
            await asyncio.to_thread(self._write, path, data)
        return BlobRef(path.as_uri(), digest)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)

    async def get(self, ref: BlobRef) -> bytes:
        """Read and verify the file a ``file://`` reference names."""
        parsed = urlparse(ref.uri)
        if parsed.scheme != "file":
            raise PayloadError(f"blob {ref.uri} is not a file:// reference")
        path = Path(unquote(parsed.path))
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as e:
            raise PayloadError(f"blob {ref.uri} cannot be read: {e}") from e
        return _verified(ref, data)

"""LangGraph values as stored bytes: serialize, redact secrets, and find the part a list grew by.

Values are serialized with the graph's own serializer (``serde.dumps_typed``), so anything a
LangGraph checkpointer can store, this one can. Before the bytes go into an event, every string
inside them is passed through the redactor (invariant 10); bytes without a secret are kept
exactly as the serializer made them, so values round-trip unchanged.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import ormsgpack
import structlog
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentledger.redaction import Redactor

_log = structlog.get_logger(__name__)
_OPTIONS = ormsgpack.OPT_NON_STR_KEYS
EMPTY = "empty"
MASK_MEMO_SIZE = 4096
MASK_MEMO_MAX_CHARS = 64 * 1024


class _Ext:
    """A msgpack extension object kept opaque while its payload is walked.

    A plain class on purpose: ormsgpack would encode a dataclass as a map, not pass it to
    ``default``.
    """

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def appended(previous: list[Any] | None, value: object) -> list[Any] | None:
    """The items ``value`` adds to ``previous`` when it is ``previous`` plus more, else None.

    Both must be plain lists. Elements are compared with ``==``, which is an identity check for
    the objects a reducer carried over, so the cost is one pointer comparison per old element.
    """
    if previous is None or type(value) is not list:
        return None
    n = len(previous)
    if len(value) < n or value[:n] != previous:
        return None
    return value[n:]


class ValueCodec:
    """Serializes channel values and writes with ``serde``; masks secrets in what it writes."""

    def __init__(self, serde: SerializerProtocol, redactor: Redactor) -> None:
        self.serde = serde
        self.redactor = redactor
        # A node's output is written twice (pending write, then the checkpoint's delta): the
        # same strings come back, and scanning text for secrets costs about 1 us per byte.
        self._masked: OrderedDict[str, str] = OrderedDict()

    def mask(self, text: str) -> str:
        """``text`` with secrets masked (memoized: the redactor is a pure function)."""
        masked = self._masked.get(text)
        if masked is None:
            masked = self.redactor.text(text)
            if len(text) > MASK_MEMO_MAX_CHARS:
                return masked
            self._masked[text] = masked
            if len(self._masked) > MASK_MEMO_SIZE:
                self._masked.popitem(last=False)
        return masked

    def dumps(self, value: Any) -> tuple[str, bytes]:
        """(type tag, bytes) of ``value``, with secrets in its strings masked."""
        type_, data = self.serde.dumps_typed(value)
        if type_ == "msgpack":
            data = self._redact_msgpack(bytes(data))
        return type_, bytes(data)

    def loads(self, type_: str, data: bytes) -> Any:
        """The value stored as (``type_``, ``data``)."""
        return self.serde.loads_typed((type_, data))

    def _redact_msgpack(self, data: bytes) -> bytes:
        """``data`` re-encoded with every string redacted; the same bytes if nothing changed."""
        changed: list[bool] = []
        try:
            tree = ormsgpack.unpackb(data, ext_hook=_Ext, option=_OPTIONS)
            walked = _walk(tree, self.mask, changed, self._redact_msgpack)
            if not changed:
                return data
            return ormsgpack.packb(walked, default=_ext_default, option=_OPTIONS)
        except (ormsgpack.MsgpackDecodeError, ormsgpack.MsgpackEncodeError, TypeError) as e:
            # Not plain msgpack all the way down (an extension with raw bytes): keep it as is.
            _log.warning("redaction_skipped", reason=f"{type(e).__name__}: {e}")
            return data


def _walk(
    node: Any,
    text: Callable[[str], str],
    changed: list[bool],
    nested: Callable[[bytes], bytes],
) -> Any:
    if isinstance(node, str):
        masked = text(node)
        if masked != node:
            changed.append(True)
        return masked
    if isinstance(node, list):
        return [_walk(item, text, changed, nested) for item in node]
    if isinstance(node, dict):
        return {key: _walk(item, text, changed, nested) for key, item in node.items()}
    if isinstance(node, _Ext):
        inner = nested(node.data)
        if inner is not node.data:
            changed.append(True)
            return _Ext(node.code, inner)
    return node


def _ext_default(obj: Any) -> ormsgpack.Ext:
    if isinstance(obj, _Ext):
        return ormsgpack.Ext(obj.code, obj.data)
    msg = f"{type(obj).__name__} cannot be re-encoded"
    raise TypeError(msg)

"""A view's steps and effects: a mapping whose values stay in their stored JSON until read.

A 1,000-step view holds about 2 MB of step and effect JSON. A resume reads the step at its
cursor and the effects, a projector batch the few steps its events touch; decoding the rest
made up most of a resume's CPU. :class:`Records` keeps each stored value as it came from the
store and decodes it (with the same pydantic validator as before) the first time it is read;
everything that reads the whole mapping (iteration of values, equality, ``model_dump``, copies)
decodes every value first, so no caller sees the difference but the time.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, TypeVar, get_args, overload

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


def _is_stored(value: object) -> bool:
    """Whether a value of :meth:`Records.stored` records is still in its stored form (bytes or
    text: the decoded values are models)."""
    kind = type(value)
    return kind is bytes or kind is str


class Records(MutableMapping[K, V]):
    """An insertion-ordered mapping whose stored values are decoded when first read.

    A value still stored is kept as it came (bytes or text) in the one dict of values, and its
    brief once read in a dict of briefs: no object is made per stored value (a 1,000-step
    view holds 2,000 of them, read once by a resume)."""

    __slots__ = ("_brief", "_briefs", "_decode", "_items", "_listed")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._items: dict[K, Any] = dict(items) if items is not None else {}
        # None: no value is stored (the records were not made by stored())
        self._decode: Callable[[bytes | str], V] | None = None
        self._brief: Callable[[list[Any], list[bytes | str]], list[object]] | None = None
        self._briefs: dict[K, object] = {}
        # what the last whole pass of briefs() gave (the keys, and the value or brief of
        # each), until a value is set, deleted or decoded
        self._listed: tuple[list[K], list[object]] | None = None

    @classmethod
    def stored(
        cls,
        values: Mapping[K, bytes | str],
        decode: Callable[[bytes | str], V],
        brief: Callable[[list[K], list[bytes | str]], list[object]] | None = None,
    ) -> Records[K, V]:
        """Records of stored values, each decoded by ``decode`` the first time it is read;
        ``brief(keys, values)`` decodes, in one call for every value still stored, the few
        fields :meth:`briefs` gives of each (a list in the same order)."""
        records: Records[K, V] = cls()
        records._items = dict(values)
        records._decode = decode
        records._brief = brief
        return records

    def briefs(self) -> Iterator[tuple[K, object]]:
        """Each key with its value, or with its value's brief while it is still stored (the
        few fields ``brief`` reads: cheaper than the whole value)."""
        items = self._items
        if self._decode is None:  # nothing stored
            yield from items.items()
            return
        if self._brief is None:
            for key, value in items.items():
                yield key, self[key] if _is_stored(value) else value
            return
        listed = self._listed
        if listed is None:
            listed = self._list_briefs()
        yield from zip(*listed, strict=True)

    def listed_briefs(self) -> tuple[list[K], list[object]]:
        """The keys and what :meth:`briefs` gives for each, as two lists: the records' own
        while no value is set, deleted or decoded (read them, never change them)."""
        if self._decode is None or self._brief is None:
            pairs = list(self.briefs())
            return [k for k, _ in pairs], [found for _, found in pairs]
        listed = self._listed
        return listed if listed is not None else self._list_briefs()

    def _list_briefs(self) -> tuple[list[K], list[object]]:
        """The keys and, for each, its value or its value's brief; the briefs of values not
        read yet are read in one call. Kept until a value is set, deleted or decoded. Two
        lists and no pair per value: a resume reads a 1,000-effect run's places before it is
        ready, and every object the collector tracks brings its next pass nearer."""
        brief = self._brief
        if brief is None:
            msg = "records without a brief reader list no briefs"
            raise TypeError(msg)
        items = self._items
        known = self._briefs
        unread = [
            k for k, v in items.items() if (type(v) is bytes or type(v) is str) and k not in known
        ]
        if unread:
            found = brief(unread, [items[k] for k in unread])
            known.update(zip(unread, found, strict=True))
        keys = list(items)
        values = [known[k] if type(v) is bytes or type(v) is str else v for k, v in items.items()]
        self._listed = keys, values
        return keys, values

    def __getitem__(self, key: K) -> V:
        value = self._items[key]
        decode = self._decode
        if decode is not None and (type(value) is bytes or type(value) is str):  # stored
            value = self._items[key] = decode(value)
            self._listed = None
        found: V = value
        return found

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | T, /) -> V | T: ...
    def get(self, key: K, default: Any = None, /) -> Any:
        """The value of ``key`` (decoded if it was stored), else ``default``."""
        if key in self._items:
            return self[key]
        return default

    def __setitem__(self, key: K, value: V) -> None:
        self._items[key] = value
        self._briefs.pop(key, None)
        self._listed = None

    def __delitem__(self, key: K) -> None:
        del self._items[key]
        self._briefs.pop(key, None)
        self._listed = None

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def plain(self) -> dict[K, V]:
        """Every value decoded, as a dict (in insertion order)."""
        return {k: self[k] for k in self._items}

    def undecoded(self) -> int:
        """How many values are still in their stored form."""
        if self._decode is None:
            return 0
        return sum(1 for v in self._items.values() if _is_stored(v))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Records):
            return self.plain() == other.plain()
        if isinstance(other, Mapping):
            return self.plain() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as dict

    def __repr__(self) -> str:
        return f"Records({self.plain()!r})"

    def __copy__(self) -> Records[K, V]:
        twin: Records[K, V] = Records()
        twin._items = dict(self._items)
        twin._decode = self._decode
        twin._brief = self._brief
        twin._briefs = dict(self._briefs)
        return twin

    def __deepcopy__(self, memo: dict[int, Any]) -> Records[K, V]:
        twin: Records[K, V] = Records()
        # stored values are immutable bytes (or text), and so are briefs: shared; decoded
        # values are copied
        stored = self._decode is not None
        twin._items = {
            k: v if stored and _is_stored(v) else copy.deepcopy(v, memo)
            for k, v in self._items.items()
        }
        twin._decode = self._decode
        twin._brief = self._brief
        twin._briefs = dict(self._briefs)
        return twin

    def __reduce__(self) -> tuple[Any, ...]:
        return (Records, (self.plain(),))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """Validated and serialized as ``dict[K, V]`` (values decoded first when serialized)."""
        args = get_args(source)
        key, value = args if len(args) == 2 else (Any, Any)
        inner = handler.generate_schema(dict[key, value])  # type: ignore[valid-type]
        return core_schema.no_info_after_validator_function(
            cls,
            inner,
            serialization=core_schema.wrap_serializer_function_ser_schema(_serialize, schema=inner),
        )


def _serialize(records: Any, serialize: core_schema.SerializerFunctionWrapHandler) -> Any:
    return serialize(records.plain() if isinstance(records, Records) else records)

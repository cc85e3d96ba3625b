"""Compact, key-sorted JSON of view values straight from the objects, for the run hash.

``layout.encode_run`` stores every non-text field of a run as ``json.dumps(value, separators=
(",", ":"), sort_keys=True)`` of the field's pydantic dump (mode json). For the values a run
holds (text, numbers, None, lists, dicts with text or int keys, and the small view models
:data:`PLAIN_MODELS`), :func:`dumps` gives the same text without the dump and the encoder's
setup; anything it is not sure of (a non-finite float, another type) raises :class:`Unusual`
and the caller takes the general path.
"""

from __future__ import annotations

import math
from json.encoder import encode_basestring_ascii
from typing import Any

from pydantic import BaseModel

from agentledger.views.model import Approval, Budget, Pause, Versions


class Unusual(Exception):  # noqa: N818 - a signal to take the general path, not an error
    """A value :func:`dumps` leaves to pydantic's dump and the JSON encoder."""


def dumps_plainly(model: type[BaseModel]) -> bool:
    """Whether the pydantic dump of ``model`` is its fields under their own names, unchanged
    (no aliases, serializers, computed fields, excluded or extra fields)."""
    d = model.__pydantic_decorators__
    if d.field_serializers or d.model_serializers or d.computed_fields:
        return False
    if model.model_config.get("extra") == "allow":
        return False
    return all(
        f.alias is None and f.serialization_alias is None and not f.exclude
        for f in model.model_fields.values()
    )


#: The view models a run hash holds, with their field names in sorted order.
PLAIN_MODELS: dict[type[BaseModel], list[str]] = {
    m: sorted(m.model_fields) for m in (Versions, Budget, Pause, Approval) if dumps_plainly(m)
}


def _key(key: Any) -> str:
    """A dict key as the dump (mode json) writes it: text as is, an int as its digits."""
    kind = type(key)
    if kind is int:
        return int.__repr__(key)
    if kind is str:
        return str(key)
    raise Unusual


def dumps(value: Any) -> str:  # noqa: PLR0911 - one return per kind of JSON value
    """``json.dumps(<dump of value>, separators=(",", ":"), sort_keys=True)``, or Unusual."""
    kind = type(value)
    if kind is str:
        return _quote(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return _digits(value)
    if kind is float:
        if not math.isfinite(value):
            raise Unusual
        return float.__repr__(value)
    # text and ints (nearly all of a run's nested values) inline, without a call each
    if kind is list:
        parts = [
            _quote(v) if type(v) is str else _digits(v) if type(v) is int else dumps(v)
            for v in value
        ]
        return "[" + ",".join(parts) + "]"
    if kind is dict:
        # a model's fields as a dict (budget, versions, a pause or an approval of the plain
        # fold): its keys, in the order they were set, name the same sorted order every time
        keys = tuple(value)
        order = None
        if keys and type(keys[0]) is str:
            order = _ORDERS.get(keys) or _order_of(keys)
        if order is not None:
            parts = [
                prefix
                + (
                    _quote(v)
                    if type(v) is str
                    else _digits(v)
                    if type(v) is int
                    else "null"
                    if v is None
                    else dumps(v)
                )
                for key, prefix in order
                for v in (value[key],)
            ]
            return "{" + ",".join(parts) + "}"
        items = sorted(
            [
                (k if type(k) is str else _digits(k) if type(k) is int else _key(k), v)
                for k, v in value.items()
            ]
        )
        # a run's dicts hold text, ints and None (budget, versions, digests): inline, no call
        parts = [
            _quote(k)
            + ":"
            + (
                _quote(v)
                if type(v) is str
                else _digits(v)
                if type(v) is int
                else "null"
                if v is None
                else dumps(v)
            )
            for k, v in items
        ]
        return "{" + ",".join(parts) + "}"
    names = PLAIN_MODELS.get(kind)
    if names is None:
        raise Unusual
    fields = value.__dict__
    parts = [
        f'"{n}":'
        + (
            _digits(v)
            if type(v) is int
            else _quote(v)
            if type(v) is str
            else "null"
            if v is None
            else dumps(v)
        )
        for n in names
        for v in (fields[n],)
    ]
    return "{" + ",".join(parts) + "}"


#: How many key orders :data:`_ORDERS` keeps (a run's dicts with text keys are its models'
#: fields, a handful of key sets; past this, such dicts are sorted each time as before).
_ORDERS_MAX = 256
#: A dict's keys (all exactly str, in the order they were set) -> each key with its quoted
#: text and ":", in the order ``sort_keys`` writes them. Dicts with any other key are never
#: cached (1 == True hashes alike; int keys sort by their digits; recent_digests' keys vary).
_ORDERS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}


def _order_of(keys: tuple[Any, ...]) -> tuple[tuple[str, str], ...] | None:
    """The write order of a dict with ``keys`` (cached while there is room), or None unless
    every key is exactly a str: for distinct text keys, the sort of (text, value) pairs above
    is the sort of the keys, whatever the values."""
    if not all(type(k) is str for k in keys):
        return None
    order = tuple((k, _quote(k) + ":") for k in sorted(keys))
    if len(_ORDERS) < _ORDERS_MAX:
        _ORDERS[keys] = order
    return order


_quote = encode_basestring_ascii
_digits = int.__repr__

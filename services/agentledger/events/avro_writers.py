"""Fast writers of current schemas: event to Avro body in one pass, the bytes fastavro writes.

:meth:`~agentledger.events.codec.EventCodec.encode` used to dump every event to a dict
(pydantic's ``model_dump``) and hand it to fastavro's ``schemaless_writer``, which walks the
schema for every record: the worker pays that for each of the four or five events of a step.
For every current schema this module generates one plain function (as :mod:`dataclasses`
generates ``__init__``, and as :mod:`agentledger.events.avro_fast` generates the readers) that
reads the event's fields in schema order straight from the instance and appends their Avro
binary encoding (zig-zag varints, length-prefixed UTF-8, little-endian doubles, one block per
non-empty array, union index 0 for null and 1 for the value).

A writer only ever answers for values whose encoding is certain: each value must be exactly
of the Python type its Avro type writes (``int`` for a long and within 64 bits, ``float`` for
a double, ``str``, ``bytes``, ``bool``, a ``list`` for an array). Anything else raises
:class:`NotFast` and the codec writes the event the old way (``model_dump`` and fastavro),
which writes the same bytes or raises the same error as before. The bytes are pinned against
fastavro's for every event kind by ``tests/unit/test_avro_writers.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from agentledger.events.avro_fast import NotFast
from agentledger.events.models import Event

#: What a writer returns: the Avro body of the event (without the single-object header).
Writer = Callable[[Event], bytes]

_PACK_DOUBLE = struct.Struct("<d").pack
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _long(n: int) -> bytes:
    """The zig-zag varint of ``n`` (a 64-bit signed value; the caller checked the range)."""
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return bytes((z,))
    out = []  # a list, then bytes(): cheaper than bytearray.append per byte
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


#: Zig-zag varints of small values, precomputed (lengths, seqs, fences, steps).
_SMALL = tuple(_long(n) for n in range(256))


def _long_of(n: Any) -> bytes:
    if type(n) is not int or not _LONG_MIN <= n <= _LONG_MAX:
        raise NotFast
    return _SMALL[n] if 0 <= n < 256 else _long(n)


def _emit_primitive(lines: list[str], indent: str, var: str, avro: str, out: str) -> None:
    """Lines appending the encoding of ``var`` (of Avro type ``avro``) to the list ``out``
    (an array's items)."""
    check = {"long": "int", "string": "str", "bytes": "bytes", "double": "float"}
    if avro == "boolean":
        lines += [
            f"{indent}if {var} is True:",
            f"{indent}    {out}.append(b'\\x01')",
            f"{indent}elif {var} is False:",
            f"{indent}    {out}.append(b'\\x00')",
            f"{indent}else:",
            f"{indent}    raise NotFast",
        ]
        return
    if avro not in check:
        raise NotFast
    lines.append(f"{indent}if type({var}) is not {check[avro]}:")
    lines.append(f"{indent}    raise NotFast")
    if avro == "long":
        lines.append(
            f"{indent}{out}.append(_SMALL[{var}] if 0 <= {var} < 256 else _long_of({var}))"
        )
    elif avro == "double":
        lines.append(f"{indent}{out}.append(_pack_double({var}))")
    else:
        data = f"{var}.encode()" if avro == "string" else var
        lines += [
            f"{indent}data = {data}",
            f"{indent}n = len(data)",
            f"{indent}{out}.append(_SMALL[n] if n < 256 else _long_of(n))",
            f"{indent}{out}.append(data)",
        ]


def _value_parts(lines: list[str], indent: str, var: str, avro: str, tag: str) -> list[str]:
    """Lines checking ``var`` (of Avro type ``avro``) and naming what its encoding needs; the
    expressions of its encoding's parts, in order (for the writer's one ``join``)."""
    check = {"long": "int", "string": "str", "bytes": "bytes", "double": "float"}
    if avro == "boolean":
        lines += [
            f"{indent}if {var} is True:",
            f"{indent}    b{tag} = b'\\x01'",
            f"{indent}elif {var} is False:",
            f"{indent}    b{tag} = b'\\x00'",
            f"{indent}else:",
            f"{indent}    raise NotFast",
        ]
        return [f"b{tag}"]
    if avro not in check:
        raise NotFast
    lines.append(f"{indent}if type({var}) is not {check[avro]}:")
    lines.append(f"{indent}    raise NotFast")
    if avro == "long":
        return [f"(_SMALL[{var}] if 0 <= {var} < 256 else _long_of({var}))"]
    if avro == "double":
        return [f"_pack_double({var})"]
    data = f"{var}.encode()" if avro == "string" else var
    lines += [f"{indent}d{tag} = {data}", f"{indent}n{tag} = len(d{tag})"]
    return [f"(_SMALL[n{tag}] if n{tag} < 256 else _long_of(n{tag}))", f"d{tag}"]


def _emit_field(lines: list[str], var: str, avro: Any, tag: str) -> list[str]:
    """Lines checking field value ``var`` and naming its encoding's parts; the expressions
    of those parts, in order. NotFast for a type not handled."""
    if isinstance(avro, str):
        return _value_parts(lines, "    ", var, avro, tag)
    if isinstance(avro, list) and len(avro) == 2 and avro[0] == "null":
        if not isinstance(avro[1], str):
            raise NotFast
        # two parts whichever branch: the union's index (with the value's length, if any),
        # then the value's own bytes (empty for null), so a long text is not copied twice
        inner: list[str] = []
        parts = _value_parts(inner, "        ", var, avro[1], tag)
        lines += [f"    if {var} is None:", f"        u{tag} = b'\\x00'", f"        w{tag} = b''"]
        lines += ["    else:", *inner]
        if len(parts) == 2:
            lines += [f"        u{tag} = b'\\x02' + {parts[0]}", f"        w{tag} = {parts[1]}"]
        else:
            lines += [f"        u{tag} = b'\\x02'", f"        w{tag} = {parts[0]}"]
        return [f"u{tag}", f"w{tag}"]
    if isinstance(avro, dict) and avro.get("type") == "array":
        items = avro.get("items")
        if not isinstance(items, str):
            raise NotFast
        lines += [
            f"    if type({var}) is not list:",
            "        raise NotFast",
            f"    if {var}:",
            f"        a = [_long_of(len({var}))]",
            f"        for item in {var}:",
        ]
        _emit_primitive(lines, "            ", "item", items, "a")
        lines += ["        a.append(b'\\x00')", f"        b{tag} = b''.join(a)", "    else:"]
        lines.append(f"        b{tag} = b'\\x00'")
        return [f"b{tag}"]
    raise NotFast


def writer_source(model: type[Event], schema: dict[str, Any]) -> str | None:
    """The source of ``model``'s writer for ``schema`` (a function ``write(event)``), or None
    when the schema's fields are not the model's, in order, or have a type not handled.

    The writer checks every field first, then joins every part of the encoding in one call
    (no list built a part at a time: DESIGN.md §13, session 19)."""
    fields = schema.get("fields")
    if not isinstance(fields, list) or [f["name"] for f in fields] != list(model.model_fields):
        return None
    decorators = model.__pydantic_decorators__
    if decorators.field_serializers or decorators.model_serializers:
        return None  # model_dump would not hand fastavro the instance's own values
    lines = ["def write(event):", "    values = event.__dict__"]
    parts: list[str] = []
    try:
        for i, f in enumerate(fields):
            var = f"v{i}"
            lines.append(f"    {var} = values[{f['name']!r}]")
            parts += _emit_field(lines, var, f["type"], str(i))
    except (NotFast, KeyError, TypeError):
        return None
    lines.append("    return b''.join((")
    lines += [f"        {part}," for part in parts]
    lines.append("    ))")
    return "\n".join(lines) + "\n"


def compile_writer(model: type[Event], schema: dict[str, Any]) -> Writer | None:
    """The fast writer of ``model`` events with ``schema``, or None (then: fastavro always).

    Only for a schema whose fields are the model's, in the model's order, with types this
    module writes: then the instance's ``__dict__`` holds exactly what ``model_dump`` would
    hand fastavro (flat values, no nested models, no serializers)."""
    source = writer_source(model, schema)
    if source is None:
        return None
    scope: dict[str, Any] = {
        "NotFast": NotFast,
        "_SMALL": _SMALL,
        "_long_of": _long_of,
        "_pack_double": _PACK_DOUBLE,
    }
    exec(compile(source, f"<avro writer {model.__name__}>", "exec"), scope)  # noqa: S102 - our own generated text
    writer: Writer = scope["write"]
    return writer

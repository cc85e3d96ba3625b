"""Fast readers of records written with a current schema: Avro body to checked event in one pass.

:class:`~agentledger.events.codec.EventCodec` decodes with fastavro and validates with pydantic;
both walk the schema at every record, which costs tens of microseconds per event on the
projector's and the rebuild's hot path. For every current schema this module generates one
plain function (as :mod:`dataclasses` generates ``__init__``) that reads the record's fields in
schema order, makes pydantic's checks that Avro does not (``Literal`` values, ``ge`` bounds),
and builds the model instance as ``model_validate`` would have built it.

A reader only ever answers when it is sure: the body is a canonical encoding of the schema,
consumed to its last byte, and every check passed. Anything else (a truncated or corrupt body,
a non-canonical varint or union index, a value out of bounds, trailing bytes) raises
:class:`NotFast`, and the codec decodes the record the full way, which gives the same event or
the same :class:`~agentledger.errors.DecodeError` as before. Models with validators of their
own get the dict and are validated by pydantic. Records of older writer schemas (resolution
needed) always go the full way.
"""

from __future__ import annotations

import hashlib
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

import annotated_types
from pydantic import BaseModel

from agentledger.events import models as _event_models
from agentledger.events.models import Event

#: What a reader returns: the event itself, or (for models with validators) the field dict.
Reader = Callable[[bytes], Any]

_PRIMITIVE = {"string": str, "long": int, "double": float, "boolean": bool, "bytes": bytes}


class NotFast(Exception):  # noqa: N818 - a signal to take the full path, not an error
    """The fast reader cannot vouch for this record: decode it the full way."""


#: What every reader's source starts with: its imports and helpers. A reader is this text plus
#: its own (:func:`reader_source`), exec'd at start-up or, when ``make venv`` compiled it with
#: mypyc, taken from :mod:`agentledger.events.avro_compiled` under the hash of the same text.
PRELUDE = """\
from typing import Any

import struct

from agentledger.events import models as _models
from agentledger.events.avro_fast import NotFast

_unpack_double = struct.Struct("<d").unpack_from
_set = object.__setattr__


def _varint(data: bytes, pos: int, first: int) -> tuple[int, int]:
    # the raw (not yet zig-zag decoded) varint whose first byte first was at pos - 1
    n = first & 0x7F
    shift = 7
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7
        if shift >= 63:  # beyond 9 bytes fastavro wraps at 64 bits: let it decide
            raise NotFast


def _new_event(cls: Any, fields: dict[str, Any], names: frozenset[str]) -> Any:
    # an instance of cls with fields already checked, as model_validate leaves it
    obj = cls.__new__(cls)
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", set(names))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj
"""

_PY_NAME = {"string": "str", "long": "int", "double": "float", "boolean": "bool", "bytes": "bytes"}


class _Source:
    """The generated source of one reader, line by line, with a counter for fresh names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.declared: dict[str, str] = {"x": "int", "n": "int", "e": "int"}
        self._n = 0

    def fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def declare(self, var: str, annotation: str) -> None:
        # every local gets one declared type up front, so mypyc compiles the text as it is
        self.declared[var] = annotation

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def long(self, indent: int, var: str) -> None:
        self.emit(indent, "x = b[p]")
        self.emit(indent, "p += 1")
        self.emit(indent, "if x > 127:")
        self.emit(indent + 1, "x, p = _varint(b, p, x)")
        self.emit(indent, f"{var} = (x >> 1) ^ -(x & 1)")

    def sized(self, indent: int, var: str, *, text: bool) -> None:
        self.long(indent, "n")
        self.emit(indent, "e = p + n")
        self.emit(indent, "if n < 0 or e > end:")
        self.emit(indent + 1, "raise NotFast")
        self.emit(indent, f"{var} = b[p:e].decode()" if text else f"{var} = b[p:e]")
        self.emit(indent, "p = e")

    def primitive(self, indent: int, var: str, avro: str) -> None:
        if avro == "long":
            self.long(indent, var)
        elif avro in ("string", "bytes"):
            self.sized(indent, var, text=avro == "string")
        elif avro == "double":
            self.emit(indent, "if p + 8 > end:")
            self.emit(indent + 1, "raise NotFast")
            self.emit(indent, f"({var},) = _unpack_double(b, p)")
            self.emit(indent, "p += 8")
        elif avro == "boolean":
            self.emit(indent, "x = b[p]")
            self.emit(indent, "p += 1")
            self.emit(indent, "if x > 1:")
            self.emit(indent + 1, "raise NotFast")
            self.emit(indent, f"{var} = x == 1")
        else:
            raise NotFast

    def value(self, indent: int, var: str, avro: Any) -> None:
        if isinstance(avro, str):
            self.declare(var, _PY_NAME[avro])
            self.primitive(indent, var, avro)
        elif isinstance(avro, list) and len(avro) == 2 and avro[0] == "null":
            if not isinstance(avro[1], str):
                raise NotFast
            self.declare(var, f"{_PY_NAME[avro[1]]} | None")
            # the union index, canonical zig-zag: 0 is null, 1 (byte 2) is the value
            self.emit(indent, "x = b[p]")
            self.emit(indent, "p += 1")
            self.emit(indent, "if x == 0:")
            self.emit(indent + 1, f"{var} = None")
            self.emit(indent, "elif x == 2:")
            self.primitive(indent + 1, var, avro[1])
            self.emit(indent, "else:")
            self.emit(indent + 1, "raise NotFast")
        elif isinstance(avro, dict) and avro.get("type") == "array":
            items = avro["items"]
            if not isinstance(items, str):
                raise NotFast
            item, count = self.fresh("i"), self.fresh("k")
            self.declare(var, f"list[{_PY_NAME[items]}]")
            self.declare(item, _PY_NAME[items])
            self.declare(count, "int")
            self.emit(indent, f"{var} = []")
            self.long(indent, count)
            self.emit(indent, f"while {count}:")
            self.emit(indent + 1, f"if {count} < 0:")
            self.emit(indent + 2, "raise NotFast")
            self.emit(indent + 1, f"for _ in range({count}):")
            self.primitive(indent + 2, item, items)
            self.emit(indent + 2, f"{var}.append({item})")
            self.long(indent + 1, count)
        else:
            raise NotFast


def _python_type(avro: Any) -> Any:
    """The Python annotation a field of Avro type ``avro`` must have for no conversion."""
    if isinstance(avro, str):
        return _PRIMITIVE[avro]
    if isinstance(avro, list):
        return _python_type(avro[1]) | None
    return list[_python_type(avro["items"])]  # type: ignore[misc]


def _plain(annotation: Any) -> tuple[Any, frozenset[Any] | None]:
    """``annotation`` with Literal[...] replaced by its base type, and the literal values."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        kinds = {type(a) for a in args}
        if kinds != {str}:
            raise NotFast
        return str, frozenset(args)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1 or len(args) != 2:
            raise NotFast
        base, allowed = _plain(inner[0])
        return (base | None), (None if allowed is None else allowed | {None})
    return annotation, None


def _checks(src: _Source, var: str, field: Any, avro: Any) -> None:
    """The pydantic checks of one field that its Avro type does not make."""
    base, allowed = _plain(field.annotation)
    if base != _python_type(avro):
        raise NotFast  # a conversion pydantic would make: leave this model to pydantic
    if allowed is not None:
        # the values as literals in sorted order: the same text (and hash) in every process
        values = ", ".join(repr(a) for a in sorted(a for a in allowed if a is not None))
        guard = f"{var} is not None and " if None in allowed else ""
        src.emit(1, f"if {guard}{var} not in {{{values}}}:")
        src.emit(2, "raise NotFast")
    for meta in field.metadata:
        if not isinstance(meta, annotated_types.Ge) or not isinstance(meta.ge, int):
            raise NotFast
        guard = f"{var} is not None and " if isinstance(avro, list) else ""
        src.emit(1, f"if {guard}{var} < {meta.ge!r}:")
        src.emit(2, "raise NotFast")


def _has_validators(model: type[BaseModel]) -> bool:
    d = model.__pydantic_decorators__
    return bool(
        d.validators
        or d.field_validators
        or d.root_validators
        or d.model_validators
        or model.__pydantic_post_init__
    )


def reader_name(model: type[Event]) -> str:
    """The name of the function :func:`reader_source` defines for ``model``."""
    return f"read_{model.__name__}"


def reader_source(model: type[Event], schema: dict[str, Any], offset: int) -> str | None:
    """The source of the fast reader of bodies (from ``offset``) written with ``schema`` for
    ``model`` (to follow :data:`PRELUDE`), or None if the model or schema has anything this
    module does not handle (then: the full path)."""
    fields = schema["fields"]
    names = [f["name"] for f in fields]
    if names != list(model.model_fields) or model.model_config.get("strict"):
        return None
    if getattr(_event_models, model.__name__, None) is not model:
        return None  # the text names the model through agentledger.events.models
    src = _Source()
    variables = [f"v{i}" for i in range(len(names))]
    try:
        for var, f in zip(variables, fields, strict=True):
            src.value(1, var, f["type"])
        src.emit(1, "if p != end:")
        src.emit(2, "raise NotFast")
        validated = _has_validators(model)
        if not validated:
            for var, f in zip(variables, fields, strict=True):
                _checks(src, var, model.model_fields[f["name"]], f["type"])
    except (NotFast, KeyError, TypeError):
        return None
    kind, name = model.__name__, reader_name(model)
    record = ", ".join(f"{n!r}: {v}" for n, v in zip(names, variables, strict=True))
    if validated:
        src.emit(1, f"return {{{record}}}")
    else:
        src.emit(1, f"return _new_event(_model_{kind}, {{{record}}}, _names_{kind})")
    declared = [f"    {v}: {t}" for v, t in src.declared.items()]
    lines = [
        "",
        "",
        f"_model_{kind} = _models.{kind}",
        f"_names_{kind} = frozenset({tuple(names)!r})",
        "",
        "",
        f"def {name}(b: bytes) -> object:",
        "    end = len(b)",
        f"    p = {offset}",
        *declared,
        *src.lines,
    ]
    return "\n".join(lines) + "\n"


def source_hash(source: str) -> str:
    """The key of a reader's compiled function: the hash of the whole text it was made from."""
    return hashlib.sha256((PRELUDE + source).encode()).hexdigest()


def compile_reader(
    model: type[Event], schema: dict[str, Any], offset: int, *, compiled: bool = True
) -> Reader | None:
    """A fast reader of bodies (from ``offset``) written with ``schema`` for ``model``, or None
    (then: the full path). The compiled function of the same text when one was built (see
    :mod:`agentledger.events.avro_compiled`) and ``compiled``, else the text exec'd."""
    source = reader_source(model, schema, offset)
    if source is None:
        return None
    if compiled:
        from agentledger.events import avro_compiled  # noqa: PLC0415 - it imports this module

        built = avro_compiled.readers().get(source_hash(source))
        if built is not None:
            return built
    scope: dict[str, Any] = {}
    code = compile(PRELUDE + source, f"<avro reader {model.__name__}>", "exec")
    exec(code, scope)  # noqa: S102 - our own generated text (see reader_source)
    reader: Reader = scope[reader_name(model)]
    return reader


#: What a fast reader may raise for a body it cannot vouch for (the full path then decides).
DOUBTS: tuple[type[Exception], ...] = (NotFast, IndexError, UnicodeDecodeError, struct.error)

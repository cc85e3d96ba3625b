"""How a RunView is laid out in hashes: pure encode/decode shared by every view store.

The run hash holds the scalar fields (plain strings as-is, everything else compact JSON) plus
``_parked`` (how many events wait ahead of a gap, plus one while ``_dropped_from`` is set) and
``_dropped_from`` (0, or the lowest seq of the parked events dropped over the cap: the run's log
must be re-read from there); ``applied_seq`` and ``_parked`` together are the token a writer
compares before it replaces the run, so dropping events over the cap moves the token too.
Steps and effects live in their own hashes, one field per step index / idempotency key, so a
batch writes only what it touched. Their values are the model's JSON without the fields at their
defaults; a long one is stored packed (views/packing.py: its hex as bytes, the rest deflated
with a preset dictionary; a step's result is most of a view's bytes). A value written before
(the full JSON, or deflated behind its mark) reads the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

from pydantic import TypeAdapter

from agentledger.views import plain_json
from agentledger.views.model import (
    PLACE_SHIFT,
    PLACE_STATES,
    EffectPlace,
    EffectView,
    RunView,
    StepView,
)
from agentledger.views.packing import (
    PLACED,
    many_without_hex,
    pack,
    place_of,
    placed_text,
    unpack,
    with_place,
    without_hex,
)
from agentledger.views.records import Records

PARKED_FIELD = "_parked"
DROPPED_FIELD = "_dropped_from"
_SPLIT_FIELDS = frozenset({"steps", "effects"})
_RUN_FIELDS: tuple[str, ...] = tuple(n for n in RunView.model_fields if n not in _SPLIT_FIELDS)
_RUN_FIELD_SET = set(_RUN_FIELDS)
_PLAIN_STR = frozenset(n for n in _RUN_FIELDS if RunView.model_fields[n].annotation is str)
_RUN_VALIDATOR = RunView.__pydantic_validator__
#: Each run hash field with whether its value is stored as the plain string it is.
_RUN_ENCODING: tuple[tuple[str, bool], ...] = tuple((n, n in _PLAIN_STR) for n in _RUN_FIELDS)
_digits = int.__repr__
_STEP_VALIDATOR = StepView.__pydantic_validator__
_EFFECT_VALIDATOR = EffectView.__pydantic_validator__
_PLACE_VALIDATOR = EffectPlace.__pydantic_validator__
_PLACES_VALIDATOR = TypeAdapter(list[EffectPlace])
_STATE_CODE = {state: str(n) for n, state in enumerate(PLACE_STATES)}

#: (applied_seq, parked count) of a stored run; None = nothing stored.
Token = tuple[int, int] | None


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def _json(value: Any) -> bytes:
    """Compact JSON, byte for byte what ``json.dumps(separators, sort_keys)`` gives; the common
    scalars skip the encoder (``json.dumps`` with options builds a new one every call)."""
    kind = type(value)
    if kind is int:
        return str(value).encode()
    if value is None:
        return b"null"
    if kind is bool:
        return b"true" if value else b"false"
    return _ENCODER.encode(value).encode()


def token_for(applied_seq: int, parked: int, dropped_from: int = 0) -> tuple[int, int]:
    """The token of a run with ``parked`` events stored and ``dropped_from`` (0: none dropped):
    the drop marker counts as one more parked entry."""
    return applied_seq, parked + (1 if dropped_from else 0)


def encode_run_values(
    values: Mapping[str, Any], parked: int, dropped_from: int = 0
) -> dict[str, bytes]:
    """The run hash of a view's field values (``view.__dict__``, or the plain values a rebuild
    folds, views/bulk_fold.py); raises plain_json.Unusual for a value it is not sure of."""
    # plain strings as they are, ints as their digits, None as null, the rest through
    # plain_json.dumps (a loop: ~1 us a run less than the comprehension it replaced)
    fields: dict[str, bytes] = {}
    dumps = plain_json.dumps
    for name, plain in _RUN_ENCODING:
        value = values[name]
        if plain:
            fields[name] = value.encode()
        elif type(value) is int:
            fields[name] = _digits(value).encode()
        elif value is None:
            fields[name] = b"null"
        else:
            fields[name] = dumps(value).encode()
    fields[PARKED_FIELD] = str(token_for(0, parked, dropped_from)[1]).encode()
    fields[DROPPED_FIELD] = str(dropped_from).encode()
    return fields


def encode_run(view: RunView, parked: int, dropped_from: int = 0) -> dict[str, bytes]:
    """The run hash of ``view`` with ``parked`` events waiting (and dropped from a seq)."""
    try:
        return encode_run_values(view.__dict__, parked, dropped_from)
    except plain_json.Unusual:
        data = view.model_dump(mode="json", include=_RUN_FIELD_SET)
        fields = {
            name: (data[name].encode() if name in _PLAIN_STR else _json(data[name]))
            for name in _RUN_FIELDS
        }
    fields[PARKED_FIELD] = str(token_for(0, parked, dropped_from)[1]).encode()
    fields[DROPPED_FIELD] = str(dropped_from).encode()
    return fields


def encode_step(step: StepView) -> bytes:
    """One field value of the steps hash."""
    return pack(step.model_dump_json(exclude_defaults=True).encode())


def encode_effect(effect: EffectView) -> bytes:
    """One field value of the effects hash: led by its place (step, ordinal, state), which a
    resume reads of every effect without decoding the rest (:func:`_decode_places`)."""
    json_ = effect.model_dump_json(exclude_defaults=True).encode()
    return placed(effect.step, effect.ordinal, effect.state, pack(json_))


def placed(step: int, ordinal: int, state: str, value: bytes) -> bytes:
    """An effect's stored ``value`` led by its place (``step,ordinal,state code``): what every
    writer of effect values (this module, the rebuild's plain fold) stores."""
    return with_place(f"{step},{ordinal},{_STATE_CODE[state]}".encode(), value)


def _led_place(key: str, data: bytes | str) -> dict[str, Any] | None:
    """The fields of the place leading a stored effect value, to validate (None for a value
    written before places led them, or a memory store's text); ValueError (IndexError too) if
    the place does not read."""
    if not isinstance(data, bytes):
        return None
    led = place_of(data)
    if led is None:
        return None
    step, ordinal, code = led.split(b",")
    if not code.isdigit():
        msg = f"effect {key!r}: the state code {code!r} of its place is not a code"
        raise ValueError(msg)
    return {
        "idempotency_key": key,
        "step": int(step),
        "ordinal": int(ordinal),
        "state": PLACE_STATES[int(code)],
    }


_PART_MODELS: dict[str, type[StepView] | type[EffectView]] = {
    "steps": StepView,
    "effects": EffectView,
}


def same_value(part: str, a: object, b: object) -> bool:
    """Whether two stored values of a run's ``part`` hash hold the same thing: equal, or a step
    or effect encoded two ways (a value written before deflating and default-less JSON)."""
    if a == b:
        return True
    model = _PART_MODELS.get(part)
    if model is None or not isinstance(a, bytes | str) or not isinstance(b, bytes | str):
        return False
    return model.model_validate_json(unpack(a)) == model.model_validate_json(unpack(b))


def token_of(run_hash: dict[bytes, bytes] | dict[str, bytes]) -> Token:
    """The (applied_seq, parked) token of a stored run hash; None if the hash is empty."""
    if not run_hash:
        return None
    return int(_field(run_hash, "applied_seq")), int(_field(run_hash, PARKED_FIELD))


def dropped_of(run_hash: dict[bytes, bytes] | dict[str, bytes]) -> int:
    """The lowest dropped parked seq of a stored run hash (0: none; absent in older hashes)."""
    return int(_field(run_hash, DROPPED_FIELD))


def token_args(token: Token) -> tuple[bytes, bytes]:
    """The token as the two script arguments the run script compares (empty = no run)."""
    if token is None:
        return b"", b""
    return str(token[0]).encode(), str(token[1]).encode()


def _field(run_hash: dict[bytes, bytes] | dict[str, bytes], name: str) -> bytes:
    """One field of a run hash whose keys are bytes (Redis) or str (memory); "0" if absent."""
    keyed: dict[Any, bytes] = run_hash
    found = keyed.get(name.encode())
    return keyed.get(name, b"0") if found is None else found


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def decode_run(
    run_hash: dict[Any, bytes],
    steps: dict[Any, bytes],
    effects: dict[Any, bytes],
    *,
    only: Collection[str] | None = None,
) -> RunView:
    """Rebuild the view from its three hashes (unknown fields of newer writers are ignored).

    The run hash's values are JSON already (plain strings aside): they are spliced into one
    JSON document that pydantic parses and validates in one call. Steps and effects are kept
    as stored and each is validated when first read (:class:`~agentledger.views.records.
    Records`): a resume reads a few of a long run's steps, a projector batch those it folds.

    ``only`` names the run fields a reader needs (the others keep their defaults, as if
    unset): a brief view for reading, never to fold onto or write back. Pass ``steps`` empty
    to leave them out too.
    """
    parts: list[str] = []
    if only is not None:
        for name in only:
            raw = run_hash.get(name.encode(), run_hash.get(name))
            if raw is not None and name in _RUN_FIELD_SET:
                value = _text(raw)
                parts.append(f"{_quote(name)}:" + (_quote(value) if name in _PLAIN_STR else value))
    else:
        for raw_name, raw_value in run_hash.items():
            field = _SPLICE.get(raw_name)
            if field is None:
                continue
            prefix, plain = field
            value = _text(raw_value)
            parts.append(prefix + (_quote(value) if plain else value))
    view: RunView = _RUN_VALIDATOR.validate_json("{" + ",".join(parts) + "}")
    fields = view.__dict__
    if steps:
        fields["steps"] = Records.stored({int(k): v for k, v in steps.items()}, _decode_step)
        view.__pydantic_fields_set__.add("steps")
    if effects:
        fields["effects"] = Records.stored(
            {_text(k): v for k, v in effects.items()}, _decode_effect, _decode_places
        )
        view.__pydantic_fields_set__.add("effects")
    return view


def _decode_step(data: bytes | str) -> StepView:
    step: StepView = _STEP_VALIDATOR.validate_json(unpack(data))
    return step


def _decode_effect(data: bytes | str) -> EffectView:
    effect: EffectView = _EFFECT_VALIDATOR.validate_json(unpack(data))
    return effect


_LEAD_FROM = len(PLACED)
_ORDINALS = 1 << 32
#: An effect's place as a resume reads it: (idempotency key, step, ordinal, state).
Place = tuple[str, int, int, str]


def _decode_places(keys: list[str], values: list[bytes | str]) -> list[object]:
    """The places (:data:`Place` tuples, or packed ints: :func:`_led_places`) of the effects
    stored as ``values`` under ``keys``,
    as :func:`_decode_place` reads each: straight from the places leading the values when
    every value is led by one (no model is made: a resume reads a 1,000-effect run's places
    before it is ready), else in one regex pass and one validation (a value that is not
    hex-packed goes in as its JSON, which holds no ``\x01``); if a lead or a value does not
    read that way, each is read by :func:`_decode_place`, which raises for a corrupt one."""
    try:
        led = _led_places(keys, values)
    except (ValueError, IndexError):
        return [_as_place(_decode_place(k, v)) for k, v in zip(keys, values, strict=True)]
    if led is not None:
        return led
    texts: list[bytes] = []
    packed: list[bool] = []
    try:
        for data in values:
            text = placed_text(data) if isinstance(data, bytes) else None
            packed.append(text is not None)
            texts.append(unpack(data).encode() if text is None else text)
        places: list[EffectPlace] = _PLACES_VALIDATOR.validate_json(many_without_hex(texts))
    except ValueError:
        return [_as_place(_decode_place(k, v)) for k, v in zip(keys, values, strict=True)]
    # a hex-packed value's key is the hash's, as _decode_place sets it (its text lost its hex)
    return [
        (key, p.step, p.ordinal, p.state) if hexed else _as_place(p)
        for p, key, hexed in zip(places, keys, packed, strict=True)
    ]


def _led_places(keys: list[str], values: list[bytes | str]) -> list[object] | None:
    """The place leading each stored value, as :func:`_led_place` reads it and the place's
    validation gives it, without either (no dict, no model): packed in one int
    (``model.PLACE_SHIFT``) when its step is 0 or more and its ordinal in [0, 2**32), else a
    :data:`Place` tuple; None when a value is not led by a place (written before places led
    them, or a memory store's text). ValueError (or IndexError) if a lead does not read,
    whether or not another value is led. No object per place for the collector: a resume reads
    a 1,000-effect run's places before it is ready (DESIGN.md §13, "Resume, session 20")."""
    found: list[object] = []
    append = found.append
    states = PLACE_STATES
    codes = len(states)
    every = True
    for key, data in zip(keys, values, strict=True):
        if not isinstance(data, bytes) or not data.startswith(PLACED):
            every = False
            continue
        end = data.find(b"\x00", _LEAD_FROM)
        if end < 0:
            msg = "a placed view value has no end to its place"
            raise ValueError(msg)
        step_text, ordinal_text, code_text = data[_LEAD_FROM:end].split(b",")
        if not code_text.isdigit():
            msg = f"effect {key!r}: the state code {code_text!r} of its place is not a code"
            raise ValueError(msg)
        step, ordinal, code = int(step_text), int(ordinal_text), int(code_text)
        if code >= codes:
            msg = f"effect {key!r}: no state has the code {code} of its place"
            raise IndexError(msg)
        if step >= 0 and 0 <= ordinal < _ORDINALS:
            append((step << 32 | ordinal) << PLACE_SHIFT | code)
        else:
            append((key, step, ordinal, states[code]))
    return found if every else None


def _as_place(place: EffectPlace) -> Place:
    return place.idempotency_key, place.step, place.ordinal, place.state


def _decode_place(key: str, data: bytes | str) -> EffectPlace:
    """The place and state of the effect stored under ``key`` (its idempotency key: the fold
    keys effects by it). A hex-packed value is read without its hex runs, none of which is in
    a field a place reads (key aside, taken from the hash); a value that does not read that
    way is decoded whole."""
    if isinstance(data, bytes):
        try:
            led = _led_place(key, data)
            if led is not None:
                one: EffectPlace = _PLACE_VALIDATOR.validate_python(led)
                return one
            text = without_hex(data)
            if text is not None:
                place: EffectPlace = _PLACE_VALIDATOR.validate_json(text)
                place.idempotency_key = key
                return place
        except (ValueError, IndexError):
            pass  # decoded whole below, which raises if the value is corrupt
    whole: EffectPlace = _PLACE_VALIDATOR.validate_json(unpack(data))
    return whole


_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii
#: Run hash field (bytes or str) -> its ``"name":`` in the spliced document, and whether its
#: value is a plain string (to be quoted) rather than JSON.
_SPLICE: dict[Any, tuple[str, bool]] = {
    key: (f"{_quote(name)}:", name in _PLAIN_STR)
    for name in _RUN_FIELDS
    for key in (name, name.encode())
}

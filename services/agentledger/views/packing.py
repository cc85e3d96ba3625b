"""How a steps or effects value is packed in its hash: JSON, or a marked compressed form.

A value is the model's JSON (views/layout.py). One of :data:`PACK_MIN_BYTES` or more is
stored as the shortest of three, each told apart by its first bytes (JSON never starts with a
NUL, DESIGN.md §18):

- the JSON itself;
- :data:`DEFLATED` + raw DEFLATE of the JSON (session 7; written now only when the JSON holds
  a ``\\x01``, which compact JSON never does, or when its hex is repetitive);
- :data:`HEXPACKED` + raw DEFLATE, with the preset dictionary :data:`DICTIONARY`, of the JSON
  in which every run of :data:`HEX_MIN` or more lowercase hex digits (digests, keys, hex
  results) is replaced by ``\\x01`` + the varint of its byte count, followed by the bytes of
  every such run, in order. Hex carries 4 bits a character and DEFLATE leaves it at about 4.5
  once mixed with text; the bytes carry it at 4. The dictionary holds the field names and
  common values of the view's own models, so a value does not spell them out again.

An effect's value is written (session 15) as :data:`PLACED` + its place (``step,ordinal,state``
in ASCII) + a NUL + the value in one of the forms above, so a resume reads every effect's place
from the first bytes of its value without inflating it (views/layout.py, DESIGN.md §13).

Never change :data:`DICTIONARY` or the layout of a mark: values written with them must read
(a new form takes a new mark). tests/unit/test_view_packing.py pins both.
"""

from __future__ import annotations

import re
import zlib
from binascii import hexlify, unhexlify

#: A value at least this long is stored compressed.
PACK_MIN_BYTES = 256
#: The mark of a deflated value (session 7): JSON never starts with a NUL byte.
DEFLATED = b"\x00z"
#: The mark of a hex-packed value.
HEXPACKED = b"\x00h"
#: The mark of an effect value led by its place: PLACED + b"step,ordinal,state" + NUL + value.
PLACED = b"\x00p"
#: The shortest run of hex digits stored as bytes (shorter runs stay text: a placeholder and
#: its count cost about what DEFLATE saves on them).
HEX_MIN = 24
_PLACEHOLDER = b"\x01"
#: Random bytes of a digest or key take most byte values (512 of them about 220); hex whose
#: bytes take fewer than half their count, or than this, is repetitive.
_DISTINCT_BYTES = 128
# Level 1: hex and prose compress about as well as at 6, in less CPU.
_LEVEL = 1
_HEX_RUN = re.compile(rb"[0-9a-f]{%d,}" % HEX_MIN)
#: A placeholder and its varint (continuation bytes have the top bit set, the last one not).
_PLACED_RUN = re.compile(rb"\x01[\x80-\xff]*[\x00-\x7f]")

#: The preset dictionary of :data:`HEXPACKED` values: the JSON of the view models' fields
#: (StepView, ActivityView, CheckView, EffectView in views/model.py) as they are written,
#: the most common last (DEFLATE finds nearer matches for fewer bits). Never change it.
DICTIONARY = (
    b'"graph":{"checkpoint_id":"'
    b'"result_ref_uri":"","result_ref_hash":"sha256:\x01"'
    b'"source_uri":"","content_hash":"\x01","read_at":'
    b'"tokens":,"usd":0.'
    b'"last_reason":"","inherited":true'
    b'"status":"rejected""status":"started"'
    b'"activities":{"0":{"ordinal":0,"name":"","kind":"","result_json":"'
    b'"checks":[{"check":"","passed":false,"detail":""}]'
    b'"state":"compensated","compensation_key":"","compensation_ref":"'
    b'"state":"intended""state":"unknown""state":"landed""state":"not_landed""state":"failed"'
    b'"error":"","detail":"'
    b'{"idempotency_key":"al1-\x01","step":,"ordinal":0,"effect":"","provider":"","kind":"",'
    b'"identity_hash":"hmac-sha256:\x01","payload_hash":"hmac-sha256:\x01",'
    b'"request_json":"{\\"identity\\":{\\"\\":\\"\\"},\\"free_text\\":{\\"\\":\\"\x01\\"}}",'
    b'"state":"succeeded","external_ref":"","response_hash":"\x01",'
    b'"intended_at":,"resolved_at":}'
    b'{"step":,"name":"","status":"checkpointed","attempts":1,"result_json":"{\\"'
)

# The packer's window and memory: what is left of a value once its hex is out is a few
# hundred bytes, and setting up DEFLATE's largest window (-15, memLevel 8) costs more CPU than
# compressing them. Any window decodes with the largest.
_WBITS = -12
_MEM_LEVEL = 4


#: A packer with the dictionary already set: each value's packer is a copy of it (the same
#: state as a fresh packer given the dictionary, so the same bytes, without hashing the
#: dictionary into a new packer each time).
_PRIMED = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zdict=DICTIONARY)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _hexpacked(data: bytes) -> bytes | None:
    """``data`` in the :data:`HEXPACKED` form (without its mark), or None when its hex is
    repetitive (few distinct bytes: DEFLATE alone stores it in less)."""
    text: list[bytes] = []
    runs: list[bytes] = []
    pos = 0
    for m in _HEX_RUN.finditer(data):
        start, end = m.span()
        even = start + ((end - start) & ~1)
        runs.append(unhexlify(data[start:even]))
        text.append(data[pos:start])
        text.append(_PLACEHOLDER + _varint((even - start) >> 1))
        pos = even
    text.append(data[pos:])
    raw = b"".join(runs)
    if len(set(raw)) < min(len(raw) >> 1, _DISTINCT_BYTES):
        return None
    packer = _PRIMED.copy()
    return packer.compress(b"".join(text)) + packer.flush() + raw


def pack(data: bytes) -> bytes:
    """The stored form of a steps or effects value whose JSON is ``data``: the shortest."""
    if len(data) < PACK_MIN_BYTES:
        return data
    # not compact JSON (its text could not tell runs apart), or repetitive hex: deflated
    body = None if _PLACEHOLDER in data else _hexpacked(data)
    packed = DEFLATED + zlib.compress(data, _LEVEL, wbits=-15) if body is None else HEXPACKED + body
    return packed if len(packed) < len(data) else data


def _unhexed(body: bytes) -> bytes:
    """The JSON of a :data:`HEXPACKED` value's body."""
    unpacker = zlib.decompressobj(-15, zdict=DICTIONARY)
    text = unpacker.decompress(body)
    if not unpacker.eof:
        msg = "a hex-packed view value ends inside its text"
        raise ValueError(msg)
    raw = unpacker.unused_data
    parts: list[bytes] = []
    pos = taken = 0
    while (found := text.find(_PLACEHOLDER, pos)) >= 0:
        parts.append(text[pos:found])
        pos, count, shift = found + 1, 0, 0
        while True:
            byte = text[pos]
            pos += 1
            count |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        parts.append(hexlify(raw[taken : taken + count]))
        taken += count
    if taken != len(raw):
        msg = "a hex-packed view value's bytes do not match its text"
        raise ValueError(msg)
    parts.append(text[pos:])
    return b"".join(parts)


def without_hex(value: bytes) -> bytes | None:
    """The JSON of a :data:`HEXPACKED` value with every hex run left out (the strings that held
    one are shorter), or None for a value in another form: what reads only a value's fields
    that are no hex (an effect's place and state) skips restoring the runs."""
    text = placed_text(value)
    return None if text is None else _PLACED_RUN.sub(b"", text)


def many_without_hex(texts: list[bytes]) -> bytes:
    """``b"[" + b",".join(texts) + b"]"`` with every hex run left out, where each text is a
    :func:`placed_text` (one regex pass for them all: a placeholder never ends a JSON text)."""
    return _PLACED_RUN.sub(b"", b"[" + b",".join(texts) + b"]")


def with_place(place: bytes, value: bytes) -> bytes:
    """``value`` (stored form) led by ``place`` (``step,ordinal,state``: no NUL in it)."""
    return PLACED + place + b"\x00" + value


def place_of(value: bytes) -> bytes | None:
    """The place leading a :data:`PLACED` value (``step,ordinal,state``), or None for a value
    in another form."""
    end = _place_end(value)
    return None if end is None else value[len(PLACED) : end]


def _unplaced(value: bytes) -> bytes:
    """A value without the place that leads it, if one does."""
    end = _place_end(value)
    return value if end is None else value[end + 1 :]


def _place_end(value: bytes) -> int | None:
    """Where the place leading a :data:`PLACED` value ends (its NUL), or None for a value in
    another form."""
    if not value.startswith(PLACED):
        return None
    end = value.find(b"\x00", len(PLACED))
    if end < 0:
        msg = "a placed view value has no end to its place"
        raise ValueError(msg)
    return end


def placed_text(value: bytes) -> bytes | None:
    """The JSON of a :data:`HEXPACKED` value (led by its place or not) with its hex runs still
    as placeholders, or None for a value in another form."""
    value = _unplaced(value)
    if not value.startswith(HEXPACKED):
        return None
    unpacker = zlib.decompressobj(-15, zdict=DICTIONARY)
    try:
        text = unpacker.decompress(value[len(HEXPACKED) :])
    except zlib.error as e:
        msg = f"a packed view value is corrupt: {e}"
        raise ValueError(msg) from e
    if not unpacker.eof:
        msg = "a hex-packed view value ends inside its text"
        raise ValueError(msg)
    return text


def unpack(value: bytes | str) -> str:
    """The JSON text of a stored steps or effects value, in any of its forms (memory stores
    keep str)."""
    if isinstance(value, str):
        return value
    value = _unplaced(value)
    try:
        if value.startswith(HEXPACKED):
            return _unhexed(value[len(HEXPACKED) :]).decode()
        if value.startswith(DEFLATED):
            return zlib.decompress(value[len(DEFLATED) :], wbits=-15).decode()
    except zlib.error as e:
        msg = f"a packed view value is corrupt: {e}"
        raise ValueError(msg) from e
    return value.decode()

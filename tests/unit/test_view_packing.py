"""A steps or effects value packs its hex as bytes and the rest with a preset dictionary, reads
back byte for byte whatever the JSON holds, and the forms written before still read."""

from __future__ import annotations

import hashlib
import json
import random
import zlib

import pytest

from agentledger.views.packing import (
    DEFLATED,
    DICTIONARY,
    HEX_MIN,
    HEXPACKED,
    PACK_MIN_BYTES,
    pack,
    unpack,
)

# An effect's JSON packed by this format's first writer (session 8): a reader must always read it.
GOLDEN_JSON = (
    b'{"idempotency_key":"al1-notify-s3-o0-0123456789abcdef0123456789abcdef","step":3,'
    b'"ordinal":0,"effect":"notify","provider":"sandbox","kind":"emails","identity_hash":'
    b'"hmac-sha256:'
    + b"0f1e2d3c4b5a6978" * 4
    + b'","payload_hash":"hmac-sha256:'
    + b"89abcdef01234567" * 4
    + b'","state":"succeeded","external_ref":"em_1","intended_at":1}'
)
GOLDEN_PACKED = bytes.fromhex(
    "0068c315f4c028cc4cabd42d36d6cd37d06514009b0fb2d118474c40d4039521c54731300924e5570005a1d1"
    "929a0b8cef62201f1696300fa384be02c8143cb1039227225c5373e30d41562187a3612d0001234567"
    "89abcdef0123456789abcdef0f1e2d3c4b5a69780f1e2d3c4b5a69780f1e2d3c4b5a69780f1e2d3c4b5a6978"
    "89abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234567"
)


def test_the_dictionary_never_changes() -> None:
    """The preset dictionary is the one values were written with (a change needs a new mark)."""
    assert hashlib.sha256(DICTIONARY).hexdigest() == (
        "365ff97827422beac8a16acbdb35ab64fb25fe67c10fde02f240b8e252b3ee7a"
    )


def test_a_value_packed_by_the_first_writer_still_reads() -> None:
    """Bytes written in the hex-packed form decode to the JSON they were made from."""
    assert unpack(GOLDEN_PACKED).encode() == GOLDEN_JSON


def test_a_deflated_value_of_session_7_still_reads() -> None:
    """A value stored as raw DEFLATE behind the older mark decodes as before."""
    text = json.dumps({"step": 1, "result_json": "x" * 400}).encode()
    assert unpack(DEFLATED + zlib.compress(text, 1, wbits=-15)) == text.decode()


def test_short_json_is_stored_as_it_is() -> None:
    """A value under the threshold, hex or not, is its JSON unchanged."""
    short = b'{"step":0,"name":"' + b"ab" * 40 + b'"}'
    assert len(short) < PACK_MIN_BYTES
    assert pack(short) == short
    assert unpack(short) == short.decode()


@pytest.mark.parametrize(
    "text",
    [
        '"' + "a" * HEX_MIN + '"' + " " * 300,  # a run exactly as long as the threshold
        '"' + "b" * (HEX_MIN - 1) + '"' + " " * 300,  # one shorter: stays text
        "0123456789abcdef" * 40 + "f",  # odd length, at the start, nothing after it
        "x" * 300 + "0123456789abcdef" * 3,  # at the end
        ("ab" * 20 + "-") * 20,  # runs one character apart
        "ABCDEF0123456789" * 30,  # upper case is text
        "é€漢" * 60 + "deadbeef" * 8,  # non-ASCII text around hex
        "1796177468673" * 30,  # digits only (a run of decimal digits is hex too)
        "\\u0001" * 60 + "cafe" * 10,  # an escaped control character
    ],
)
def test_any_json_reads_back_byte_for_byte(text: str) -> None:
    """Packing then unpacking gives back the exact JSON, whatever runs of hex it holds."""
    data = json.dumps({"result_json": text}, ensure_ascii=False).encode()
    assert unpack(pack(data)) == data.decode()


def test_random_mixes_of_hex_and_text_read_back() -> None:
    """Many random values of hex runs and text of every length read back exactly."""
    rng = random.Random(12)
    alphabet = '0123456789abcdefxyz"\\:, é'
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(250, 2000)))
        text += rng.randbytes(rng.randrange(0, 600)).hex()
        data = json.dumps({"v": text}, ensure_ascii=False).encode()
        packed = pack(data)
        assert unpack(packed) == data.decode()
        assert len(packed) <= len(data)


def test_json_holding_a_raw_placeholder_byte_is_deflated_instead() -> None:
    """A value that is not compact JSON (it holds a raw 0x01) takes the deflated form, so its
    text is never mistaken for a hex run."""
    data = b"\x01" + b"ab" * 200
    packed = pack(data)
    assert packed.startswith(DEFLATED)
    assert unpack(packed) == data.decode()


def test_hex_costs_half_a_byte_a_digit() -> None:
    """A 1 KB hex result packs to little more than its 512 bytes, well under what DEFLATE alone
    makes of it."""
    digits = random.Random(1).randbytes(512).hex()
    data = json.dumps({"step": 1, "result_json": json.dumps({"content": digits})}).encode()
    packed = pack(data)
    assert len(packed) < 512 + 60
    assert len(packed) < len(zlib.compress(data, 9, wbits=-15)) * 0.9


def test_a_truncated_value_is_refused() -> None:
    """A packed value that lost bytes raises instead of reading back wrong JSON."""
    data = json.dumps({"v": random.Random(3).randbytes(300).hex()}).encode()
    packed = pack(data)
    assert packed.startswith(HEXPACKED)
    for cut in (packed[:-1], packed[:20]):
        with pytest.raises(ValueError, match="view value"):
            unpack(cut)


def test_repetitive_hex_is_deflated_rather_than_stored_as_bytes() -> None:
    """Hex that repeats itself (a pattern, a zero-filled buffer) takes the deflated form, which
    stores it in less than its bytes would."""
    data = json.dumps({"result_json": "0123456789abcdef" * 64}).encode()
    packed = pack(data)
    assert packed.startswith(DEFLATED)
    assert len(packed) < 200
    assert unpack(packed) == data.decode()


def test_every_value_packs_as_a_fresh_packer_given_the_dictionary_packs_it() -> None:
    """Values packed one after another (each by a copy of one primed packer) hold exactly the
    bytes a packer made for that value alone writes: no value's packing leaks into the next."""
    rng = random.Random(13)
    for _ in range(200):
        text = rng.randbytes(rng.randrange(20, 300)).hex() + "x" * rng.randrange(0, 400)
        data = json.dumps({"result_json": text, "n": rng.randrange(10**6)}).encode()
        packed = pack(data)
        if not packed.startswith(HEXPACKED):
            continue
        fresh = zlib.compressobj(1, zlib.DEFLATED, -12, 4, zdict=DICTIONARY)
        body = packed[len(HEXPACKED) :]
        unpacker = zlib.decompressobj(-15, zdict=DICTIONARY)
        inflated = unpacker.decompress(body)
        raw = unpacker.unused_data
        assert body == fresh.compress(inflated) + fresh.flush() + raw

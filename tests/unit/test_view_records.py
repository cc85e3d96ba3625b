"""A view read from its hashes keeps steps and effects stored until read, and is in every other
way the view decoded whole: equal, dumped, copied, pickled and folded alike."""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
from typing import Any, get_args

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core.replay import effect_index
from agentledger.events.models import RunResumed, StepCheckpointed, StepStarted
from agentledger.views import fold
from agentledger.views.layout import PLACE_STATES, _decode_places, decode_run, encode_effect
from agentledger.views.layout import _decode_place as decode_place
from agentledger.views.layout import _led_place as led_place
from agentledger.views.model import (
    EffectPlace,
    EffectState,
    EffectView,
    RunView,
    StepView,
    place_of_brief,
)
from agentledger.views.packing import (
    HEXPACKED,
    PLACED,
    many_without_hex,
    pack,
    place_of,
    placed_text,
    unpack,
)
from agentledger.views.records import Records

from .test_view_layout import TRICKY, hashes, rich_view


def hex_packed(effect: EffectView) -> bytes:
    """An effect's value as sessions 8-14 wrote it: hex-packed, not led by its place (values
    so written must read on)."""
    return pack(effect.model_dump_json(exclude_defaults=True).encode())


def decode_places(stored: list[tuple[str, bytes | str]]) -> list[object]:
    """The places of many stored effects, read in one pass as a resume reads them (each brief,
    a packed int or a tuple, as the place it stands for)."""
    keys = [k for k, _ in stored]
    briefs = _decode_places(keys, [v for _, v in stored])
    return [place_of_brief(k, b) for k, b in zip(keys, briefs, strict=True)]


def as_place(place: EffectPlace) -> tuple[str, int, int, str]:
    """A place model as the tuple a resume reads (layout.Place)."""
    return place.idempotency_key, place.step, place.ordinal, place.state


#: Writers of effect values whose places a resume reads: the one now, and the one before it.
WRITERS = {"placed": encode_effect, "hex-packed": hex_packed}


def lazily_decoded() -> tuple[RunView, RunView]:
    """The rich view, and the same view decoded from its hashes (nothing read yet)."""
    view = rich_view()
    return view, decode_run(*hashes(view))


def test_a_step_is_decoded_when_read_and_only_that_step() -> None:
    """Reading one step decodes that step alone; the effects stay stored until read."""
    view, decoded = lazily_decoded()
    assert isinstance(decoded.steps, Records)
    assert isinstance(decoded.effects, Records)
    assert decoded.steps.undecoded() == 2
    assert decoded.effects.undecoded() == 2
    assert decoded.steps[10] == view.steps[10]
    assert decoded.steps.get(0) == view.steps[0]
    assert decoded.steps.get(99) is None
    assert decoded.steps.undecoded() == 0
    assert decoded.effects.undecoded() == 2
    assert 0 in decoded.steps
    assert len(decoded.effects) == 2


def test_the_lazy_view_equals_dumps_and_copies_as_the_whole_one() -> None:
    """Equality, model_dump (python and JSON), deep copies and pickles see every value."""
    view, decoded = lazily_decoded()
    assert decoded.model_dump() == view.model_dump()
    assert decoded.model_dump(mode="json") == view.model_dump(mode="json")
    assert decoded.model_dump_json() == view.model_dump_json()
    _, fresh = lazily_decoded()
    assert copy.deepcopy(fresh) == view
    _, fresh = lazily_decoded()
    assert fresh.model_copy(deep=True) == view
    _, fresh = lazily_decoded()
    assert pickle.loads(pickle.dumps(fresh)) == view
    _, fresh = lazily_decoded()
    assert fresh == view
    assert view == fresh
    assert dict(fresh.steps.items()) == dict(view.steps.items())
    assert RunView.model_validate(view.model_dump()) == view


def test_a_deep_copy_keeps_the_original_independent() -> None:
    """Changing a step of a deep copy leaves the original's step (read or still stored) as is."""
    view, decoded = lazily_decoded()
    twin = decoded.model_copy(deep=True)
    twin.steps[0].name = "changed"
    twin.steps[11] = StepView(step=11, name="new")
    assert decoded.steps[0] == view.steps[0]
    assert 11 not in decoded.steps


def test_folding_onto_a_lazy_view_gives_what_folding_onto_the_whole_one_gives() -> None:
    """The fold reads and writes steps of a lazily decoded view as of the whole view."""
    view = RunView(run_id="r", status="running", applied_seq=2, fence=1, plan=["a", "b", "c"])
    view.steps[0] = StepView(step=0, name="a", status="checkpointed", result_json='"x"')
    view.cursor = 1
    events = [
        RunResumed(run_id="r", seq=3, fence=2, worker_id="w", occurred_at=5, previous_fence=1),
        StepStarted(
            run_id="r",
            seq=4,
            fence=2,
            worker_id="w",
            occurred_at=6,
            step=1,
            step_name="b",
            attempt=1,
        ),
        StepCheckpointed(
            run_id="r",
            seq=5,
            fence=2,
            worker_id="w",
            occurred_at=7,
            step=1,
            step_name="b",
            attempt=1,
            result_json='"y"',
        ),
    ]
    whole = fold(view, events)
    lazy = fold(decode_run(*hashes(view)), events)
    assert lazy.view == whole.view
    assert lazy.touched_steps == whole.touched_steps


def test_a_stored_value_that_does_not_validate_fails_when_read() -> None:
    """A corrupt stored step raises pydantic's error the moment it is read, not later."""
    view = RunView(run_id="r")
    run, _, _ = hashes(view)
    decoded = decode_run(run, {b"0": b'{"step": "not a number"}'}, {})
    with pytest.raises(pydantic.ValidationError):
        _ = decoded.steps[0]


def test_open_effects_and_places_decode_only_the_open_effects() -> None:
    """A resume's open intents and effect places come out as from the whole view, with only the
    open effects decoded whole (the others are read for their place and state)."""
    view = rich_view()
    view.effects["k2"].state = "succeeded"
    decoded = decode_run(*hashes(view))
    assert decoded.open_effects() == view.open_effects()
    assert [e.idempotency_key for e in view.open_effects()] == [f"run:0:pay:0 {TRICKY}"]
    assert decoded.effects.undecoded() == 1
    assert (
        effect_index(decoded)
        == effect_index(view)
        == {(0, 0): f"run:0:pay:0 {TRICKY}", (10, 1): "k2"}
    )
    assert decoded.effects.undecoded() == 1
    assert decoded == view


def test_an_effects_place_has_the_defaults_of_the_effect() -> None:
    """Stored effects leave fields at their defaults out: the place reads them as the effect
    does, so an intent stored without its state is open."""
    for name in EffectPlace.model_fields:
        assert EffectPlace.model_fields[name].default == EffectView.model_fields[name].default
    intent = EffectView(
        idempotency_key="k", step=0, ordinal=0, effect="e", provider="p", kind="k",
        identity_hash="i", payload_hash="h",
    )  # fmt: skip
    decoded = decode_run(*hashes(RunView(run_id="r", effects={"k": intent})))
    assert [e.idempotency_key for e in decoded.open_effects()] == ["k"]


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("hex_chars", [24, 25, 68, 184, 300])
@pytest.mark.parametrize("state", ["intended", "succeeded", "unknown", "landed"])
def test_a_hex_packed_effects_place_is_read_without_its_hex_as_the_whole_effect_says(
    hex_chars: int, state: str, writer: str
) -> None:
    """An effect stored hex-packed, led by its place or not, gives the place and state its
    whole decode gives, key included, whatever its hex runs (counts whose varint is a quote or
    a backslash too)."""
    run = "".join(hashlib.sha256(bytes([i])).hexdigest() for i in range(12))  # not repetitive
    key = f"al1-pay-s7-o2-{run[728:760]}"
    effect = EffectView(
        idempotency_key=key, step=7, ordinal=2, effect="pay", provider="p", kind="payments",
        identity_hash=f"hmac-sha256:{run[600:664]}", payload_hash=f"hmac-sha256:{run[664:728]}",
        request_json=json.dumps({"ref": run[:hex_chars], "memo": '"state":"landed" \\'}),
        state=state, detail=run[300 : 300 + hex_chars],  # type: ignore[arg-type]
    )  # fmt: skip
    stored = WRITERS[writer](effect)
    assert stored.startswith(HEXPACKED if writer == "hex-packed" else PLACED + b"7,2,")
    assert HEXPACKED in stored
    run_hash, steps, _ = hashes(RunView(run_id="r", effects={key: effect}))
    decoded = decode_run(run_hash, steps, {key.encode(): stored})
    [(found_key, brief)] = list(decoded.effects.briefs())
    place = decode_place(key, stored)
    assert isinstance(place, EffectPlace)
    assert found_key == key == place.idempotency_key
    assert place == EffectPlace.model_validate_json(unpack(stored))
    assert place_of_brief(found_key, brief) == decoded.placed_effects()[0] == as_place(place)
    assert decoded.effects.undecoded() == 1
    assert decoded.effects[key] == effect


def test_the_places_of_many_effects_read_in_one_pass_are_those_read_one_by_one() -> None:
    """A resume reads every effect's place in one pass (hex-packed, plain JSON and text values
    mixed): each place is the one read alone, key from the hash included, and one corrupt value
    makes the pass read each alone, which raises for it."""
    run = "".join(hashlib.sha256(bytes([i])).hexdigest() for i in range(4))

    def effect(step: int, state: str, body: str, digest: str = run[:64]) -> EffectView:
        return EffectView(
            idempotency_key=f"al1-pay-s{step}-o1-{digest[step : step + 32]}", step=step,
            ordinal=1, effect="pay", provider="p", kind="k", identity_hash=f"hmac-sha256:{digest}",
            payload_hash="h", request_json=json.dumps({"memo": body}), state=state,  # type: ignore[arg-type]
        )  # fmt: skip

    effects = [
        effect(0, "intended", run),
        effect(1, "succeeded", "short", "beef"),
        effect(2, "unknown", '"state":"landed" \\' + run[64:160]),
        effect(3, "landed", "x"),
    ]
    stored: dict[str, bytes | str] = {e.idempotency_key: hex_packed(e) for e in effects}
    assert stored[effects[0].idempotency_key][:2] == HEXPACKED
    assert not bytes(stored[effects[1].idempotency_key]).startswith(HEXPACKED)
    stored[effects[1].idempotency_key] = encode_effect(effects[1])  # led by its place
    stored[effects[3].idempotency_key] = unpack(stored[effects[3].idempotency_key])  # text
    one_by_one = [decode_place(k, v) for k, v in stored.items()]
    assert decode_places(list(stored.items())) == [as_place(p) for p in one_by_one]
    assert one_by_one == [
        EffectPlace(idempotency_key=e.idempotency_key, step=e.step, ordinal=1, state=e.state)
        for e in effects
    ]
    stored[effects[2].idempotency_key] = HEXPACKED + b"not deflate"
    with pytest.raises(ValueError, match="corrupt"):
        decode_places(list(stored.items()))


def test_an_effect_value_is_led_by_its_place_which_a_resume_reads_alone() -> None:
    """The effect writer leads each value with the effect's step, ordinal and state; the places
    of values all so led are those their whole decode gives, and a led place that does not read
    (a state code out of range) makes the pass read each value whole, the JSON deciding."""
    run = "".join(hashlib.sha256(bytes([i])).hexdigest() for i in range(4))
    effects = [
        EffectView(
            idempotency_key=f"k{n}",
            step=n,
            ordinal=n % 3,
            effect="pay",
            provider="p",
            kind="k",
            identity_hash=f"hmac-sha256:{run[:64]}",
            payload_hash="h",
            request_json=json.dumps({"memo": run[: 40 * n]}),
            state=state,  # type: ignore[arg-type]
        )
        for n, state in enumerate(["intended", "landed", "unknown", "compensated", "failed"])
    ]
    stored: list[tuple[str, bytes | str]] = [(e.idempotency_key, encode_effect(e)) for e in effects]
    assert [place_of(bytes(v)) for _, v in stored] == [
        f"{e.step},{e.ordinal},{PLACE_STATES.index(e.state)}".encode() for e in effects
    ]
    assert [EffectView.model_validate_json(unpack(v)) for _, v in stored] == effects
    places = decode_places(stored)
    assert places == [as_place(decode_place(k, v)) for k, v in stored]
    assert places == [(e.idempotency_key, e.step, e.ordinal, e.state) for e in effects]
    key, value = stored[2]
    stored[2] = (key, bytes(value).replace(b"2,2,3\x00", b"2,2,99\x00", 1))
    assert place_of(bytes(stored[2][1])) == b"2,2,99"
    assert decode_places(stored) == places
    stored[2] = (key, bytes(value).replace(b"2,2,3\x00", b"2,2,-1\x00", 1))
    assert decode_places(stored) == places


def test_the_state_codes_of_places_never_change() -> None:
    """Each effect state has a code, and the codes of values already written keep their
    meaning (a new state is added at the end)."""
    assert set(PLACE_STATES) == set(get_args(EffectState))
    assert PLACE_STATES[:7] == (
        "intended", "succeeded", "failed", "unknown", "landed", "not_landed", "compensated",
    )  # fmt: skip


def test_stored_values_are_kept_as_given_and_each_brief_is_read_once() -> None:
    """Records hold a stored value as the very object given (nothing made per value); briefs
    are read in one call for the values still stored, once, and a copy keeps them, while a
    value set or decoded (a model, never bytes or text) is given as it is."""
    values = {f"k{i}": f"v{i}".encode() for i in range(3)}
    calls: list[list[str]] = []

    def brief(keys: list[str], stored: list[bytes | str]) -> list[object]:
        calls.append(keys)
        return [f"brief of {v!r}" for v in stored]

    records = Records.stored(values, lambda data: ("decoded", data), brief)
    assert all(records._items[k] is v for k, v in values.items())
    assert records["k0"] == ("decoded", b"v0")
    records["k2"] = ("set",)
    assert list(records.briefs()) == [
        ("k0", ("decoded", b"v0")),
        ("k1", "brief of b'v1'"),
        ("k2", ("set",)),
    ]
    twin, deep = copy.copy(records), copy.deepcopy(records)
    assert list(twin.briefs()) == list(deep.briefs()) == list(records.briefs())
    assert calls == [["k1"]]
    assert records.undecoded() == twin.undecoded() == deep.undecoded() == 1
    del records["k1"]
    assert list(records.briefs()) == [("k0", ("decoded", b"v0")), ("k2", ("set",))]
    assert Records({"a": ("plain",)}).undecoded() == 0
    assert list(Records({"a": ("plain",)}).briefs()) == [("a", ("plain",))]


def test_a_second_pass_of_briefs_reads_the_first_until_a_value_changes() -> None:
    """A second pass of briefs gives the first pass's pairs without going over the values
    again; setting, deleting or decoding a value makes the next pass read them afresh."""
    records = Records.stored({"a": b"1", "b": b"2"}, lambda data: ("decoded", data), _briefs_of)
    first = list(records.briefs())
    records._items = _Watched(records._items)
    again = list(records.briefs())
    assert again == first == [("a", ("brief", b"1")), ("b", ("brief", b"2"))]
    assert records._items.passes == 0
    assert records["a"] == ("decoded", b"1")
    assert list(records.briefs()) == [("a", ("decoded", b"1")), ("b", ("brief", b"2"))]
    records["c"] = ("set",)
    assert list(records.briefs())[-1] == ("c", ("set",))
    del records["a"]
    assert [k for k, _ in records.briefs()] == ["b", "c"]


class _Watched(dict[str, object]):
    """Values that count the passes over them."""

    passes = 0

    def items(self) -> Any:
        self.passes += 1
        return super().items()


def _briefs_of(keys: list[str], stored: list[bytes | str]) -> list[object]:
    return [("brief", v) for v in stored]


_PLACES = pydantic.TypeAdapter(list[EffectPlace])


def reference_places(stored: list[tuple[str, bytes | str]]) -> list[EffectPlace]:
    """The places of many stored effects as session 17 read them (kept to pin the reading
    without models): each lead as a dict, validated as models in one call."""
    try:
        led = [led_place(key, data) for key, data in stored]
        if None not in led:
            return list(_PLACES.validate_python(led))
    except (ValueError, IndexError):
        return [decode_place(key, data) for key, data in stored]
    texts: list[bytes] = []
    packed: list[bool] = []
    try:
        for _, data in stored:
            text = placed_text(data) if isinstance(data, bytes) else None
            packed.append(text is not None)
            texts.append(unpack(data).encode() if text is None else text)
        places: list[EffectPlace] = _PLACES.validate_json(many_without_hex(texts))
    except ValueError:
        return [decode_place(key, data) for key, data in stored]
    for place, (key, _), hexed in zip(places, stored, packed, strict=True):
        if hexed:
            place.__dict__["idempotency_key"] = key
    return list(places)


#: What a stored effect value may be: as written now, as written before, as text, or a lead
#: that does not read (its state code out of range or not a number, a field missing, a field
#: not a number, no end).
_FORMS = ["placed", "hex-packed", "text", "json", "code 99", "code -1", "code x", "two fields",
          "step x", "no end", "plus"]  # fmt: skip


def _stored(effect: EffectView, form: str) -> bytes | str:
    led = encode_effect(effect)
    lead = place_of(led)
    assert lead is not None
    rest = led[len(PLACED) + len(lead) :]
    step, ordinal, code = lead.split(b",")
    corrupt = {
        "code 99": b"%s,%s,99" % (step, ordinal),
        "code -1": b"%s,%s,-1" % (step, ordinal),
        "code x": b"%s,%s,x" % (step, ordinal),
        "two fields": b"%s,%s" % (step, code),
        "step x": b"x%s,%s,%s" % (step, ordinal, code),
        "plus": b"+%s,%s,%s" % (step, ordinal, code),
    }
    if form == "placed":
        return led
    if form == "hex-packed":
        return hex_packed(effect)
    if form == "text":
        return unpack(led)
    if form == "json":
        return effect.model_dump_json().encode()
    if form == "no end":
        return PLACED + lead
    return PLACED + corrupt[form] + rest


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2_000),
            st.integers(-2, 40),
            st.sampled_from(PLACE_STATES),
            st.sampled_from(_FORMS),
            st.booleans(),
        ),
        max_size=12,
    )
)
@settings(max_examples=300, deadline=None)
def test_the_places_read_without_models_are_those_the_models_gave(
    drawn: list[tuple[int, int, str, str, bool]],
) -> None:
    """Reading many effects' places straight from their leads gives, for every mix of values
    led, hex-packed, plain, text and with leads that do not read, the places (key, step,
    ordinal, state) session 17's validation of a model per lead gave, or the same error."""
    hexes = "".join(hashlib.sha256(bytes([i])).hexdigest() for i in range(4))
    stored: list[tuple[str, bytes | str]] = []
    for n, (step, ordinal, state, form, hexed) in enumerate(drawn):
        effect = EffectView(
            idempotency_key=f"al1-k{n}-{hexes[n : n + 32]}", step=step, ordinal=ordinal,
            effect="pay", provider="p", kind="k", identity_hash=f"hmac-sha256:{hexes[:64]}",
            payload_hash="h", request_json=json.dumps({"memo": hexes if hexed else "short"}),
            state=state,  # type: ignore[arg-type]
        )  # fmt: skip
        stored.append((effect.idempotency_key, _stored(effect, form)))
    try:
        expected: list[object] = [as_place(p) for p in reference_places(stored)]
    except ValueError as e:
        expected = [type(e)]
    try:
        found = decode_places(stored)
    except ValueError as e:
        found = [type(e)]
    assert found == expected

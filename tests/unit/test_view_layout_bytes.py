"""Steps and effects values are stored compactly (no default fields, deflated when long), and
values written before that (the full JSON) still decode and compare equal."""

from __future__ import annotations

import hashlib
import zlib

from agentledger.views.layout import (
    decode_run,
    encode_effect,
    encode_run,
    encode_step,
    same_value,
)
from agentledger.views.model import CheckView, EffectView, RunView, StepView
from agentledger.views.packing import DEFLATED, HEXPACKED, PACK_MIN_BYTES, PLACED

# 1,024 hex digits that look random, as the bench's message does
HEX = "".join(hashlib.sha512(bytes([i])).hexdigest() for i in range(8))
RESULT = '{"role":"assistant","content":"' + HEX + '"}'


def digest(seed: str) -> str:
    """64 hex digits that look random, as a hash's do."""
    return hashlib.sha256(seed.encode()).hexdigest()


def big_step() -> StepView:
    """A checkpointed step with a 1 KB result, like the bench's."""
    return StepView(
        step=3,
        name="s00003",
        status="checkpointed",
        attempts=1,
        result_json=RESULT,
        checks=[CheckView(check="completed", passed=True)],
    )


def effect() -> EffectView:
    """An effect with its long hashes and request, succeeded."""
    return EffectView(
        idempotency_key="al1-notify-s3-o0-" + digest("k")[:32],
        step=3,
        ordinal=0,
        effect="notify",
        provider="sandbox",
        kind="emails",
        identity_hash="hmac-sha256:" + digest("i"),
        payload_hash="hmac-sha256:" + digest("p"),
        request_json='{"identity":{"run":"r","step":3},"free_text":{"body":"' + digest("b") + '"}}',
        state="succeeded",
        external_ref="em_1",
        intended_at=1,
    )


def view_with(steps: dict[bytes, bytes], effects: dict[bytes, bytes]) -> RunView:
    """The run decoded from a minimal run hash and the given steps and effects hashes."""
    run = {k.encode(): v for k, v in encode_run(RunView(run_id="r"), parked=0).items()}
    return decode_run(run, steps, effects)


def test_a_long_step_is_packed_and_decodes_back_equal() -> None:
    """A step whose JSON is long is stored packed behind the mark, in fewer bytes than its
    full JSON, and the run decodes to the same step."""
    step = big_step()
    stored = encode_step(step)
    assert stored.startswith(HEXPACKED)
    assert len(stored) < len(step.model_dump_json()) * 0.8
    assert view_with({b"3": stored}, {}).steps == {3: step}


def test_a_short_value_stays_json_without_its_defaults() -> None:
    """A value under the threshold is plain JSON, and fields at their defaults are left out."""
    step = StepView(step=0, name="a")
    stored = encode_step(step)
    assert len(stored) < PACK_MIN_BYTES
    assert stored == b'{"step":0,"name":"a"}'
    assert view_with({b"0": stored}, {}).steps == {0: step}


def test_values_written_before_compaction_still_decode_and_compare_equal() -> None:
    """The full JSON an older projector wrote decodes to the same view as the compact value,
    and views verify's comparison takes the two for the same value."""
    step, eff = big_step(), effect()
    old_step, old_effect = step.model_dump_json().encode(), eff.model_dump_json().encode()
    new_step, new_effect = encode_step(step), encode_effect(eff)
    assert new_effect.startswith(PLACED)
    assert HEXPACKED in new_effect
    key = eff.idempotency_key.encode()
    assert view_with({b"3": old_step}, {key: old_effect}) == view_with(
        {b"3": new_step}, {key: new_effect}
    )
    assert same_value("steps", old_step, new_step)
    assert same_value("effects", old_effect, new_effect)
    assert not same_value("steps", old_step, encode_step(StepView(step=3, name="s00003")))
    assert not same_value("run", b"1", b"2")


def test_deflated_values_of_session_7_decode_and_compare_equal_to_packed_ones() -> None:
    """A step and an effect a session-7 projector stored deflated decode to the same view as
    their packed values, and views verify's comparison takes them for the same value."""
    step, eff = big_step(), effect()
    old_step = DEFLATED + zlib.compress(
        step.model_dump_json(exclude_defaults=True).encode(), 1, wbits=-15
    )
    old_effect = DEFLATED + zlib.compress(
        eff.model_dump_json(exclude_defaults=True).encode(), 1, wbits=-15
    )
    new_step, new_effect = encode_step(step), encode_effect(eff)
    assert len(new_step) < len(old_step)
    assert len(new_effect) < len(old_effect)
    key = eff.idempotency_key.encode()
    assert view_with({b"3": old_step}, {key: old_effect}) == view_with(
        {b"3": new_step}, {key: new_effect}
    )
    assert same_value("steps", old_step, new_step)
    assert same_value("effects", old_effect, new_effect)

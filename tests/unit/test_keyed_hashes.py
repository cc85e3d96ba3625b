"""The hashes the log records are keyed, idempotency still holds, and old hashes still count."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from agentledger._core.lookup import decide
from agentledger._core.payloads import Payloads
from agentledger.errors import IdentityMismatchError, ProviderIdentityConflictError
from agentledger.events import EffectIntended, EffectRecorded
from agentledger.providers.hashing import (
    KEYED_PREFIX,
    EffectHasher,
    identity_hash,
    payload_hash,
)
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest, LookupResult, ProviderResult
from agentledger.settings import CommonSettings
from agentledger.testing import LedgerEnvironment, SimulatedCrash
from agentledger.views.model import EffectView
from agentledger.worker import RunSpec, Step

CARD = "4111111111111111"
REQUEST = EffectRequest(kind="payments", identity={"card": CARD, "amount": 100})
SPEC = RunSpec(run_id="r1", agent="t", plan=("pay",))


class PlainHasher(EffectHasher):
    """What the SDK recorded before keyed hashes: plain sha256 of the canonical JSON."""

    def identity(self, identity: Mapping[str, object]) -> str:
        return identity_hash(identity)

    def payload(self, identity: Mapping[str, object], free_text: Mapping[str, object]) -> str:
        return payload_hash(identity, free_text)


async def pay(step: Step, request: EffectRequest = REQUEST) -> Any:
    """One payment; the result says whether it was replayed from the record."""
    done = await step.effect("charge", request)
    return {"replayed": done.replayed}


def intents(env: LedgerEnvironment) -> list[EffectIntended]:
    """Every EffectIntended in the log."""
    log = env.memory_log
    return [e for e in log.events(log.topics.effects) if isinstance(e, EffectIntended)]


async def crash_before_checkpoint(env: LedgerEnvironment) -> None:
    """Run the payment step until the crash between acceptance and checkpoint."""
    with pytest.raises(SimulatedCrash):
        async with env.ledger(kill_switch=env.crash_switch("before_checkpoint")).run(SPEC) as run:
            await run.step("pay", pay)
    env.expire_leases()


async def test_the_recorded_identity_hash_is_keyed_not_a_plain_sha256() -> None:
    """The hashes in EffectIntended are HMACs under the deployment key: the plain sha256 of the
    identity (which a guess of the card's 6 missing digits would find) is nowhere in the log."""
    async with LedgerEnvironment(payloads=Payloads(hasher=EffectHasher("deploy-1"))) as env:
        async with env.ledger().run(SPEC) as run:
            await run.step("pay", pay)
        (intent,) = intents(env)
        assert intent.identity_hash.startswith(KEYED_PREFIX)
        assert intent.identity_hash == EffectHasher("deploy-1").identity(REQUEST.identity)
        assert intent.identity_hash != EffectHasher("deploy-2").identity(REQUEST.identity)
        raw = b"".join(
            r.value or b"" for r in env.memory_log.records(env.memory_log.topics.effects)
        )
        assert identity_hash(REQUEST.identity).encode() not in raw
        assert payload_hash(REQUEST.identity, {}).encode() not in raw


async def test_a_resume_under_the_same_key_replays_with_keyed_hashes() -> None:
    """Idempotency still works: the same identity after a crash replays, nothing is re-sent."""
    async with LedgerEnvironment(payloads=Payloads(hasher=EffectHasher("deploy-1"))) as env:
        await crash_before_checkpoint(env)
        async with env.ledger().run(SPEC) as run:
            assert await run.step("pay", pay) == {"replayed": True}
        assert len(env.provider.effects) == 1


async def test_events_written_with_plain_hashes_still_resume_and_still_catch_a_mismatch() -> None:
    """A run recorded before keyed hashes (plain sha256) resumes under the keyed SDK: the same
    identity replays; another identity under the key is still an identity mismatch."""
    async with LedgerEnvironment(payloads=Payloads(hasher=PlainHasher())) as env:
        await crash_before_checkpoint(env)
        (intent,) = intents(env)
        assert intent.identity_hash == identity_hash(REQUEST.identity)
        env.payloads = Payloads(hasher=EffectHasher("deploy-1"))
        changed = EffectRequest(kind="payments", identity={"card": CARD, "amount": 999})
        with pytest.raises(IdentityMismatchError):
            async with env.ledger().run(SPEC) as run:
                await run.step("pay", lambda s: pay(s, changed))
    async with LedgerEnvironment(payloads=Payloads(hasher=PlainHasher())) as env:
        await crash_before_checkpoint(env)
        env.payloads = Payloads(hasher=EffectHasher("deploy-1"))
        async with env.ledger().run(SPEC) as run:
            assert await run.step("pay", pay) == {"replayed": True}
        assert len(env.provider.effects) == 1


def keyed_intent(hasher: EffectHasher) -> EffectView:
    """An open intent for REQUEST as the keyed SDK records it."""
    return EffectView(
        idempotency_key="k1",
        step=0,
        ordinal=0,
        effect="charge",
        provider="pay",
        kind="payments",
        identity_hash=hasher.identity(REQUEST.identity),
        payload_hash=hasher.payload(REQUEST.identity, {}),
        request_json='{"identity":{"card":"[REDACTED:card_number]","amount":100},"free_text":{}}',
    )


def test_the_lookup_compares_a_keyed_intent_with_the_identity_the_provider_holds() -> None:
    """Found with the same identity fields: LANDED; with others: a mismatch whose detail has no
    plain hash of the provider's (it would be as revealing as the old log's)."""
    hasher = EffectHasher("deploy-1")
    intent = keyed_intent(hasher)
    held = {
        "id": "pay_1",
        "identity_hash": identity_hash(REQUEST.identity),
        "payload": {**REQUEST.identity},
    }
    assert decide(intent, LookupResult.of(ProviderResult.of(held)), hasher).finding == "LANDED"
    other = {"card": CARD, "amount": 5}
    wrong = {"id": "pay_2", "identity_hash": identity_hash(other), "payload": other}
    resolution = decide(intent, LookupResult.of(ProviderResult.of(wrong)), hasher)
    assert resolution.identity_mismatch
    assert resolution.found_identity_hash == hasher.identity(other)
    assert identity_hash(other) not in resolution.detail


class Clashing(MemoryProvider):
    """Answers every perform with a 409 naming both plain identity hashes, as the sandbox does."""

    held = identity_hash({"card": CARD, "amount": 1})

    async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
        mine = identity_hash(request.identity)
        msg = f"idempotency key {key} was used with identity hash {self.held}; this has {mine}"
        raise ProviderIdentityConflictError(msg, key=key, recorded_hash=self.held, new_hash=mine)


async def test_a_provider_conflict_records_no_plain_hash() -> None:
    """A 409 naming the provider's plain identity hashes stops the run, and neither hash reaches
    any topic (the failed outcome, the alert, the pause)."""
    async with LedgerEnvironment(providers={"sandbox": Clashing(name="sandbox")}) as env:
        with pytest.raises(IdentityMismatchError):
            async with env.ledger().run(SPEC) as run:
                await run.step("pay", pay)
        log = env.memory_log
        raw = b"".join(
            r.value or b""
            for role in ("steps", "effects", "acceptance", "alerts")
            for r in log.records(log.topics.for_role(role))
        )
        assert any(isinstance(e, EffectRecorded) for e in log.events(log.topics.effects))
        assert Clashing.held.encode() not in raw
        assert identity_hash(REQUEST.identity).encode() not in raw


def test_the_hash_key_is_a_secret_setting() -> None:
    """AGENTLEDGER_HASH_KEY is read as a secret: its value is not in the settings' repr."""
    settings = CommonSettings(hash_key="s3cr3t-hash-key")  # type: ignore[arg-type]
    assert settings.hash_key.get_secret_value() == "s3cr3t-hash-key"
    assert "s3cr3t-hash-key" not in repr(settings)
    assert re.fullmatch(r"\*+", str(settings.hash_key))

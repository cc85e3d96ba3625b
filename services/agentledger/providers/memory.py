"""In-process provider with the sandbox's semantics and faults, for fast unit tests."""

from __future__ import annotations

import asyncio
import copy
import secrets
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from agentledger.errors import ProviderRequestError, ProviderUnavailableError
from agentledger.providers.faults import FaultDecision, FaultRule, FaultSet, Operation
from agentledger.providers.hashing import identity_hash
from agentledger.providers.protocol import (
    CompensatingProvider,
    EffectRequest,
    LookupResult,
    ProviderResult,
    check_key,
    check_kind,
)
from agentledger.providers.semantics import (
    StoredEffect,
    check_compensable,
    check_replay,
    compensation_identity,
    compensation_kind,
    new_effect,
    timestamp,
)


class MemoryProvider(CompensatingProvider):
    """Keeps effects in a dict; ``effects`` and ``lookups`` show what it did, like the sandbox."""

    def __init__(self, *, name: str = "memory", faults: list[FaultRule] | None = None) -> None:
        self.name = name
        self.faults = FaultSet(faults or [])
        self.effects: list[StoredEffect] = []
        self.lookups: Counter[str] = Counter()
        self._by_key: dict[str, StoredEffect] = {}
        self._by_id: dict[str, StoredEffect] = {}
        self._compensation_of: dict[str, StoredEffect] = {}

    def set_faults(self, *rules: FaultRule) -> None:
        """Replace the active fault rules."""
        self.faults.replace(list(rules))

    def clear_faults(self) -> None:
        """Behave again."""
        self.faults.clear()

    async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
        """Perform once per key; a repeat with the same identity returns the first object."""
        check_key(key)
        decision = await self._enter("perform", request.kind, key)
        recorded = self._by_key.get(key)
        if recorded is not None:
            check_replay(recorded, kind=request.kind, key=key, ident_hash=request.identity_hash)
        else:
            recorded = self._store(
                new_effect(
                    kind=request.kind,
                    key=key,
                    payload=request.body(),
                    identity=dict(request.identity),
                    token=secrets.token_hex(12),
                    created_at=timestamp(datetime.now(UTC)),
                )
            )
        return self._answer(decision, recorded)

    async def lookup(self, kind: str, key: str) -> LookupResult:
        """Found when an effect of ``kind`` was performed under ``key``; counts the lookup."""
        check_kind(kind)
        check_key(key)
        decision = await self._enter("lookup", kind, key)
        self.lookups[key] += 1
        recorded = self._by_key.get(key)
        if recorded is None or recorded.kind != kind:
            self._drop_if_injected(decision)
            return LookupResult.missing()
        return LookupResult.of(self._answer(decision, recorded))

    async def compensate(self, kind: str, external_ref: str, key: str) -> ProviderResult:
        """Undo ``external_ref`` once; a repeat with the same key returns the first compensation."""
        check_kind(kind)
        check_key(key)
        decision = await self._enter("compensate", kind, key)
        comp_kind = compensation_kind(kind)
        identity = compensation_identity(external_ref)
        recorded = self._by_key.get(key)
        if recorded is not None:
            check_replay(recorded, kind=comp_kind, key=key, ident_hash=identity_hash(identity))
            return self._answer(decision, recorded)
        target = self._by_id.get(external_ref)
        if target is None or target.kind != kind:
            msg = f"no {kind} object {external_ref} to compensate"
            raise ProviderRequestError(msg, status=404)
        check_compensable(target, self._compensation_of.get(external_ref), key)
        recorded = self._store(
            new_effect(
                kind=comp_kind,
                key=key,
                payload={},
                identity=identity,
                token=secrets.token_hex(12),
                created_at=timestamp(datetime.now(UTC)),
                compensates=external_ref,
            )
        )
        self._compensation_of[external_ref] = recorded
        return self._answer(decision, recorded)

    async def _enter(self, op: Operation, kind: str, key: str) -> FaultDecision:
        """Apply the faults that strike before anything is stored."""
        decision = self.faults.decide(op, kind, key)
        if decision.mode == "down":
            msg = f"{self.name} is down (injected)"
            raise ProviderUnavailableError(msg, status=503)
        if decision.latency_ms:
            await asyncio.sleep(decision.latency_ms / 1000)
        if decision.mode == "error-before-commit":
            msg = f"{self.name} failed before committing (injected)"
            raise ProviderUnavailableError(msg, status=503)
        return decision

    def _store(self, effect: StoredEffect) -> StoredEffect:
        self._by_key[effect.idempotency_key] = effect
        self._by_id[effect.id] = effect
        self.effects.append(effect)
        return effect

    def _drop_if_injected(self, decision: FaultDecision) -> None:
        """Lose the answer after the commit, as a dropped connection would."""
        if decision.mode == "drop-after-commit":
            msg = f"{self.name} dropped the connection after committing (injected)"
            raise ProviderUnavailableError(msg)

    def _answer(self, decision: FaultDecision, effect: StoredEffect) -> ProviderResult:
        """The effect's original response, unless the answer is dropped."""
        self._drop_if_injected(decision)
        return ProviderResult.of(json_copy(effect.response))


_IMMUTABLE = (str, int, float, bool, type(None))


def json_copy(value: Any) -> Any:
    """A copy of ``value`` that shares no dict or list with it, as ``copy.deepcopy`` makes:
    dicts, lists and exact ``str``/``int``/``float``/``bool``/``None`` are walked without
    deepcopy's memo (about 3x cheaper for a provider's answer; a part the value holds twice is
    copied twice, which JSON cannot tell apart); anything else is deep-copied."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _IMMUTABLE else json_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _IMMUTABLE else json_copy(v) for v in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)

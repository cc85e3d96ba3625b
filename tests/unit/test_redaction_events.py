"""Secrets never reach the encoded events, wherever an agent puts them (invariant 10)."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings

from agentledger.providers.protocol import EffectRequest
from agentledger.testing import LedgerEnvironment
from agentledger.worker import Metered, RunSpec, Step

from .test_redaction import cores, secrets


async def leak_everywhere(env: LedgerEnvironment, run_id: str, secret: str) -> None:
    """One run that puts ``secret`` in its input, an activity, an effect, a result, an error."""
    spec = RunSpec(run_id=run_id, agent="t", plan=("leak", "fail"), input={"note": secret})

    async def leak(step: Step) -> Any:
        async def llm() -> Metered[dict[str, str]]:
            return Metered({"text": f"the key is {secret}"}, tokens=1)

        await step.activity("llm", llm)
        await step.read("doc", f"https://u:{secret}@docs/x", llm)
        await step.effect(
            "mail",
            EffectRequest(
                kind="emails", identity={"to": "a@example.com"}, free_text={"body": secret}
            ),
        )
        return {"echo": secret, "nested": [{"k": secret}]}

    async def fail(step: Step) -> Any:
        raise ValueError(f"boom: {secret}")

    async with env.ledger().run(spec) as run:
        await run.step("leak", leak)
        with contextlib.suppress(ValueError):
            await run.step("fail", fail)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secrets)
async def test_generated_secrets_are_absent_from_every_encoded_event(secret: str) -> None:
    """For any generated secret, no record in any topic contains it (the bytes Kafka gets)."""
    async with LedgerEnvironment() as env:
        await leak_everywhere(env, "r", secret)
        log = env.memory_log
        raw = [
            r.value or b""
            for role in ("steps", "effects", "acceptance", "alerts")
            for r in log.records(log.topics.for_role(role))
        ]
        assert len(raw) > 8
        for core in cores(secret):
            assert not any(core.encode() in value for value in raw)

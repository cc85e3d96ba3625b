"""The run context on the in-memory ports: checkpoints, envelopes, commits, recorded values."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.demo.agent import PLAN, refund_agent, spec_for
from agentledger.errors import RunClosedError, StepRejectedError
from agentledger.events import RunEvent
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest, LookupResult, ProviderResult
from agentledger.testing import LedgerEnvironment
from agentledger.worker import Check, MemoryBlobStore, Metered, Payloads, RunSpec, Step

REQUEST = EffectRequest(kind="payments", identity={"order": "o1", "amount": 100})


def spec(run_id: str = "r1", plan: tuple[str, ...] = ("a", "b")) -> RunSpec:
    """A small run spec."""
    return RunSpec(run_id=run_id, agent="t", plan=plan)


async def const(value: Any) -> Any:
    """An async body returning ``value``."""
    return value


async def test_step_checkpoints_only_after_acceptance() -> None:
    """A failed check writes StepRejected and keeps the cursor; a pass writes the checkpoint."""
    async with LedgerEnvironment() as env:
        outcomes = iter([False, True])
        async with env.ledger().run(spec(plan=("a",))) as run:
            result = await run.step(
                "a", lambda s: const({"n": 1}), accept=lambda v: next(outcomes), attempts=2
            )
            assert result == {"n": 1}
        kinds = [type(e).__name__ for e in await env.events("r1")]
        assert kinds == [
            "RunStarted",
            "StepStarted",
            "AcceptanceEvaluated",
            "StepRejected",
            "StepStarted",
            "AcceptanceEvaluated",
            "StepCheckpointed",
            "RunFinished",
        ]
        view = await env.view("r1")
        assert view.cursor == 1
        assert view.steps[0].attempt == 2


async def test_rejected_step_raises_after_its_attempts_and_cursor_stays() -> None:
    """Acceptance failing every attempt raises StepRejectedError naming the failed check."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec()) as run:
            with pytest.raises(StepRejectedError, match="too_small"):
                await run.step(
                    "a", lambda s: const(1), accept=lambda v: Check("too_small", v > 5, "was 1")
                )
        view = await env.view("r1")
        assert view.cursor == 0
        assert view.steps[0].status == "rejected"
        assert view.status == "running"


async def test_every_event_carries_the_envelope_with_gapless_seq() -> None:
    """run_id, seq 1..n without gaps, one fence and the worker id on every event."""
    async with LedgerEnvironment() as env:
        async with env.ledger(worker_id="w-env").run(spec_for("r1", 1)) as run:
            await refund_agent(run, 1)
        events = await env.events("r1")
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert {(e.run_id, e.fence, e.worker_id) for e in events} == {("r1", 1, "w-env")}


async def test_commits_per_step_and_what_goes_together() -> None:
    """Intent commits alone before the call; outcome, acceptance and checkpoint share one commit;
    a step without an accept= check records no acceptance, only its checkpoint."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec(plan=("pay", "note"))) as run:

            async def pay(step: Step) -> Any:
                await step.effect("charge", REQUEST)
                return "paid"

            await run.step("pay", pay, accept=lambda v: v == "paid")
            await run.step("note", lambda s: const("ok"))
            assert run.commits == 3
        assert env.log.batch_types() == [
            ["RunStarted", "StepStarted", "EffectIntended"],
            ["EffectRecorded", "AcceptanceEvaluated", "StepCheckpointed"],
            ["StepStarted", "StepCheckpointed"],
            ["RunFinished"],
        ]
        view = await env.view("r1")
        assert [(c.check, c.passed) for c in view.steps[0].checks] == [("accept", True)]
        assert view.steps[1].checks == []
        assert view.cursor == 2


async def test_intent_is_durable_before_the_provider_is_called() -> None:
    """When the provider receives the call, EffectIntended with its key is already committed."""
    async with LedgerEnvironment() as env:
        seen: list[list[str]] = []

        class Watching(MemoryProvider):
            async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
                events = await env.log.read_run("r1")
                seen.append([getattr(e, "idempotency_key", "") for e in events])
                return await super().perform(request, key)

        env.providers["sandbox"] = Watching(name="sandbox")
        async with env.ledger().run(spec(plan=("pay",))) as run:

            async def pay(step: Step) -> Any:
                return (await step.effect("charge", REQUEST)).key

            key = await run.step("pay", pay)
        assert key in seen[0]


async def test_durable_activity_commits_and_deferred_one_rides_along() -> None:
    """durable=True commits the activity at once; durable=False waits for the checkpoint."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec(plan=("a",))) as run:

            async def body(step: Step) -> Any:
                first = await step.activity("m1", lambda: const(Metered("x", tokens=5)))
                second = await step.activity("m2", lambda: const("y"), durable=False)
                return [first, second]

            assert await run.step("a", body) == ["x", "y"]
        assert env.log.batch_types()[:2] == [
            ["RunStarted", "StepStarted", "ActivityRecorded"],
            ["ActivityRecorded", "StepCheckpointed"],
        ]
        assert (await env.view("r1")).budget.tokens == 5


async def test_values_are_the_recorded_redacted_ones() -> None:
    """A secret in a step result is masked in the log and in what the agent gets back."""
    async with LedgerEnvironment() as env:
        secret = "sk-" + "A1b2C3d4" * 4
        async with env.ledger().run(spec(plan=("a",))) as run:
            value = await run.step("a", lambda s: const({"key": secret, "n": 1}))
        assert value == {"key": "[REDACTED:openai_key]", "n": 1}
        raw = b"".join(
            r.value or b""
            for t in env.memory_log.topics.run_topics
            for r in env.memory_log.records(t)
        )
        assert secret.encode() not in raw


async def test_body_error_rejects_the_attempt_and_a_retry_is_a_new_attempt() -> None:
    """An exception in the body writes StepRejected and propagates; calling again is attempt 2."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec(plan=("a",))) as run:

            async def boom(step: Step) -> Any:
                raise RuntimeError("tool crashed with password=hunter2")

            with pytest.raises(RuntimeError):
                await run.step("a", boom)
            assert await run.step("a", lambda s: const(2)) == 2
        view = await env.view("r1")
        assert view.steps[0].attempt == 2
        rejected = [e for e in await env.events("r1") if type(e).__name__ == "StepRejected"]
        assert "RuntimeError" in rejected[0].reason  # type: ignore[attr-defined]


async def test_reopening_replays_checkpointed_steps_without_running_them() -> None:
    """A second open of a finished run returns recorded results and runs no body."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec()) as run:
            await run.step("a", lambda s: const(1))
            await run.step("b", lambda s: const(2))
        calls: list[str] = []

        async def never(step: Step) -> Any:
            calls.append(step.name)
            return 0

        async with env.ledger().run(spec()) as again:
            assert again.status == "succeeded"
            assert await again.step("a", never) == 1
            assert await again.step("b", never) == 2
            assert again.result == 2
        assert calls == []


async def test_finished_run_is_read_only() -> None:
    """A finished run cannot take another step."""
    async with LedgerEnvironment() as env, env.ledger().run(spec(plan=("a",))) as run:
        await run.step("a", lambda s: const(1))
        await run.finish("done")
        with pytest.raises(RunClosedError, match="succeeded"):
            await run.revise_plan(["a", "b"], "more")


async def test_status_and_result_are_read_alike_without_awaiting() -> None:
    """``status`` and ``result`` are both plain properties: running and None before the run
    finishes, succeeded and the recorded (redacted) result right after, and on a reopen."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec(plan=("a",))) as run:
            assert (run.status, run.result) == ("running", None)
            await run.step("a", lambda s: const(1))
            await run.finish({"token": "secret", "n": 1})
            assert run.status == "succeeded"
            assert run.result == {"token": "[REDACTED:sensitive_key]", "n": 1}
        async with env.ledger().run(spec(plan=("a",))) as again:
            assert (again.status, again.result) == ("succeeded", run.result)


async def test_large_results_are_stored_as_verified_references() -> None:
    """Payloads above the threshold go to the blob store; the event carries uri and sha256."""
    blobs = MemoryBlobStore()
    async with LedgerEnvironment(payloads=Payloads(blobs=blobs, threshold=100)) as env:
        big = {"text": "x" * 1000}
        async with env.ledger().run(spec(plan=("a",))) as run:
            assert await run.step("a", lambda s: const(big)) == big
        step = (await env.view("r1")).steps[0]
        assert step.result_json == "null"
        assert step.result_ref_uri is not None
        assert step.result_ref_hash is not None
        assert step.result_ref_hash in step.result_ref_uri
        async with env.ledger().run(spec(plan=("a",))) as again:
            assert await again.step("a", lambda s: const(None)) == big


async def test_lookup_answer_shapes_are_what_resume_expects() -> None:
    """The memory provider answers lookups with the result it answered perform with."""
    provider = MemoryProvider()
    performed = await provider.perform(REQUEST, "k1")
    assert await provider.lookup("payments", "k1") == LookupResult.of(performed)
    assert not (await provider.lookup("payments", "k2")).found


async def test_demo_agent_runs_its_whole_plan() -> None:
    """The refund agent checkpoints every step of its plan and finishes succeeded."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec_for("demo-1", 7)) as run:
            result = await refund_agent(run, 7)
        view = await env.view("demo-1")
        assert view.status == "succeeded"
        assert view.cursor == len(PLAN)
        assert result["order_id"] == "ord-demo-1"
        assert view.budget.tokens > 0
        assert all(isinstance(e, RunEvent) for e in await env.events("demo-1"))


async def test_input_is_the_recorded_one_on_resume() -> None:
    """A resumed run reads the input RunStarted recorded (redacted), not the new spec's."""
    async with LedgerEnvironment() as env:
        first = RunSpec(run_id="r1", agent="t", plan=("a", "b"), input={"password": "x", "n": 1})
        async with env.ledger().run(first) as run:
            await run.step("a", lambda s: const(1))
        again = RunSpec(run_id="r1", agent="t", plan=("a", "b"), input={"n": 2})
        async with env.ledger().run(again) as run:
            assert run.input == {"password": "[REDACTED:sensitive_key]", "n": 1}


async def test_invalid_plan_is_refused_before_anything_is_written() -> None:
    """A step name that cannot travel inside keys is refused: no lease taken, no event."""
    async with LedgerEnvironment() as env:

        async def open_it() -> None:
            async with env.ledger().run(spec(plan=("ok", "not ok"))):
                pass

        with pytest.raises(ValueError, match="step name 'not ok'"):
            await open_it()
        assert await env.events("r1") == []
        assert await env.leases.current("r1") is None


async def test_an_effect_keyed_on_an_earlier_step_returns_that_steps_outcome() -> None:
    """Step.effect(key_step=k) derives the key from step k: the effect performed there is
    returned replayed, not performed again; a later step as key_step is refused."""
    async with LedgerEnvironment() as env:
        request = EffectRequest(kind="refunds", identity={"order_id": "o1"})
        async with env.ledger().run(spec(plan=("a", "b"))) as run:

            async def first(step: Step) -> Any:
                return (await step.effect("refund", request)).key

            async def again(step: Step) -> Any:
                with pytest.raises(ValueError, match="key_step"):
                    await step.effect("refund", request, key_step=step.index + 1)
                done = await step.effect("refund", request, key_step=0)
                return [done.key, done.replayed]

            key = await run.step("a", first)
            assert await run.step("b", again) == [key, True]
        assert len(env.provider.effects) == 1


async def test_the_implicit_finish_records_the_last_result_as_the_agent_left_it() -> None:
    """A run finished on exit records the last step's recorded (redacted) result, and a result
    the agent changed after the step returned is recorded as changed (and redacted)."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec("kept", plan=("a",))) as run:
            await run.step("a", lambda s: const({"token": "secret", "n": 1}))
        assert run.result == {"token": "[REDACTED:sensitive_key]", "n": 1}
        async with env.ledger().run(spec("changed", plan=("a",))) as run:
            value = await run.step("a", lambda s: const({"n": 1}))
            value["password"] = "hunter2"
        assert run.result == {"n": 1, "password": "[REDACTED:sensitive_key]"}

"""The demo's refund agent: fetch the order, decide with a (fake) model, refund, email, ticket.

Everything the agent sees is a pure function of (seed, run id), so an uninterrupted run and a
killed-and-resumed run of the same seed must end with the same outcome, results and cost. The
"model" is deterministic and charges tokens; the order read records provenance; the three
effects go to the sandbox provider's payments, emails and tickets kinds.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Any

from agentledger._core.spec import Check, Limits, Metered, RunSpec
from agentledger.providers.protocol import EffectRequest
from agentledger.views import Versions
from agentledger.worker import Run, Step

AGENT = "refund-demo"
PLAN: tuple[str, ...] = ("fetch_order", "decide", "refund", "email", "ticket")
VERSIONS = Versions(
    code="refund-agent@1", prompt="refund-prompt@3", tool_schema="tools@2", model="fake-llm@1"
)
USD_PER_TOKEN = 0.000002
_REASONS = ("arrived broken", "never arrived", "wrong size", "changed my mind", "late delivery")


def _rng(seed: int, run_id: str, what: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{run_id}:{what}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def order_of(seed: int, run_id: str) -> dict[str, Any]:
    """The order this run is about (the demo's "database")."""
    rng = _rng(seed, run_id, "order")
    return {
        "order_id": f"ord-{run_id}",
        "customer": f"customer-{rng.randrange(10_000):04d}@example.com",
        "amount_cents": rng.randrange(500, 50_000),
        "currency": rng.choice(["EUR", "USD", "GBP"]),
        "reason": rng.choice(_REASONS),
        "days_since_delivery": rng.randrange(0, 60),
        # a card number in the source data: it must never reach Kafka or Redis
        "payment_card": "4242 4242 4242 4242",
    }


def model_decision(seed: int, run_id: str, order: dict[str, Any]) -> Metered[dict[str, Any]]:
    """The fake LLM's decision and what it cost (deterministic for the seed)."""
    rng = _rng(seed, run_id, "model")
    approve = order["days_since_delivery"] <= 30 and order["reason"] != "changed my mind"
    share = rng.choice([100, 100, 50]) if approve else 0
    amount = order["amount_cents"] * share // 100
    explanation = (
        f"The customer reports '{order['reason']}' {order['days_since_delivery']} days after "
        f"delivery; policy allows {'a' if approve else 'no'} refund ({share}%)."
    )
    tokens = 180 + rng.randrange(0, 400) + len(explanation)
    decision = {"approve": approve, "amount_cents": amount, "explanation": explanation}
    return Metered(decision, tokens=tokens, usd=round(tokens * USD_PER_TOKEN, 6))


def spec_for(run_id: str, seed: int) -> RunSpec:
    """The run spec of one demo run."""
    return RunSpec(
        run_id=run_id,
        agent=AGENT,
        plan=PLAN,
        input={"seed": seed, "order_id": f"ord-{run_id}"},
        versions=VERSIONS,
        limits=Limits(tokens=50_000, usd=1.0, steps=25, consecutive_errors=3),
    )


async def refund_agent(run: Run, seed: int, *, think_s: float = 0.0) -> dict[str, Any]:
    """Walk the plan; each step has an acceptance check; effects go to provider ``sandbox``."""
    run_id = run.run_id

    async def fetch(step: Step) -> Any:
        async def read() -> dict[str, Any]:
            return order_of(seed, run_id)

        return await step.read("load_order", f"orders://demo/ord-{run_id}", read)

    order = await run.step(
        "fetch_order",
        fetch,
        accept=lambda o: Check("order_found", o["order_id"] == f"ord-{run_id}"),
    )

    async def decide(step: Step) -> Any:
        async def call_model() -> Metered[dict[str, Any]]:
            if think_s:
                await asyncio.sleep(think_s)
            return model_decision(seed, run_id, order)

        return await step.activity("llm_decide", call_model)

    decision = await run.step(
        "decide",
        decide,
        accept=lambda d: [
            Check("amount_in_range", 0 <= d["amount_cents"] <= order["amount_cents"]),
            Check("explained", bool(d["explanation"])),
        ],
    )

    async def refund(step: Step) -> Any:
        if not decision["approve"] or decision["amount_cents"] == 0:
            return {"refunded_cents": 0, "confirmed": True}
        request = EffectRequest(
            kind="payments",
            identity={
                "order_id": order["order_id"],
                "amount_cents": decision["amount_cents"],
                "currency": order["currency"],
                "direction": "refund",
            },
            free_text={"memo": f"refund for {order['order_id']}: {order['reason']}"},
        )
        done = await step.effect("refund_payment", request, provider="sandbox")
        return {"refunded_cents": decision["amount_cents"], "confirmed": bool(done.external_ref)}

    refunded = await run.step("refund", refund, accept=_confirmed)

    async def email(step: Step) -> Any:
        request = EffectRequest(
            kind="emails",
            identity={
                "to": order["customer"],
                "template": "refund_decision",
                "order_id": order["order_id"],
            },
            free_text={
                "subject": f"Your request about {order['order_id']}",
                "body": decision["explanation"],
            },
        )
        done = await step.effect("email_customer", request, provider="sandbox")
        return {"emailed": order["customer"], "confirmed": bool(done.external_ref)}

    await run.step("email", email, accept=_confirmed)

    async def ticket(step: Step) -> Any:
        request = EffectRequest(
            kind="tickets",
            identity={"order_id": order["order_id"], "queue": "refunds"},
            free_text={"summary": f"{order['reason']}: refunded {refunded['refunded_cents']}"},
        )
        done = await step.effect("open_ticket", request, provider="sandbox")
        return {"queue": "refunds", "confirmed": bool(done.external_ref)}

    await run.step("ticket", ticket, accept=_confirmed)
    result = {
        "order_id": order["order_id"],
        "approved": decision["approve"],
        "refunded_cents": refunded["refunded_cents"],
        "currency": order["currency"],
    }
    await run.finish(result)
    return result


def _confirmed(result: Any) -> Check:
    return Check("provider_confirmed", bool(result.get("confirmed")))


def expected_effects(seed: int, run_id: str) -> list[str]:
    """The effect kinds an uninterrupted run of this seed performs, in order."""
    decision = model_decision(seed, run_id, order_of(seed, run_id)).value
    refund = ["payments"] if decision["approve"] and decision["amount_cents"] > 0 else []
    return [*refund, "emails", "tickets"]

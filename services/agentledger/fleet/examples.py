"""Agents to run on a fleet: the demo's refund agent, and the same agent behind an approval gate.

``agentledger worker --agent agentledger.fleet.examples:refund`` (or ``:gated_refund``). Input:
``{"seed": 7, "think_s": 0.2}``; the seed picks the order, ``think_s`` slows the model call.
Effects go to the provider ``sandbox`` at ``AGENTLEDGER_PROVIDER_URL``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from agentledger._core.spec import Check, RunSpec
from agentledger.demo import PLAN, model_decision, order_of, refund_agent, spec_for
from agentledger.fleet.agent import Agent
from agentledger.fleet.settings import FleetSettings
from agentledger.providers.http import HttpProvider
from agentledger.providers.protocol import EffectRequest, Provider
from agentledger.worker import Run, Step

GATED_AGENT = "refund-gated"
GATED_PLAN: tuple[str, ...] = ("fetch_order", "decide", "refund", "email")


def _seed(value: Any) -> int:
    return int(value.get("seed", 0)) if isinstance(value, Mapping) else 0


def _think(value: Any) -> float:
    return float(value.get("think_s", 0.0)) if isinstance(value, Mapping) else 0.0


def _sandbox(settings: FleetSettings) -> dict[str, Provider]:
    return {"sandbox": HttpProvider.from_settings(settings, name="sandbox")}


def refund(settings: FleetSettings) -> Agent:
    """The demo's refund agent (fetch order, decide, refund, email, ticket)."""

    def spec(run_id: str, value: Any) -> RunSpec:
        return dataclasses.replace(spec_for(run_id, _seed(value)), input=value)

    async def body(run: Run, value: Any) -> Any:
        return await refund_agent(run, _seed(value), think_s=_think(value))

    base = spec_for("x", 0)
    return Agent(name=base.agent, spec=spec, body=body, providers=lambda: _sandbox(settings))


def approval_intent(order: Mapping[str, Any]) -> dict[str, Any]:
    """What the gated agent asks a human to approve: a full refund of the order (its hash is
    the intent hash)."""
    return {
        "order_id": order["order_id"],
        "amount_cents": order["amount_cents"],
        "currency": order["currency"],
    }


def refund_intent(seed: int, run_id: str) -> dict[str, Any]:
    """The intent a fresh gated run of ``seed`` asks approval for."""
    return approval_intent(order_of(seed, run_id))


def gated_refund(settings: FleetSettings) -> Agent:
    """A refund that needs a human's approval of (order, amount, currency) before it is paid."""

    def spec(run_id: str, value: Any) -> RunSpec:
        base = spec_for(run_id, _seed(value))
        return dataclasses.replace(base, agent=GATED_AGENT, plan=GATED_PLAN, input=value)

    async def body(run: Run, value: Any) -> Any:
        return await _gated(run, _seed(value), _think(value))

    return Agent(name=GATED_AGENT, spec=spec, body=body, providers=lambda: _sandbox(settings))


async def _gated(run: Run, seed: int, think_s: float) -> dict[str, Any]:
    run_id = run.run_id

    async def fetch(step: Step) -> Any:
        async def read() -> dict[str, Any]:
            return order_of(seed, run_id)

        return await step.read("load_order", f"orders://demo/ord-{run_id}", read)

    order = await run.step("fetch_order", fetch)

    async def decide(step: Step) -> Any:
        async def call_model() -> Any:
            return model_decision(seed, run_id, order)

        return await step.activity("llm_decide", call_model)

    decision = await run.step("decide", decide)

    async def pay(step: Step) -> Any:
        intent = approval_intent(order)
        await step.approval(intent, ask=f"refund {intent['amount_cents']} to {order['order_id']}")
        request = EffectRequest(
            kind="payments",
            identity={**intent, "direction": "refund"},
            free_text={"memo": f"approved refund for {order['order_id']}"},
        )
        done = await step.effect("refund_payment", request, provider="sandbox")
        return {"refunded_cents": intent["amount_cents"], "ref": done.external_ref}

    paid = await run.step("refund", pay, accept=lambda r: Check("paid", bool(r["ref"])))

    async def email(step: Step) -> Any:
        if think_s:
            await asyncio.sleep(think_s)
        request = EffectRequest(
            kind="emails",
            identity={
                "to": order["customer"],
                "template": "refund_paid",
                "order_id": order["order_id"],
            },
            free_text={"body": decision["explanation"]},
        )
        done = await step.effect("email_customer", request, provider="sandbox")
        return {"emailed": order["customer"], "ref": done.external_ref}

    await run.step("email", email)
    result = {"order_id": order["order_id"], "refunded_cents": paid["refunded_cents"]}
    await run.finish(result)
    return result


BENCH_AGENT = "bench-steps"


def steps(settings: FleetSettings) -> Agent:
    """A plain agent for measurements: ``{"steps": N, "bytes": B, "think_s": T}`` runs N steps,
    each recording a model call (T seconds) and checkpointing a B-byte result; no effects."""

    def spec(run_id: str, value: Any) -> RunSpec:
        count = int(value.get("steps", 10)) if isinstance(value, Mapping) else 10
        plan = tuple(f"step{i}" for i in range(count))
        return RunSpec(run_id=run_id, agent=BENCH_AGENT, plan=plan, input=value)

    async def body(run: Run, value: Any) -> Any:
        size = int(value.get("bytes", 1024)) if isinstance(value, Mapping) else 1024
        think = _think(value)
        for name in run.view.plan:

            async def work(step: Step, name: str = name) -> Any:
                async def model() -> str:
                    if think:
                        await asyncio.sleep(think)
                    return "x" * size

                text = await step.activity("model", model, durable=False)
                return {"step": name, "chars": len(text)}

            await run.step(name, work)
        return None

    return Agent(name=BENCH_AGENT, spec=spec, body=body, providers=dict)


__all__ = [
    "BENCH_AGENT",
    "GATED_AGENT",
    "GATED_PLAN",
    "PLAN",
    "approval_intent",
    "gated_refund",
    "refund",
    "refund_intent",
    "steps",
]

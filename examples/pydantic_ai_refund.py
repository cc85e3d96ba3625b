"""A Pydantic AI support agent on agentledger: a refund tool that is an effect, behind an approval.

    python examples/pydantic_ai_refund.py start   --run r1 --order ord-7 --amount 2500
    python examples/pydantic_ai_refund.py approve --run r1          # or --reject
    python examples/pydantic_ai_refund.py resume  --run r1          # continue a run that died

The agent's model is a scripted ``FunctionModel`` (swap in ``"openai:gpt-5"`` or any model; the
example needs no API key): it asks for ``refund``, then ``email_customer``, then answers. Both
tools are effect tools: each call is an agentledger effect, performed once however often the
run is resumed or the model retries. ``refund`` first pauses the run until a person approves.
Every command is its own process; the run lives in Kafka, so any process can continue it. The
provider is the sandbox (AGENTLEDGER_PROVIDER_URL, else one served in the process by
``agentledger.connect`` on a file in the stack's state directory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import agentledger
from agentledger.cli import configure_logging
from agentledger.errors import ApprovalError, RunPausedError
from agentledger.integrations.pydantic_ai import AgentLedgerDurability, effect_tool, run_agent
from agentledger.providers import EffectRequest
from agentledger.worker import Limits, WorkerSettings

# --- the effect tools -------------------------------------------------------------------


@effect_tool(provider="sandbox", approval="approve this refund?")
def refund(order_id: str, amount_cents: int, reason: str = "") -> EffectRequest:
    """Refund an order: identity is what makes two refunds the same; the reason is free text."""
    return EffectRequest(
        kind="refunds",
        identity={"order_id": order_id, "amount_cents": amount_cents, "currency": "EUR"},
        free_text={"reason": reason},
    )


@effect_tool(provider="sandbox")
def email_customer(order_id: str, body: str) -> EffectRequest:
    """Tell the customer; the body may be reworded on a re-run without a second email."""
    return EffectRequest(
        kind="emails",
        identity={"order_id": order_id, "template": "refund_done"},
        free_text={"body": body},
    )


# --- the scripted model -----------------------------------------------------------------


class ScriptedModel:
    """Refund, then email, then answer; counts the requests it is sent (shown in the output)."""

    def __init__(self, order_id: str, amount_cents: int) -> None:
        self.order_id = order_id
        self.amount_cents = amount_cents
        self.requests: list[int] = []  # messages in each request this process sent

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """The next response, from the tool results in the conversation so far."""
        del info
        self.requests.append(len(messages))
        done = {
            p.tool_name
            for m in messages
            for p in m.parts
            if p.part_kind == "tool-return" and getattr(p, "outcome", "success") == "success"
        }
        order, amount = self.order_id, self.amount_cents
        if "refund" not in done:
            args = {"order_id": order, "amount_cents": amount, "reason": "parcel arrived damaged"}
            return ModelResponse(parts=[ToolCallPart("refund", args, tool_call_id="refund")])
        if "email_customer" not in done:
            body = f"We refunded {amount / 100:.2f} EUR for order {order}."
            args = {"order_id": order, "body": body}
            return ModelResponse(parts=[ToolCallPart("email_customer", args, tool_call_id="mail")])
        return ModelResponse(parts=[TextPart(f"Order {order} refunded and the customer told.")])


def build(model: ScriptedModel) -> Agent[None, str]:
    """The support agent, durable on agentledger."""
    agent: Agent[None, str] = Agent(
        FunctionModel(model, model_name="scripted-support"),
        name="support",
        instructions="You are a support agent. Refund damaged orders, then tell the customer.",
        capabilities=[AgentLedgerDurability()],
    )
    agent.tool_plain(refund)
    agent.tool_plain(email_customer)
    return agent


# --- the command line -------------------------------------------------------------------


async def run(args: argparse.Namespace, settings: WorkerSettings) -> dict[str, Any]:
    """Run one command against the run ``args.run``."""
    model = ScriptedModel(args.order, args.amount)
    prompt = f"Please refund order {args.order} ({args.amount} cents): it arrived damaged."
    # The configured provider, else a sandbox served here on a file in the stack's state dir.
    sandbox = settings.provider_url or "sandbox"
    async with agentledger.connect({"sandbox": sandbox}, settings=settings) as conn:
        if args.command == "approve":
            await conn.ledger.decide(
                args.run, "rejected" if args.reject else "approved", approver="example-cli"
            )
        answer: dict[str, Any] = {"run": args.run, "model_requests": model.requests}
        try:
            done = await run_agent(
                build(model), prompt, ledger=conn.ledger, run_id=args.run, limits=Limits(steps=20)
            )
        except RunPausedError as e:
            return {**answer, "status": "paused", "waiting_for": e.reason}
        except ApprovalError as e:
            return {**answer, "status": "rejected", "error": str(e)}
        return {**answer, "status": done.status, "output": done.output, "sent": done.sent}


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, build the settings here (the edge), run, print JSON."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--run", required=True, help="the agentledger run id")
    common.add_argument("--order", default="ord-7")
    common.add_argument("--amount", type=int, default=2500, help="cents")
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("start", parents=[common], help="start (stops at the approval)")
    approve = sub.add_parser("approve", parents=[common], help="answer the approval, go on")
    approve.add_argument("--reject", action="store_true")
    sub.add_parser("resume", parents=[common], help="continue a run whose process died")
    args = parser.parse_args(argv)
    settings = WorkerSettings()
    configure_logging(settings.log_level)  # logs on stderr, the JSON answer on stdout
    print(json.dumps(asyncio.run(run(args, settings)), indent=2))  # noqa: T201 - CLI output


if __name__ == "__main__":
    main()

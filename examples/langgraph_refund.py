"""A small LangGraph refund agent on agentledger: tools with effects, a human approval in between.

    python examples/langgraph_refund.py start   --thread t1 --order ord-7 --amount 2500
    python examples/langgraph_refund.py approve --thread t1          # or --reject
    python examples/langgraph_refund.py show    --thread t1

The graph: ``agent`` (a scripted stand-in for a chat model, so the example needs no API key)
asks for tool calls; a ``refund`` call first goes through ``approval``, which interrupts the
graph until a person answers; ``tools`` runs the calls. ``refund`` and ``email_customer`` are
effect tools: each call is an agentledger effect performed once, however often the node runs.
Each command is a separate process; the thread lives in Kafka (checkpoints are agentledger
events), so any process can continue it. The provider is the sandbox (AGENTLEDGER_PROVIDER_URL,
else one started here on ``.agentledger/examples/sandbox.db``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from agentledger.cli import configure_logging
from agentledger.integrations.langgraph import (
    AgentLedgerSaver,
    EffectResult,
    SaverSettings,
    effect_tool,
)
from agentledger.providers import EffectRequest, HttpProvider
from agentledger.providers.sandbox import SandboxProcess


class State(TypedDict):
    """The thread's state: the conversation grows by appending (stored as deltas)."""

    messages: Annotated[list[AnyMessage], add_messages]
    order_id: str
    amount_cents: int


# --- the effect tools -------------------------------------------------------------------


@effect_tool(provider="sandbox")
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


TOOLS: dict[str, Callable[..., Awaitable[EffectResult]]] = {
    "refund": refund,
    "email_customer": email_customer,
}


# --- the nodes --------------------------------------------------------------------------


def agent(state: State) -> dict[str, Any]:
    """Scripted model: refund, then email, then a final answer (swap in a real chat model)."""
    done = {m.name for m in state["messages"] if isinstance(m, ToolMessage)}
    order, amount = state["order_id"], state["amount_cents"]
    if "refund" not in done:
        args = {"order_id": order, "amount_cents": amount, "reason": "parcel arrived damaged"}
        call = {"name": "refund", "args": args, "id": "call-refund"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    if "email_customer" not in done:
        body = f"We refunded {amount / 100:.2f} EUR for order {order}."
        call = {"name": "email_customer", "args": {"order_id": order, "body": body}, "id": "email"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content=f"Order {order} refunded and the customer told.")]}


def approval(state: State) -> Command[Any]:
    """Ask a person before any refund; the graph stops here until `approve` answers."""
    last = state["messages"][-1]
    asked = [c["args"] for c in getattr(last, "tool_calls", []) if c["name"] == "refund"]
    answer = interrupt({"question": "approve this refund?", "refunds": asked})
    if answer.get("approved"):
        return Command(goto="tools")
    note = AIMessage(content=f"Refund for order {state['order_id']} was not approved.")
    return Command(goto=END, update={"messages": [note]})


async def tools(state: State) -> dict[str, Any]:
    """Run the last message's tool calls one after another (their order numbers the effects)."""
    last = state["messages"][-1]
    out: list[AnyMessage] = []
    for call in getattr(last, "tool_calls", []):
        done: EffectResult = await TOOLS[call["name"]](**call["args"])
        content = json.dumps({"ref": done.external_ref, "replayed": done.replayed})
        out.append(ToolMessage(content=content, name=call["name"], tool_call_id=call["id"]))
    return {"messages": out}


def route(state: State) -> str:
    """After the model: approval before refunds, tools for other calls, else the end."""
    calls = getattr(state["messages"][-1], "tool_calls", [])
    if any(c["name"] == "refund" for c in calls):
        return "approval"
    return "tools" if calls else END


def build(saver: AgentLedgerSaver) -> CompiledStateGraph[State, None, State, State]:
    """The refund graph, checkpointed by ``saver``."""
    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("approval", approval, destinations=("tools", END))
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["approval", "tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


# --- the command line -------------------------------------------------------------------


@asynccontextmanager
async def provider_url(settings: SaverSettings) -> AsyncIterator[str]:
    """The configured provider, else a sandbox started here on a durable file."""
    if settings.provider_url:
        yield settings.provider_url
        return
    db = settings.state_dir / "examples" / "sandbox.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    async with SandboxProcess(db) as sandbox:
        yield sandbox.url


def summary(state: Any) -> dict[str, Any]:
    """What the thread looks like now, as JSON."""
    messages = state.values.get("messages", [])
    return {
        "next": list(state.next),
        "waiting_for": [i.value for i in state.interrupts],
        "messages": [
            {"type": m.type, "name": getattr(m, "name", None), "content": m.content}
            for m in messages
        ],
    }


async def run(args: argparse.Namespace, settings: SaverSettings) -> dict[str, Any]:
    """Run one command against the thread ``args.thread``."""
    config: Any = {"configurable": {"thread_id": args.thread}}
    async with provider_url(settings) as url, HttpProvider(url, name="sandbox") as sandbox:
        saver = AgentLedgerSaver.from_settings(settings, providers={"sandbox": sandbox})
        async with saver:
            graph = build(saver)
            if args.command == "start":
                first: State = {
                    "messages": [HumanMessage(content=f"Please refund order {args.order}.")],
                    "order_id": args.order,
                    "amount_cents": args.amount,
                }
                await graph.ainvoke(first, config)
            elif args.command == "approve":
                state = await graph.aget_state(config)
                if state.interrupts:  # waiting for the person: answer it
                    answer: Command[Any] = Command(resume={"approved": not args.reject})
                    await graph.ainvoke(answer, config)
                elif state.next:  # a process died mid-run: continue from the last checkpoint
                    await graph.ainvoke(None, config)
            return summary(await graph.aget_state(config))


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, build the settings here (the edge), run, print JSON."""
    thread = argparse.ArgumentParser(add_help=False)
    thread.add_argument("--thread", required=True, help="the LangGraph thread id")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", parents=[thread], help="start (stops at the approval)")
    start.add_argument("--order", required=True)
    start.add_argument("--amount", type=int, required=True, help="cents")
    approve = sub.add_parser("approve", parents=[thread], help="answer it, or continue a dead run")
    approve.add_argument("--reject", action="store_true")
    sub.add_parser("show", parents=[thread], help="print the thread")
    args = parser.parse_args(argv)
    settings = SaverSettings()
    configure_logging(settings.log_level)  # logs on stderr, the JSON answer on stdout
    print(json.dumps(asyncio.run(run(args, settings)), indent=2))  # noqa: T201 - CLI output


if __name__ == "__main__":
    main()

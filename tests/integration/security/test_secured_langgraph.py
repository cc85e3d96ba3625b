"""The LangGraph saver over the secured stack: a graph with an effect, checkpointed to Kafka over
SASL_SSL/SCRAM and mTLS, its leases and views in TLS Redis with the ACL user."""

from __future__ import annotations

import io
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from agentledger.bus.kafka import KafkaEventLog
from agentledger.events import EffectIntended, EffectRecorded
from agentledger.integrations.langgraph import AgentLedgerSaver, EffectResult, effect_tool
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.stack.secure import SecureStack
from tests.langgraph_support import saver_settings, thread_config

from .conftest import isolated

pytestmark = pytest.mark.integration


@effect_tool(provider="pay")
def charge(order: str, amount: int) -> EffectRequest:
    """Charge an order."""
    return EffectRequest(kind="payments", identity={"order": order, "amount": amount})


class Order(TypedDict):
    """State of the charging graph: the order, the provider's reference, a confirmation."""

    order: str
    amount: int
    ref: str
    note: str


async def _charge(state: Order) -> dict[str, Any]:
    result: EffectResult = await charge(state["order"], state["amount"])
    return {"ref": result.external_ref}


def _confirm(state: Order) -> dict[str, Any]:
    return {"note": f"charged {state['amount']} as {state['ref']}"}


def order_graph(saver: AgentLedgerSaver) -> Any:
    """START -> charge (one effect) -> confirm -> END."""
    graph = StateGraph(Order)
    graph.add_node("charge", _charge)
    graph.add_node("confirm", _confirm)
    graph.add_edge(START, "charge")
    graph.add_edge("charge", "confirm")
    graph.add_edge("confirm", END)
    compiled: CompiledStateGraph[Order, None, Order, Order] = graph.compile(checkpointer=saver)
    return compiled


@pytest.mark.parametrize("mode", ["SCRAM-SHA-256", "mTLS"])
async def test_a_graph_with_an_effect_over_the_secured_stack(
    secure: SecureStack, mode: str, all_logs: io.StringIO
) -> None:
    """The graph charges once through the saver, its intent and outcome are in the secured
    Kafka, a second saver restores the finished thread, and with every logger at DEBUG the
    password appears nowhere in the log."""
    async for common in isolated(secure, mode):
        settings = saver_settings(common)
        provider = MemoryProvider(name="pay")
        config = thread_config("secured")
        start: Order = {"order": "o-1", "amount": 12, "ref": "", "note": ""}
        async with AgentLedgerSaver.from_settings(settings, providers={"pay": provider}) as saver:
            done = await order_graph(saver).ainvoke(start, config)
        [performed] = provider.effects
        assert done["ref"] == performed.id
        assert done["note"] == f"charged 12 as {performed.id}"
        async with AgentLedgerSaver.from_settings(settings, providers={"pay": provider}) as again:
            state = await order_graph(again).aget_state(config)
        assert state.values == done
        assert len(provider.effects) == 1
        async with KafkaEventLog(settings, transactional_id=f"{common.key_prefix}-r") as kafka:
            events = await kafka.read_run("lg.secured")
        intents = [e for e in events if isinstance(e, EffectIntended)]
        recorded = [e for e in events if isinstance(e, EffectRecorded)]
        assert [e.idempotency_key for e in intents] == [performed.idempotency_key]
        assert [(e.outcome, e.external_ref) for e in recorded] == [("succeeded", performed.id)]
    text = all_logs.getvalue()
    assert "kafka" in text.lower()  # the libraries did log
    assert secure.password not in text

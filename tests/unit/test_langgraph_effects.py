"""effect_tool inside LangGraph nodes: intent first, one key per place, never performed twice."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, RetryPolicy, interrupt

from agentledger.errors import (
    ConfigurationError,
    EffectFailedError,
    EffectUnknownError,
    IdentityMismatchError,
    ProviderRequestError,
)
from agentledger.events import Alert, EffectIntended, EffectReconciled, EffectRecorded, RunPaused
from agentledger.integrations.langgraph import AgentLedgerSaver, EffectResult, effect_tool
from agentledger.providers.faults import FaultRule
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest, ProviderResult
from agentledger.testing import CrashSwitch, SimulatedCrash
from tests.langgraph_support import MemoryPorts, thread_config


class CountingProvider(MemoryProvider):
    """A memory provider that counts every perform call and can check the log at that moment."""

    def __init__(self, ports: MemoryPorts) -> None:
        super().__init__(name="pay")
        self.calls = 0
        self.ports = ports
        self.intents_seen: list[int] = []

    async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
        """Count the call and how many intents for ``key`` were durable when it came in."""
        self.calls += 1
        effects = self.ports.log.events(self.ports.log.topics.effects)
        self.intents_seen.append(
            sum(1 for e in effects if isinstance(e, EffectIntended) and e.idempotency_key == key)
        )
        return await super().perform(request, key)


class RefusingProvider(CountingProvider):
    """A provider that refuses every request (as a 4xx would)."""

    async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
        """Count the call, then refuse it."""
        self.calls += 1
        raise ProviderRequestError("no such order")


@effect_tool(provider="pay")
def charge(order: str, amount: int, note: str = "") -> EffectRequest:
    """Charge an order."""
    return EffectRequest(
        kind="payments", identity={"order": order, "amount": amount}, free_text={"note": note}
    )


class Order(TypedDict):
    """State of the one-node charging graph."""

    order: str
    amount: int
    refs: list[str]


async def _charge_twice(state: Order) -> dict[str, Any]:
    first: EffectResult = await charge(state["order"], state["amount"], note="first")
    second: EffectResult = await charge(state["order"], state["amount"] + 1)
    return {"refs": [first.external_ref, second.external_ref]}


def order_graph(saver: AgentLedgerSaver, node: Any = _charge_twice, **kw: Any) -> Any:
    """START -> charge -> END."""
    graph = StateGraph(Order)
    graph.add_node("charge", node, **kw)
    graph.add_edge(START, "charge")
    graph.add_edge("charge", END)
    compiled: CompiledStateGraph[Order, None, Order, Order] = graph.compile(checkpointer=saver)
    return compiled


START_STATE: Order = {"order": "o-1", "amount": 10, "refs": []}
RETRY = RetryPolicy(initial_interval=0.01, retry_on=RuntimeError)


async def test_each_call_is_one_effect_with_a_durable_intent_before_the_provider() -> None:
    """Two calls in a node are two effects; each intent is in the log when the provider runs,
    and the outcome is recorded with the provider's reference."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    async with ports.saver(providers={"pay": provider}) as saver:
        out = await order_graph(saver).ainvoke(START_STATE, thread_config("two"))
    assert provider.calls == 2
    assert provider.intents_seen == [1, 1]
    assert out["refs"] == [e.id for e in provider.effects]
    recorded = [e for e in await ports.log.read_run("lg.two") if isinstance(e, EffectRecorded)]
    assert [(r.outcome, r.external_ref) for r in recorded] == [
        ("succeeded", provider.effects[0].id),
        ("succeeded", provider.effects[1].id),
    ]


async def test_crash_after_provider_commit_is_resolved_by_lookup_not_a_second_call() -> None:
    """Killed right after the provider performed the first effect; the resumed graph looks the
    key up, records it as landed, and performs only the second effect."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    config = thread_config("crash")
    crash = CrashSwitch("after_provider_commit", 1)
    async with ports.saver(providers={"pay": provider}, kill_switch=crash) as doomed:
        with pytest.raises(SimulatedCrash):
            await order_graph(doomed).ainvoke(START_STATE, config)
    assert provider.calls == 1
    async with ports.saver(providers={"pay": provider}) as saver:
        out = await order_graph(saver).ainvoke(None, config)
    assert provider.calls == 2
    assert len(provider.effects) == 2
    assert provider.lookups[provider.effects[0].idempotency_key] == 1
    assert out["refs"] == [e.id for e in provider.effects]
    events = await ports.log.read_run("lg.crash")
    landed = [e for e in events if isinstance(e, EffectReconciled)]
    assert [(e.finding, e.external_ref) for e in landed] == [("LANDED", provider.effects[0].id)]


async def test_a_retried_node_gets_its_recorded_effects_back() -> None:
    """A node that fails after its effect and is retried by LangGraph replays the outcome."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    attempts: list[bool] = []

    async def flaky(state: Order) -> dict[str, Any]:
        done = await charge(state["order"], state["amount"])
        attempts.append(done.replayed)
        if len(attempts) == 1:
            raise RuntimeError("model timed out after the charge")
        return {"refs": [done.external_ref]}

    async with ports.saver(providers={"pay": provider}) as saver:
        graph = order_graph(saver, flaky, retry_policy=RETRY)
        out = await graph.ainvoke(START_STATE, thread_config("retry"))
    assert attempts == [False, True]
    assert provider.calls == 1
    assert out["refs"] == [provider.effects[0].id]


async def test_call_numbers_survive_the_thread_being_released_between_calls() -> None:
    """A node whose thread is released (idle) between two effect calls still numbers the second
    call 1: two effects, not the first one's outcome (or a mismatch) for the second."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    async with ports.saver(providers={"pay": provider}) as saver:

        async def slow(state: Order) -> dict[str, Any]:
            first = await charge(state["order"], 1)
            await saver.release("slow")  # what the idle reaper does during a long model call
            second = await charge(state["order"], 2)
            return {"refs": [first.external_ref, second.external_ref]}

        out = await order_graph(saver, slow).ainvoke(START_STATE, thread_config("slow"))
    assert provider.calls == 2
    assert len(set(out["refs"])) == 2


class Refs(TypedDict):
    """State of the branching graph: every node adds its references."""

    refs: Annotated[list[str], operator.add]


async def _left(state: Refs) -> dict[str, Any]:
    return {"refs": [(await charge("left", 1)).external_ref or ""]}


async def _right(state: Refs) -> dict[str, Any]:
    return {"refs": [(await charge("right", 2)).external_ref or ""]}


async def _ask(state: Refs) -> dict[str, Any]:
    done = await charge("sub", 5)
    interrupt("go on?")
    return {"refs": [f"{done.external_ref}:{done.replayed}"]}


async def test_parallel_nodes_and_a_subgraph_interrupted_after_its_effect() -> None:
    """Two nodes of one superstep get their own keys; a subgraph node that performed an effect
    and then interrupted gets it back, not redone, when another process resumes it."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    sub = StateGraph(Refs)
    sub.add_node("ask", _ask)
    sub.add_edge(START, "ask")
    sub.add_edge("ask", END)
    graph = StateGraph(Refs)
    graph.add_node("left", _left)
    graph.add_node("right", _right)
    graph.add_node("sub", sub.compile())
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    graph.add_edge("left", "sub")
    graph.add_edge("right", "sub")
    graph.add_edge("sub", END)
    config = thread_config("branches")
    async with ports.saver(providers={"pay": provider}) as saver:
        first = await graph.compile(checkpointer=saver).ainvoke({"refs": []}, config)
    assert "__interrupt__" in first
    assert provider.calls == 3
    async with ports.saver(providers={"pay": provider}) as other:
        done = await graph.compile(checkpointer=other).ainvoke(Command(resume=True), config)
    assert provider.calls == 3
    assert len({e.idempotency_key for e in provider.effects}) == 3
    assert done["refs"][-1] == f"{provider.effects[2].id}:True"


async def test_changed_identity_on_a_rerun_stops_with_an_alert() -> None:
    """A re-run asking the same place for another amount raises IdentityMismatchError, alerts,
    and sends nothing."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    amounts = iter([10, 99])

    async def fickle(state: Order) -> dict[str, Any]:
        done = await charge(state["order"], next(amounts))
        if done.external_ref and not done.replayed:
            raise RuntimeError("crash before the node returns")
        return {"refs": [done.external_ref]}

    async with ports.saver(providers={"pay": provider}) as saver:
        graph = order_graph(saver, fickle, retry_policy=RETRY)
        with pytest.raises(IdentityMismatchError) as info:
            await graph.ainvoke(START_STATE, thread_config("fickle"))
    assert provider.calls == 1
    assert info.value.recorded_hash != info.value.new_hash
    alerts = [a for a in ports.log.events(ports.log.topics.alerts) if isinstance(a, Alert)]
    assert [a.code for a in alerts] == ["effect.identity_mismatch"]


async def test_effects_need_saved_checkpoints() -> None:
    """durability='exit' saves no checkpoint to bind keys to: the tool refuses to run."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    async with ports.saver(providers={"pay": provider}) as saver:
        with pytest.raises(ConfigurationError, match="durability"):
            await order_graph(saver).ainvoke(START_STATE, thread_config("exit"), durability="exit")
    assert provider.calls == 0


async def test_effect_tool_outside_a_graph_is_a_configuration_error() -> None:
    """Calling an effect tool outside a LangGraph node explains what is missing."""
    with pytest.raises(ConfigurationError, match="inside a LangGraph node"):
        await charge("o", 1)


async def test_unreachable_provider_records_unknown_alerts_and_a_rerun_looks_it_up() -> None:
    """Provider down: the outcome is recorded unknown (once) with an alert, the thread is not
    paused for it; a re-run (new process) with the provider still down fails its lookup the
    same way, and once it is back the lookup finds nothing and the effect is sent once."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    config = thread_config("down")
    provider.set_faults(FaultRule(mode="down"))
    async with ports.saver(providers={"pay": provider}) as saver:
        with pytest.raises(EffectUnknownError, match="outcome unknown: pay is down") as first:
            await order_graph(saver).ainvoke(START_STATE, config)
    async with ports.saver(providers={"pay": provider}) as saver:
        with pytest.raises(EffectUnknownError, match="outcome unknown: lookup at pay failed"):
            await order_graph(saver).ainvoke(None, config)
    provider.clear_faults()
    async with ports.saver(providers={"pay": provider}) as saver:
        out = await order_graph(saver).ainvoke(None, config)
    key = first.value.key
    assert provider.effects[0].idempotency_key == key
    assert out["refs"] == [e.id for e in provider.effects]
    events = await ports.log.read_run("lg.down")
    about_key = [
        (type(e).__name__, getattr(e, "outcome", None) or getattr(e, "finding", None))
        for e in events
        if getattr(e, "idempotency_key", None) == key
    ]
    assert about_key == [
        ("EffectIntended", None),
        ("EffectRecorded", "unknown"),
        ("EffectReconciled", "NOT_LANDED"),
        ("EffectIntended", None),
        ("EffectRecorded", "succeeded"),
    ]
    pauses = [e.reason for e in events if isinstance(e, RunPaused)]
    assert "effect_unknown" not in pauses
    alerts = [a for a in ports.log.events(ports.log.topics.alerts) if isinstance(a, Alert)]
    assert {a.code for a in alerts} == {"effect.unknown"}


async def test_a_refused_effect_is_recorded_failed_and_not_sent_again() -> None:
    """A provider refusal is recorded as a failed outcome at once; a re-run of the node gets
    (in a new process) EffectFailedError from the record without calling the provider again."""
    ports = MemoryPorts()
    provider = RefusingProvider(ports)
    config = thread_config("refused")
    async with ports.saver(providers={"pay": provider}) as saver:
        refused = "the provider refused the effect: no such order"
        with pytest.raises(EffectFailedError, match=refused):
            await order_graph(saver).ainvoke(START_STATE, config)
    calls = provider.calls
    async with ports.saver(providers={"pay": provider}) as saver:
        with pytest.raises(EffectFailedError, match="the provider refused this effect earlier"):
            await order_graph(saver).ainvoke(None, config)
    assert provider.calls == calls == 1
    recorded = [e for e in await ports.log.read_run("lg.refused") if isinstance(e, EffectRecorded)]
    assert [e.outcome for e in recorded] == ["failed"]

"""Shared by the LangGraph tests: settings without the environment, savers, a growing graph."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph

from agentledger._core.killswitch import KillSwitch
from agentledger.bus.memory import MemoryEventLog
from agentledger.integrations.langgraph import AgentLedgerSaver, SaverSettings
from agentledger.leasing import MemoryLeaseStore
from agentledger.providers.protocol import Provider
from agentledger.settings import ArgumentsOnly, CommonSettings


class IsolatedSaverSettings(ArgumentsOnly, SaverSettings):
    """SaverSettings from explicit values only: the environment cannot leak into tests."""


def saver_settings(base: CommonSettings | None = None, **overrides: Any) -> SaverSettings:
    """Saver settings on ``base``'s endpoints and names, with test-friendly timings."""
    values: dict[str, Any] = base.model_dump() if base is not None else {}
    values.setdefault("kafka_bootstrap", "127.0.0.1:9")
    values.setdefault("redis_url", "redis://127.0.0.1:9/0")
    values.update(
        lease_ttl_ms=3_000,
        idle_release_ms=60_000,
        lease_wait_s=5.0,
        checkpoint_wait_ms=5_000,
        resume_barrier_s=0.0,
    )
    values.update(overrides)
    return IsolatedSaverSettings(**values)


class MemoryPorts:
    """One in-memory "cluster" (log + leases) shared by the savers of a test, like processes."""

    def __init__(self) -> None:
        self.leases = MemoryLeaseStore()
        self.log = MemoryEventLog(guard=self.leases)

    def stored_bytes(self) -> int:
        """Bytes of every record value in the log (what Kafka would store, minus overhead)."""
        topics = self.log.topics
        return sum(
            len(r.value or b"") for topic in topics.run_topics for r in self.log.records(topic)
        )

    @asynccontextmanager
    async def saver(
        self,
        *,
        providers: Mapping[str, Provider | str] | None = None,
        kill_switch: KillSwitch | None = None,
        **overrides: Any,
    ) -> AsyncIterator[AgentLedgerSaver]:
        """A started saver on these ports (a new "process": its own worker id)."""
        saver = AgentLedgerSaver(
            saver_settings(**overrides),
            log=self.log,
            leases=self.leases,
            providers=providers,
            kill_switch=kill_switch,
        )
        async with saver:
            yield saver


class Chat(TypedDict):
    """A conversation that grows by one message per step."""

    messages: Annotated[list[AnyMessage], add_messages]
    n: int
    target: int


def _reply(state: Chat) -> dict[str, Any]:
    n = state["n"] + 1
    return {"messages": [AIMessage(content=f"step {n} " + "x" * 1000, id=f"m{n}")], "n": n}


def _more(state: Chat) -> str:
    return "reply" if state["n"] < state["target"] else END


def chat_graph(saver: AgentLedgerSaver) -> Any:
    """``reply`` appends a 1 KB message per step until ``n`` reaches ``target``."""
    graph = StateGraph(Chat)
    graph.add_node("reply", _reply)
    graph.add_edge(START, "reply")
    graph.add_conditional_edges("reply", _more, ["reply", END])
    compiled: CompiledStateGraph[Chat, None, Chat, Chat] = graph.compile(checkpointer=saver)
    return compiled


def chat_input(target: int, text: str = "hello") -> Chat:
    """The first input of a chat that runs ``target`` steps."""
    return {"messages": [HumanMessage(content=text, id="h0")], "n": 0, "target": target}


def thread_config(thread_id: str, steps: int = 100) -> Any:
    """Config of a thread, with room for ``steps`` supersteps."""
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": steps + 10}

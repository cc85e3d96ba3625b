"""AgentLedgerSaver on the in-memory log and leases: conformance, deltas, exact restore, secrets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from structlog.testing import capture_logs

from agentledger.bus.memory import MemoryEventLog
from agentledger.errors import ConfigurationError, LeaseHeldError, ProviderUnavailableError
from agentledger.events import CheckpointSaved, RunPaused, RunResumed, RunStarted
from agentledger.events.models import RunEvent
from agentledger.integrations.langgraph import AgentLedgerSaver
from agentledger.leasing import MemoryLeaseStore
from agentledger.providers import HttpProvider
from tests.langgraph_support import (
    MemoryPorts,
    chat_graph,
    chat_input,
    saver_settings,
    thread_config,
)

from .test_redaction import cores, secrets

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2


async def test_conformance_suite_passes_on_the_in_memory_ports() -> None:
    """LangGraph's conformance suite passes, base and extended capabilities, on memory ports."""
    ports = MemoryPorts()

    @checkpointer_test(name="AgentLedgerSaver-memory")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[str]]:
        async with ports.saver() as saver:
            yield saver

    report = await validate(factory)
    assert report.passed_all_base(), report.to_dict()
    assert report.passed_all(), report.to_dict()
    assert {name for name, r in report.results.items() if r.detected} == {
        "put",
        "put_writes",
        "get_tuple",
        "list",
        "delete_thread",
        "delete_for_runs",
        "copy_thread",
        "prune",
    }


async def test_growing_message_list_costs_the_same_bytes_per_step_at_any_length() -> None:
    """Steps 101-150 of a growing 1 KB-per-step chat store about what steps 51-100 did (deltas,
    not the whole list), and a new saver continuing the thread keeps storing deltas."""
    ports = MemoryPorts()
    config = thread_config("grow", 200)
    async with ports.saver() as saver:
        graph = chat_graph(saver)
        await graph.ainvoke(chat_input(50), config)
        after_50 = ports.stored_bytes()
        await graph.ainvoke({"target": 100}, config)
        after_100 = ports.stored_bytes()
    async with ports.saver() as fresh:
        await chat_graph(fresh).ainvoke({"target": 150}, config)
        after_150 = ports.stored_bytes()
    second, third = after_100 - after_50, after_150 - after_100
    assert third < 1.2 * second  # a whole list per checkpoint would make this 1.67x
    assert third / 50 < 6_000  # a 1 KB message, stored as a write and as the channel's delta


async def test_thread_is_restored_exactly_by_another_saver() -> None:
    """A new saver (another process) reads back the same state, history and parents."""
    ports = MemoryPorts()
    config = thread_config("restore")
    async with ports.saver() as saver:
        graph = chat_graph(saver)
        done = await graph.ainvoke(chat_input(30), config)
        history = [s async for s in graph.aget_state_history(config)]
    async with ports.saver() as other:
        again = chat_graph(other)
        state = await again.aget_state(config)
        replayed = [s async for s in again.aget_state_history(config)]
    assert state.values == done
    assert [m.content for m in state.values["messages"]][:2] == ["hello", "step 1 " + "x" * 1000]
    assert [s.config for s in replayed] == [s.config for s in history]
    assert [s.values for s in replayed] == [s.values for s in history]
    assert [s.parent_config for s in replayed] == [s.parent_config for s in history]


async def test_thread_run_is_started_paused_and_resumed_under_growing_fences() -> None:
    """The thread's run starts once; each process that takes it over writes RunResumed with a
    higher fence, and releasing it writes RunPaused waiting for input."""
    ports = MemoryPorts()
    config = thread_config("fences")
    async with ports.saver() as first:
        await chat_graph(first).ainvoke(chat_input(2), config)
    async with ports.saver() as second:
        await chat_graph(second).ainvoke({"target": 4}, config)
    events = await ports.log.read_run("lg.fences")
    kinds = [type(e) for e in events if not isinstance(e, CheckpointSaved)]
    assert kinds[0] is RunStarted
    assert RunResumed in kinds
    assert kinds[-1] is RunPaused
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    resumed = next(e for e in events if isinstance(e, RunResumed))
    assert resumed.fence > events[0].fence
    assert all(isinstance(e, RunPaused) for e in events if e.seq in {resumed.seq - 1})


async def test_a_thread_held_by_a_live_saver_is_not_written_by_another() -> None:
    """While one saver holds a thread's lease, another saver's write waits, then gives up."""
    ports = MemoryPorts()
    config = thread_config("held")
    async with ports.saver() as holder:
        await chat_graph(holder).ainvoke(chat_input(1), config)
        async with ports.saver(lease_wait_s=0.2) as intruder:
            with pytest.raises(LeaseHeldError):
                await chat_graph(intruder).ainvoke({"target": 2}, config)


async def test_a_thread_another_process_holds_is_waited_for_with_one_log_line() -> None:
    """A write to a thread whose lease another process holds (alive, or dead before its ttl)
    waits for it as the SDK does (``lease_wait_s``, one lease_wait log line), then goes on."""
    ports = MemoryPorts()
    config = thread_config("waited")
    async with ports.saver() as first:
        await chat_graph(first).ainvoke(chat_input(1), config)
    held = await ports.leases.acquire("lg.waited", "dead-process", 60_000, floor=10)

    async def let_go_soon() -> None:
        await asyncio.sleep(0.05)
        await ports.leases.release(held)

    async with ports.saver(lease_wait_s=30.0) as second:
        with capture_logs() as logs:
            releasing = asyncio.create_task(let_go_soon())
            state = await chat_graph(second).ainvoke({"target": 2}, config)
            await releasing
    assert [e["event"] for e in logs].count("lease_wait") == 1
    assert len(state["messages"]) > 1


def test_a_provider_that_is_neither_a_provider_a_url_nor_sandbox_is_refused_at_once() -> None:
    """``providers={"payments": "paymnets.example"}`` fails when the saver is built, naming the
    provider and the three forms, as ``agentledger.connect`` does."""
    with pytest.raises(ConfigurationError, match=r"provider 'payments'.*http\(s\)://.*sandbox"):
        AgentLedgerSaver(saver_settings(), providers={"payments": "paymnets.example"})


async def test_a_sandbox_named_by_string_is_served_for_the_saver_and_stopped_with_it(
    tmp_path: Path,
) -> None:
    """``"sandbox"`` starts a sandbox over ``<state dir>/sandbox/<name>.db`` that the graph's
    effect tool reaches; it stops with the saver."""
    ports = MemoryPorts()
    async with ports.saver(providers={"payments": "sandbox"}, state_dir=tmp_path) as saver:
        provider = saver.services.providers["payments"]
        assert isinstance(provider, HttpProvider)
        found = await provider.lookup("refunds", "no-such-key")
        assert not found.found
    assert (tmp_path / "sandbox" / "payments.db").exists()
    async with HttpProvider(provider.base_url, name="after") as after:
        with pytest.raises(ProviderUnavailableError):
            await after.lookup("refunds", "no-such-key")


async def test_secrets_in_messages_are_masked_before_they_reach_the_log() -> None:
    """An API key in a message is never in any record; the stored message keeps the rest."""
    ports = MemoryPorts()
    config = thread_config("secret")
    async with ports.saver() as saver:
        graph = chat_graph(saver)
        await graph.ainvoke(chat_input(1, text=f"my key is {SECRET} ok"), config)
    topics = ports.log.topics
    raw = b"".join(r.value or b"" for t in topics.run_topics for r in ports.log.records(t))
    assert SECRET.encode() not in raw
    assert b"my key is" in raw
    async with ports.saver() as reader:
        state = await chat_graph(reader).aget_state(config)
    first = state.values["messages"][0]
    assert isinstance(first, HumanMessage)
    assert SECRET not in str(first.content)
    assert str(first.content).startswith("my key is [REDACTED")


async def test_values_without_secrets_are_stored_byte_for_byte() -> None:
    """Redaction leaves the serializer's bytes untouched when there is nothing to mask."""
    ports = MemoryPorts()
    async with ports.saver() as saver:
        message = [AIMessage(content="nothing to hide", id="a1")]
        assert saver.codec.dumps(message) == saver.serde.dumps_typed(message)


async def test_sync_api_says_to_use_the_async_one() -> None:
    """Calling a sync method raises a clear error instead of blocking the event loop."""
    ports = MemoryPorts()
    async with ports.saver() as saver:
        with pytest.raises(ConfigurationError, match="ainvoke"):
            saver.get_tuple(thread_config("sync"))


async def test_checkpoint_metadata_is_recorded_as_the_steps_result() -> None:
    """Views show each checkpoint as a step whose result is its metadata (source, step)."""
    ports = MemoryPorts()
    async with ports.saver() as saver:
        await chat_graph(saver).ainvoke(chat_input(2), thread_config("meta"))
        view = await saver.threads.view("meta")
    sources = [json.loads(s.result_json)["source"] for s in view.steps.values()]
    assert sources == ["input", "loop", "loop", "loop"]
    assert all(s.status == "checkpointed" and s.graph is not None for s in view.steps.values())
    assert view.cursor == len(view.steps)


class Leaky(TypedDict):
    """State with a conversation and a free-form dict."""

    messages: Annotated[list[AnyMessage], add_messages]
    notes: dict[str, Any]


def _leak(state: Leaky) -> dict[str, Any]:
    secret = state["notes"]["secret"]
    interrupt({"question": f"send {secret}?"})
    return {}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secrets)
async def test_generated_secrets_never_reach_the_log(secret: str) -> None:
    """For any generated secret put in messages, state, config metadata and an interrupt, no
    record of the run topics contains it (invariant 10)."""
    ports = MemoryPorts()
    graph = StateGraph(Leaky)
    graph.add_node("leak", _leak)
    graph.add_edge(START, "leak")
    graph.add_edge("leak", END)
    config = {"configurable": {"thread_id": "leaky", "note": f"token {secret}"}}
    first: Leaky = {
        "messages": [HumanMessage(content=f"here: {secret}", id="h")],
        "notes": {"secret": secret, "deep": [{"k": secret}]},
    }
    async with ports.saver() as saver:
        await graph.compile(checkpointer=saver).ainvoke(first, config)
    topics = ports.log.topics
    raw = [r.value or b"" for t in topics.run_topics for r in ports.log.records(t)]
    assert len(raw) >= 4
    for core in cores(secret):
        assert not any(core.encode() in value for value in raw)


class SlowReadLog(MemoryEventLog):
    """The in-memory log, with reads of a run as slow as a crowded broker's."""

    def __init__(self, delay_s: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay_s = delay_s

    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """Wait, then read."""
        await asyncio.sleep(self.delay_s)
        return await super().read_run(run_id, since=since)


async def test_a_thread_whose_view_loads_slower_than_the_lease_ttl_keeps_its_lease() -> None:
    """Taking a thread renews its lease while the view loads, so a load longer than the ttl (many
    threads opened at once) does not lose the lease before the thread's first write."""
    leases = MemoryLeaseStore()
    log = SlowReadLog(0.5, guard=leases)
    saver = AgentLedgerSaver(saver_settings(lease_ttl_ms=150), log=log, leases=leases)
    async with saver:
        done = await chat_graph(saver).ainvoke(chat_input(3), thread_config("slow"))
    assert done["n"] == 3
    assert [type(e) for e in await log.read_run("lg.slow")][:2] == [RunStarted, CheckpointSaved]

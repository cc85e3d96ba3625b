"""The bench's LangGraph loop graph, with plain and DeltaChannel lists, on LangGraph's in-memory
saver: the ``-delta`` rows of the full bench run it (a TypedDict annotation on the node once made
that graph refuse to compile, and both ``-delta`` rows went unmeasured)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from bench.peers.langgraph_saver import loop_graph
from bench.workload import effect_key, message
from langgraph.checkpoint.memory import InMemorySaver


async def _node(state: Any) -> dict[str, Any]:
    k = state["step"] + 1
    return {
        "step": k,
        "messages": [{"role": "assistant", "content": message(state["run_id"], k)}],
        "effects": [{"key": effect_key(state["run_id"], k)}],
    }


def _content(m: Any) -> Any:
    """A message's text: a dict as written, or the message object LangGraph made of it (its
    DeltaChannel list named ``messages`` hands back AIMessage objects)."""
    return m["content"] if isinstance(m, dict) else m.content


@pytest.mark.parametrize("delta", [False, True], ids=["operator.add", "DeltaChannel"])
def test_the_loop_graph_runs_its_steps_and_keeps_every_message(delta: bool) -> None:
    """Five steps leave five messages and five effects, in order, in the thread's state."""
    saver = InMemorySaver()
    graph = loop_graph(_node, delta=delta, checkpointer=saver)
    config = {"configurable": {"thread_id": "r1"}, "recursion_limit": 20}
    initial = {"run_id": "r1", "step": 0, "target": 5, "messages": [], "effects": []}

    asyncio.run(graph.ainvoke(initial, config, durability="sync"))
    state = graph.get_state(config).values

    assert state["step"] == 5
    assert [_content(m) for m in state["messages"]] == [message("r1", k) for k in range(1, 6)]
    assert [e["key"] for e in state["effects"]] == [effect_key("r1", k) for k in range(1, 6)]

"""Issue 18's rows: the loop workload as a Pydantic AI agent. Each step is one model request
(a scripted FunctionModel asking for the ``notify`` tool with the step's ~1 KB message) and the
tool call, which performs the step's effect; after N steps the model answers.

``pydantic-ai-agentledger`` runs it with AgentLedgerDurability on the local stack (each model
request a step whose response is recorded as an activity, each tool call a step with the effect
inside: intent committed before the in-process provider call). ``pydantic-ai`` runs the same
agent with no durability: nothing is stored, the effect goes straight to the provider.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from bench.peers.base import Env, Peer, PeerUnavailableError, Probe, safe_name
from bench.peers.ledger_sdk import LedgerSdkPeer, fresh_namespace
from bench.workload import effect_key, message

try:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from agentledger.integrations.pydantic_ai import (
        AgentLedgerDurability,
        perform_effect,
        run_agent,
    )
except ImportError as e:  # pragma: no cover - depends on the pydantic-ai extra
    msg = f"pydantic-ai is not installed ({e}); pip install -e '.[pydantic-ai]'"
    raise PeerUnavailableError(msg) from e

from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.worker import WorkerSettings

UNLIMITED = UsageLimits(request_limit=None)


class _Loop:
    """The scripted model of one run: step k asks for notify(message k); times each step."""

    def __init__(self, run_id: str, steps: int, probe: Probe | None) -> None:
        self.run_id = run_id
        self.steps = steps
        self.probe = probe
        self.marks: list[float] = []  # when each fresh request came in

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """Step ``done + 1``'s request, or the answer once every step is done."""
        del info
        done = sum(1 for m in messages for p in m.parts if p.part_kind == "tool-return")
        self.marks.append(time.perf_counter())
        if self.probe is not None:
            await self.probe(done)
        if done >= self.steps:
            return ModelResponse(parts=[TextPart(f"{done} steps")])
        text = message(self.run_id, done + 1)
        args = {"step": done + 1, "text": text}
        return ModelResponse(parts=[ToolCallPart("notify", args, tool_call_id=f"n{done + 1}")])

    def latencies(self) -> list[float]:
        """Per step: from its request coming in to the next one (the answer ends the last)."""
        return [b - a for a, b in zip(self.marks, self.marks[1:], strict=False)]


def _request(run_id: str, step: int, text: str) -> EffectRequest:
    return EffectRequest(
        kind="emails", identity={"run": run_id, "step": step}, free_text={"body": text[:64]}
    )


class PydanticAiLedgerPeer(LedgerSdkPeer):
    """The Pydantic AI loop agent, durable on agentledger (Kafka, Redis views, a projector)."""

    name: ClassVar[str] = "pydantic-ai-agentledger"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = pai_settings_for(self.env, self.namespace)

    @classmethod
    @asynccontextmanager
    async def sidecar(cls, env: Env, namespace: str) -> AsyncIterator[None]:
        """Fresh run topics and a projector folding them into Redis views."""
        log_name = f"projector-{safe_name(namespace)}-pydantic-ai.log"
        async with fresh_namespace(env, pai_settings_for(env, namespace), log_name):
            yield

    def _agent(self, loop: _Loop) -> Agent[None, str]:
        agent: Agent[None, str] = Agent(
            FunctionModel(loop, model_name="bench-loop"),
            name="bench",
            capabilities=[AgentLedgerDurability()],
        )

        @agent.tool_plain
        async def notify(step: int, text: str) -> dict[str, Any]:
            """Send the step's message (an effect)."""
            done = await perform_effect("notify", _request(loop.run_id, step, text))
            return {"key": done.key, "ref": done.external_ref}

        return agent

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """One agent run of ``steps`` steps as one agentledger run."""
        loop = _Loop(run_id, steps, probe)
        opening = time.perf_counter()
        await run_agent(
            self._agent(loop), run_id, ledger=self.ledger, run_id=run_id, usage_limits=UNLIMITED
        )
        self.open_s.append(loop.marks[0] - opening if loop.marks else 0.0)
        return loop.latencies()

    async def resume(self, run_id: str, steps_done: int, probe: Probe) -> None:
        """Reopen the run and replay its recorded steps (no request sent) until it asks the
        model for step ``steps_done + 1``."""
        loop = _Loop(run_id, steps_done + 1, probe)
        self.resume_detail = "recorded steps replayed through the agent"
        await run_agent(
            self._agent(loop), run_id, ledger=self.ledger, run_id=run_id, usage_limits=UNLIMITED
        )

    def notes(self) -> list[str]:
        """What this row measures."""
        return [
            "Pydantic AI agent (FunctionModel, ~1 KB tool-call argument per step) with "
            "AgentLedgerDurability: per step a model-request step (response as an activity, "
            "1 commit) and a tool-call step with one effect (intent, then outcome+checkpoint: "
            "2 commits); Kafka acks=all transactional, 1 projector process",
            "bytes = Kafka segments + Redis MEMORY USAGE of the views and leases",
            "resume replays every recorded step through the agent (no model request is sent)",
        ]


def pai_settings_for(env: Env, namespace: str) -> WorkerSettings:
    """The row's worker settings: its own topics and keys, stable worker and producer ids."""
    if env.kafka_bootstrap is None or env.redis_url is None:
        raise PeerUnavailableError("agentledger needs the local stack (Kafka and Redis)")
    tag = "bench-pai-" + safe_name(namespace)
    return WorkerSettings(
        kafka_bootstrap=env.kafka_bootstrap,
        redis_url=env.redis_url,
        topic_prefix=f"{tag}.",
        key_prefix=tag,
        worker_id=f"{tag}-worker",
        transactional_id=f"{tag}-producer",
        log_level="WARNING",
    )


class PydanticAiPeer(Peer):
    """The same agent with no durability: nothing stored, the effect sent straight away."""

    name: ClassVar[str] = "pydantic-ai"
    resumable: ClassVar[bool] = False

    async def start(self) -> None:
        """An in-process provider; nothing to connect."""
        self._provider = MemoryProvider(name="sandbox")

    async def stop(self) -> None:
        """Nothing to close."""

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """One plain ``agent.run``."""
        loop = _Loop(run_id, steps, probe)
        agent: Agent[None, str] = Agent(FunctionModel(loop, model_name="bench-loop"), name="b")
        provider = self._provider

        @agent.tool_plain
        async def notify(step: int, text: str) -> dict[str, Any]:
            """Send the step's message (an effect)."""
            key = effect_key(run_id, step)
            done = await provider.perform(_request(run_id, step, text), key)
            return {"key": key, "ref": done.external_ref}

        await agent.run(run_id, usage_limits=UNLIMITED)
        return loop.latencies()

    async def stored_bytes(self) -> int:
        """Nothing is stored."""
        return 0

    def notes(self) -> list[str]:
        """What this row measures."""
        return ["Pydantic AI agent.run with no durability: nothing stored, nothing to resume"]

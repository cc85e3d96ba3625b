"""Effects performed from inside a LangGraph node: intent first, one key per call, never a guess.

The key is derived from the thread, the checkpoint the task ran from, the task (LangGraph's
task id is itself derived from that checkpoint, the node and its path), the effect name and
the call's ordinal within the task's attempt. A node re-run after a crash, a retry or an
interrupt runs from the same checkpoint with the same task id, so it asks for the same keys and
gets the recorded outcome, or the provider's answer to ``lookup(key)``, instead of a second call.
The flow is :class:`~agentledger._core.effect_flow.EffectFlow`, as in the SDK; what is the
saver's own is the key, the step (the checkpoint's) and not pausing the thread.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from agentledger._core.effect_flow import EffectAsk, EffectFlow, EffectWriter, Wording
from agentledger._core.keys import KEY_VERSION, check_name
from agentledger._core.session import Services
from agentledger._core.spec import EffectResult
from agentledger.integrations.langgraph.session import ThreadSession
from agentledger.providers.hashing import canonical_json
from agentledger.providers.protocol import EffectRequest


@dataclass(frozen=True)
class EffectCall:
    """Where an effect is asked for: thread, the checkpoint the task ran from, task, node."""

    thread_id: str
    checkpoint_id: str
    task_id: str
    node: str
    attempt: int


def graph_effect_key(run_id: str, call: EffectCall, effect: str, ordinal: int) -> str:
    """The idempotency key of the ``ordinal``-th effect call (0-based) of a task attempt.

    Never change it: providers remember keys, so another derivation would make a resumed graph
    send a second key for an effect that already happened. It depends on the run, checkpoint,
    task, node, effect name and ordinal — never on the attempt, the process or the time.
    """
    check_name("effect", effect)
    digest = hashlib.sha256(
        canonical_json(
            {
                "checkpoint": call.checkpoint_id,
                "effect": effect,
                "node": call.node,
                "ordinal": ordinal,
                "run": run_id,
                "task": call.task_id,
            }
        )
    ).hexdigest()
    return f"{KEY_VERSION}-lg-{effect}-o{ordinal}-{digest[:32]}"


class GraphEffects(EffectFlow[ThreadSession]):
    """The effect flow of a thread: outcomes are flushed at once, the thread is never paused."""

    wording = Wording(
        unknown_error="outcome unknown",
        unknown_action="the next run of the node looks the key up; or reconcile it, then resume",
        mismatch_action="the node changed an effect's identity fields on a re-run: fix the code",
        not_told="(not told)",
    )
    flush_outcomes = True

    def writer(self) -> EffectWriter:
        """The thread's session (appends check the lease; flushes are serialized)."""
        return self.session


async def perform_effect(
    services: Services,
    session: ThreadSession,
    call: EffectCall,
    *,
    ordinal: int,
    name: str,
    request: EffectRequest,
    provider_name: str | None,
) -> EffectResult:
    """Perform the ``ordinal``-th effect call of the task at most once; return its outcome."""
    step = await session.step_of(call.checkpoint_id)
    key = graph_effect_key(session.run_id, call, name, ordinal)
    ask = EffectAsk(step, ordinal, name, key, request, provider_name)
    return await GraphEffects(services, session).perform(ask, session.view.effects.get(key))

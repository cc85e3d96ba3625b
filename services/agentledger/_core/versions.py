"""Version stamps: what changed since the run started, and what the declared policy says to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentledger.views import Versions

Policy = Literal["refuse", "continue", "replan"]
POLICIES: tuple[Policy, ...] = ("refuse", "continue", "replan")
_POLICY_OF: dict[str, Policy] = {p: p for p in POLICIES}
_FIELDS: tuple[str, ...] = ("code", "prompt", "tool_schema", "model")


@dataclass(frozen=True)
class Change:
    """One version that differs: which one, what the run recorded, what this worker runs."""

    field: str
    recorded: str
    current: str


def diff(recorded: Versions, current: Versions) -> list[Change]:
    """The versions that differ, in a fixed order (code, prompt, tool_schema, model)."""
    return [
        Change(name, getattr(recorded, name), getattr(current, name))
        for name in _FIELDS
        if getattr(recorded, name) != getattr(current, name)
    ]


def describe(changes: list[Change]) -> str:
    """``code 'c1' -> 'c2', model 'm1' -> 'm2'``: names every change, for errors and events."""
    return ", ".join(f"{c.field} {c.recorded!r} -> {c.current!r}" for c in changes)


@dataclass(frozen=True)
class VersionDecision:
    """What to do on resume: ``policy`` is "" when nothing changed."""

    changes: list[Change]
    policy: Policy | Literal[""]

    @property
    def refused(self) -> bool:
        """True when the run must not be resumed by this worker."""
        return self.policy == "refuse"


def decide(recorded: Versions, current: Versions, policy: str) -> VersionDecision:
    """Apply the declared policy (refuse, continue, replan) to the versions that changed."""
    if policy not in POLICIES:
        msg = f"version policy {policy!r} is not one of {', '.join(POLICIES)}"
        raise ValueError(msg)
    changes = diff(recorded, current)
    if not changes:
        return VersionDecision([], "")
    return VersionDecision(changes, _POLICY_OF[policy])

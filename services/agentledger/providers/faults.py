"""Fault injection rules for test providers, and the pure decision of which faults hit a request.

Modes:

- ``drop-after-commit`` — perform and durably store the effect, then drop the connection without
  answering (the client sees a connection error: outcome UNKNOWN, the effect exists).
- ``error-before-commit`` — answer 503 and store nothing.
- ``down`` — answer 503 to everything, lookups included.

``latency_ms`` delays the request before it is processed (a client that times out meanwhile
leaves a request that still completes, as real providers do). By default ``down`` and latency hit
every operation; the two commit modes hit performs and compensations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

FaultMode = Literal["drop-after-commit", "error-before-commit", "down"]
Operation = Literal["perform", "lookup", "compensate"]
FAULT_HEADER = "X-Sandbox-Fault"

_ALL_OPS: frozenset[Operation] = frozenset({"perform", "lookup", "compensate"})
_WRITE_OPS: frozenset[Operation] = frozenset({"perform", "compensate"})
_MODES: dict[str, FaultMode] = {
    "drop-after-commit": "drop-after-commit",
    "error-before-commit": "error-before-commit",
    "down": "down",
}


class FaultRule(BaseModel):
    """Make matching requests misbehave; ``times`` (unset = forever) counts matches consumed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: FaultMode | None = None
    latency_ms: int = Field(default=0, ge=0, le=600_000)
    kind: str | None = Field(default=None, description="only this kind (unset = any)")
    key: str | None = Field(default=None, description="only this idempotency key (unset = any)")
    ops: frozenset[Operation] | None = Field(
        default=None, description="operations hit (unset = writes for commit modes, else all)"
    )
    times: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _does_something(self) -> Self:
        if self.mode is None and self.latency_ms == 0:
            msg = "a fault rule needs a mode or a latency_ms above 0"
            raise ValueError(msg)
        return self

    def operations(self) -> frozenset[Operation]:
        """The operations this rule hits."""
        if self.ops is not None:
            return self.ops
        if self.mode in {"drop-after-commit", "error-before-commit"}:
            return _WRITE_OPS
        return _ALL_OPS

    def matches(self, op: Operation, kind: str, key: str | None) -> bool:
        """True when this rule applies to the request."""
        return (
            op in self.operations()
            and (self.kind is None or self.kind == kind)
            and (self.key is None or self.key == key)
        )


@dataclass(frozen=True)
class FaultDecision:
    """What to do to one request: wait, then maybe fail in one of the modes."""

    latency_ms: int = 0
    mode: FaultMode | None = None

    def combine(self, other: FaultDecision) -> FaultDecision:
        """Latencies add up; the first mode wins."""
        return FaultDecision(self.latency_ms + other.latency_ms, self.mode or other.mode)


NO_FAULT = FaultDecision()


@dataclass
class _Armed:
    rule: FaultRule
    remaining: int | None


class FaultSet:
    """The active rules, in order; deciding for a request consumes one use of each match."""

    def __init__(self, rules: tuple[FaultRule, ...] | list[FaultRule] = ()) -> None:
        self._armed: list[_Armed] = []
        self.replace(rules)

    def replace(self, rules: tuple[FaultRule, ...] | list[FaultRule]) -> None:
        """Forget every rule and arm these."""
        self._armed = [_Armed(rule, rule.times) for rule in rules]

    def clear(self) -> None:
        """Forget every rule."""
        self._armed = []

    def active(self) -> list[FaultRule]:
        """The armed rules, ``times`` showing the uses left."""
        return [armed.rule.model_copy(update={"times": armed.remaining}) for armed in self._armed]

    def decide(self, op: Operation, kind: str, key: str | None) -> FaultDecision:
        """The faults hitting this request; uses up one of each matching rule's ``times``."""
        decision = NO_FAULT
        for armed in self._armed:
            if armed.rule.matches(op, kind, key):
                decision = decision.combine(FaultDecision(armed.rule.latency_ms, armed.rule.mode))
                if armed.remaining is not None:
                    armed.remaining -= 1
        self._armed = [a for a in self._armed if a.remaining is None or a.remaining > 0]
        return decision


def parse_fault_header(value: str) -> FaultDecision:
    """Parse ``X-Sandbox-Fault`` such as ``latency=50,drop-after-commit``; ValueError if bad."""
    decision = NO_FAULT
    for raw in value.split(","):
        part = raw.strip()
        if not part:
            continue
        if part.startswith("latency="):
            millis = part.removeprefix("latency=")
            if not millis.isdigit() or int(millis) > 600_000:
                msg = f"{FAULT_HEADER}: latency must be 0..600000 ms, got {millis!r}"
                raise ValueError(msg)
            decision = decision.combine(FaultDecision(latency_ms=int(millis)))
        elif part in _MODES:
            decision = decision.combine(FaultDecision(mode=_MODES[part]))
        else:
            msg = (
                f"{FAULT_HEADER}: unknown fault {part!r}; use drop-after-commit, "
                "error-before-commit, down or latency=<ms>"
            )
            raise ValueError(msg)
    return decision

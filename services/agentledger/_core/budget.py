"""Budget checks: pure decisions over what the run's events say was spent (invariant 6).

The spent side of :class:`~agentledger.views.Budget` is summed by the fold from every event of
every attempt, crashed ones included, so a check here is the same after any number of resumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentledger.views import Budget

Limit = Literal["tokens", "usd", "steps", "consecutive_errors", "deadline"]


@dataclass(frozen=True)
class Overrun:
    """Which limit is spent, the limit and what was spent (epoch ms for the deadline)."""

    limit: Limit
    allowed: float
    spent: float

    def describe(self) -> str:
        """One sentence for the error and the RunFinished event."""
        if self.limit == "deadline":
            return f"deadline {int(self.allowed)} passed (now {int(self.spent)})"
        return f"{self.limit} budget exceeded: spent {self.spent:g} of {self.allowed:g}"


def before_attempt(budget: Budget, now: int) -> Overrun | None:
    """May a new step attempt start? Every limit must still have headroom."""
    if budget.max_steps is not None and budget.steps >= budget.max_steps:
        return Overrun("steps", budget.max_steps, budget.steps)
    if (
        budget.max_consecutive_errors is not None
        and budget.consecutive_errors >= budget.max_consecutive_errors
    ):
        return Overrun(
            "consecutive_errors", budget.max_consecutive_errors, budget.consecutive_errors
        )
    return before_spending(budget, now)


def before_spending(budget: Budget, now: int) -> Overrun | None:
    """May an activity that costs tokens or dollars start? Refused once a limit is reached."""
    if budget.deadline_at is not None and now > budget.deadline_at:
        return Overrun("deadline", budget.deadline_at, now)
    if budget.max_tokens is not None and budget.tokens >= budget.max_tokens:
        return Overrun("tokens", budget.max_tokens, budget.tokens)
    if budget.max_usd is not None and budget.usd >= budget.max_usd:
        return Overrun("usd", budget.max_usd, budget.usd)
    return None


def after_spending(budget: Budget) -> Overrun | None:
    """Did what was just recorded go over a spending limit?"""
    if budget.max_tokens is not None and budget.tokens > budget.max_tokens:
        return Overrun("tokens", budget.max_tokens, budget.tokens)
    if budget.max_usd is not None and budget.usd > budget.max_usd + 1e-12:
        return Overrun("usd", budget.max_usd, budget.usd)
    return None

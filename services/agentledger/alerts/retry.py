"""Pure retry arithmetic shared by the webhook sink and the reconciler's provider calls."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff from ``base_ms`` doubling up to ``max_ms``; ``jitter`` in [0, 1]."""

    base_ms: int
    max_ms: int

    def delay_ms(self, failures: int, jitter: float = 0.0) -> int:
        """The wait after the ``failures``-th consecutive failure (1 = first), jittered down.

        ``jitter`` is a random draw in [0, 1] supplied by the caller (pure function): the delay
        is spread over [d/2, d] so that many clients do not retry in step.
        """
        if failures < 1:
            return 0
        full = min(self.max_ms, self.base_ms * (2 ** min(failures - 1, 32)))
        return int(full - full * min(max(jitter, 0.0), 1.0) / 2)

    def total_ms(self, failures: int) -> int:
        """The longest total wait over ``failures`` consecutive failures (no jitter)."""
        return sum(self.delay_ms(n) for n in range(1, failures + 1))

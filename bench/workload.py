"""The agent workload every peer runs: N steps per run, each appending a ~1 KB message to the
run's state and recording one effect. Pure: it only makes the data."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

MESSAGE_BYTES = 1024


def message(run_id: str, step: int, size: int = MESSAGE_BYTES) -> str:
    """The step's message: ``size`` characters of hex derived from (run, step), so that it is
    deterministic, differs per step and does not compress better than real text would."""
    seed = f"{run_id}:{step}".encode()
    chunks: list[str] = []
    n = 0
    while sum(map(len, chunks)) < size:
        chunks.append(hashlib.blake2b(seed + n.to_bytes(4, "big"), digest_size=64).hexdigest())
        n += 1
    return "".join(chunks)[:size]


def effect_key(run_id: str, step: int) -> str:
    """The idempotency key of the step's one effect (deterministic, like agentledger's)."""
    return hashlib.sha256(f"{run_id}/{step}/notify/0".encode()).hexdigest()[:32]


def external_ref(key: str) -> str:
    """What the (in-process, instantaneous) provider answers for an effect: its reference."""
    return f"ext_{key[:16]}"


@dataclass(frozen=True)
class Params:
    """How much work each figure does; ``quick`` and ``full`` are the two presets."""

    latency_steps: int
    latency_repeats: int
    concurrent_runs: int
    concurrent_steps: int
    concurrent_repeats: int
    bytes_marks: tuple[int, ...]
    resume_steps: int
    resume_repeats: int
    warmup_steps: int = 20
    # Do not write more than this for one bytes run; beyond it the figure is projected.
    max_bytes_run: int = 2_000_000_000

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Params:
        """The inverse of ``dataclasses.asdict`` (JSON turns the marks tuple into a list)."""
        return cls(**{**data, "bytes_marks": tuple(int(m) for m in data["bytes_marks"])})

    @classmethod
    def quick(cls) -> Params:
        """Meant for under 5 minutes on 2 cores: bytes stop at 1,000 steps, one resume."""
        return cls(
            latency_steps=100,
            latency_repeats=3,
            concurrent_runs=200,
            concurrent_steps=2,
            concurrent_repeats=2,
            bytes_marks=(100, 1_000),
            resume_steps=1_000,
            resume_repeats=1,
            warmup_steps=10,
        )

    @classmethod
    def full(cls) -> Params:
        """The README's run: bytes up to 10,000 steps, more and longer repeats."""
        return cls(
            latency_steps=1_000,
            latency_repeats=3,
            concurrent_runs=200,
            concurrent_steps=5,
            concurrent_repeats=3,
            bytes_marks=(100, 1_000, 10_000),
            resume_steps=1_000,
            resume_repeats=3,
        )

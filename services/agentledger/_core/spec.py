"""What an agent author hands the SDK and gets back: run specs, limits, checks, results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentledger._core.versions import Policy
from agentledger.views import Versions

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """Budget limits of a run; None means unlimited. ``deadline_at`` is epoch ms."""

    tokens: int | None = None
    usd: float | None = None
    steps: int | None = None
    consecutive_errors: int | None = None
    deadline_at: int | None = None


@dataclass(frozen=True)
class RunSpec:
    """A run to start, or to resume if ``run_id`` already has events.

    ``plan`` names the steps in order (empty: steps are taken as the code calls them, their
    names checked against the record on resume); ``versions`` are stamped on RunStarted and
    checked on every resume under ``version_policy`` (refuse, continue or replan).
    """

    run_id: str
    agent: str
    plan: Sequence[str] = ()
    input: Any = None
    versions: Versions = field(default_factory=Versions)
    limits: Limits = field(default_factory=Limits)
    version_policy: Policy = "refuse"
    generation: int = 0


@dataclass(frozen=True)
class Check:
    """One acceptance check of a step result."""

    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Metered(Generic[T]):
    """An activity's value with what producing it cost."""

    value: T
    tokens: int = 0
    usd: float = 0.0


@dataclass(frozen=True)
class EffectResult:
    """What an effect call returns: its key and the provider's reference.

    ``replayed`` is True when the outcome came from the record (an earlier attempt or process
    performed it) and nothing was sent now.
    """

    effect: str
    key: str
    state: str
    external_ref: str | None
    response_hash: str | None
    replayed: bool

"""Topic names and their specs; run topics are co-partitioned (same count, keyed by run_id)."""

from __future__ import annotations

from dataclasses import dataclass

from agentledger.events.models import Event
from agentledger.settings import CommonSettings

RUN_ROLES: tuple[str, ...] = ("steps", "effects", "acceptance")
ROLE_SUFFIX: dict[str, str] = {
    "steps": "runs.steps",
    "effects": "runs.effects",
    "acceptance": "runs.acceptance",
    "requests": "runs.requests",
    "alerts": "alerts",
    "deadletter": "deadletter",
}


@dataclass(frozen=True)
class TopicSpec:
    """What a topic must look like: ``agentledger topics ensure`` creates or checks it."""

    name: str
    partitions: int
    retention_ms: int
    cleanup_policy: str
    role: str


@dataclass(frozen=True)
class TopicNames:
    """The concrete topic name of each role under one prefix."""

    prefix: str

    def for_role(self, role: str) -> str:
        """The topic of a role (``steps``, ``effects`` …)."""
        return f"{self.prefix}{ROLE_SUFFIX[role]}"

    def for_event(self, event: Event) -> str:
        """The topic an event is written to."""
        return self.for_role(type(event).topic_role)

    @property
    def steps(self) -> str:
        """``<prefix>runs.steps``."""
        return self.for_role("steps")

    @property
    def effects(self) -> str:
        """``<prefix>runs.effects``."""
        return self.for_role("effects")

    @property
    def acceptance(self) -> str:
        """``<prefix>runs.acceptance``."""
        return self.for_role("acceptance")

    @property
    def requests(self) -> str:
        """``<prefix>runs.requests``."""
        return self.for_role("requests")

    @property
    def alerts(self) -> str:
        """``<prefix>alerts``."""
        return self.for_role("alerts")

    @property
    def deadletter(self) -> str:
        """``<prefix>deadletter``."""
        return self.for_role("deadletter")

    @property
    def run_topics(self) -> tuple[str, ...]:
        """The co-partitioned topics a projector folds."""
        return tuple(self.for_role(role) for role in RUN_ROLES)


def topic_names(settings: CommonSettings) -> TopicNames:
    """Topic names under the configured prefix."""
    return TopicNames(settings.topic_prefix)


def topic_specs(settings: CommonSettings) -> list[TopicSpec]:
    """Every topic the system needs, with partitions, retention and cleanup policy."""
    names = topic_names(settings)
    run_parts = settings.run_partitions
    retention = {
        "steps": settings.run_retention_ms,
        "effects": settings.effects_retention_ms,
        "acceptance": settings.run_retention_ms,
        "requests": settings.requests_retention_ms,
        "alerts": settings.alerts_retention_ms,
        "deadletter": settings.deadletter_retention_ms,
    }
    partitions = {
        "steps": run_parts,
        "effects": run_parts,
        "acceptance": run_parts,
        "requests": run_parts,
        "alerts": settings.service_partitions,
        "deadletter": settings.service_partitions,
    }
    return [
        TopicSpec(
            name=names.for_role(role),
            partitions=partitions[role],
            retention_ms=retention[role],
            cleanup_policy="delete",
            role=role,
        )
        for role in ROLE_SUFFIX
    ]

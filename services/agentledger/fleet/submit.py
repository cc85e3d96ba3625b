"""Asking the fleet for work: RunRequested to start a run, ResumeRequested to continue one."""

from __future__ import annotations

import getpass
import uuid
from typing import Any

from agentledger._core.keys import check_run_id
from agentledger._core.payloads import Payloads
from agentledger.bus.port import EventPublisher
from agentledger.events.models import ResumeRequested, RunRequested


def new_run_id(agent: str) -> str:
    """A fresh run id: ``<agent>-<random>``."""
    return f"{agent}-{uuid.uuid4().hex[:12]}"


def requester() -> str:
    """Who is asking, for the record (the OS user)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


async def submit_run(
    publisher: EventPublisher,
    agent: str,
    value: Any = None,
    *,
    run_id: str | None = None,
    requested_by: str = "",
    payloads: Payloads | None = None,
) -> RunRequested:
    """Publish RunRequested for ``agent`` with ``value`` as input (secrets redacted first).

    Submitting the same ``run_id`` twice is harmless: the second request finds the run started
    (or held by its worker's lease) and does nothing more.
    """
    text = (payloads or Payloads()).inline(value)
    request = RunRequested(
        run_id=check_run_id(run_id or new_run_id(agent)),
        agent=agent,
        input_json=text,
        requested_by=requested_by or requester(),
    )
    await publisher.publish([request])
    return request


async def request_resume(
    publisher: EventPublisher, run_id: str, *, reason: str = "", requested_by: str = ""
) -> ResumeRequested:
    """Publish ResumeRequested for ``run_id`` (a worker of the fleet picks it up)."""
    request = ResumeRequested(
        run_id=run_id, reason=reason, requested_by=requested_by or requester()
    )
    await publisher.publish([request])
    return request

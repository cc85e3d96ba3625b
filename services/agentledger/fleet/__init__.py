"""The worker fleet: workers in one consumer group, fenced leases, hand-off, approvals, forks."""

from __future__ import annotations

from agentledger.fleet.agent import Agent, load_agent
from agentledger.fleet.approvals import decide_as_operator, decide_run
from agentledger.fleet.executor import Outcome, RunExecutor
from agentledger.fleet.fork import fork_run, inherited_of
from agentledger.fleet.listing import run_detail, run_summary
from agentledger.fleet.settings import FleetSettings
from agentledger.fleet.stable import StableBarrier
from agentledger.fleet.submit import request_resume, submit_run
from agentledger.fleet.wiring import RunLookup
from agentledger.fleet.worker import FleetWorker, group_of

__all__ = [
    "Agent",
    "FleetSettings",
    "FleetWorker",
    "Outcome",
    "RunExecutor",
    "RunLookup",
    "StableBarrier",
    "decide_as_operator",
    "decide_run",
    "fork_run",
    "group_of",
    "inherited_of",
    "load_agent",
    "request_resume",
    "run_detail",
    "run_summary",
    "submit_run",
]

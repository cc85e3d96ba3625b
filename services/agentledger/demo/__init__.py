"""The refund-agent demo behind ``agentledger demo``: its agent, plan, runner and worker."""

from __future__ import annotations

from agentledger.demo.agent import PLAN, model_decision, order_of, refund_agent, spec_for

__all__ = ["PLAN", "model_decision", "order_of", "refund_agent", "spec_for"]

"""Fault rules: which requests they hit, how many times, and the per-request header."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentledger.providers.faults import FaultDecision, FaultRule, FaultSet, parse_fault_header


def test_commit_modes_hit_writes_only_by_default() -> None:
    """drop-after-commit and error-before-commit leave lookups alone unless told otherwise."""
    faults = FaultSet([FaultRule(mode="drop-after-commit")])
    assert faults.decide("lookup", "payments", "k").mode is None
    assert faults.decide("perform", "payments", "k").mode == "drop-after-commit"
    assert faults.decide("compensate", "payments", "k").mode == "drop-after-commit"


def test_down_and_latency_hit_lookups_too() -> None:
    """down and latency rules hit every operation by default."""
    faults = FaultSet([FaultRule(mode="down"), FaultRule(latency_ms=10)])
    assert faults.decide("lookup", "payments", "k") == FaultDecision(latency_ms=10, mode="down")


def test_times_counts_matching_requests_only() -> None:
    """A rule armed for one time is used up by the first matching request, not by others."""
    faults = FaultSet([FaultRule(mode="drop-after-commit", kind="payments", times=1)])
    assert faults.decide("perform", "emails", "k").mode is None
    assert faults.decide("perform", "payments", "k").mode == "drop-after-commit"
    assert faults.decide("perform", "payments", "k").mode is None
    assert faults.active() == []


def test_key_filter() -> None:
    """A rule for one key leaves other keys alone."""
    faults = FaultSet([FaultRule(mode="error-before-commit", key="k1")])
    assert faults.decide("perform", "payments", "k2").mode is None
    assert faults.decide("perform", "payments", "k1").mode == "error-before-commit"


def test_active_shows_uses_left() -> None:
    """The armed rules report how many uses they have left."""
    faults = FaultSet([FaultRule(latency_ms=5, times=3)])
    faults.decide("lookup", "payments", "k")
    assert [rule.times for rule in faults.active()] == [2]


def test_latencies_add_and_first_mode_wins() -> None:
    """Several matching rules add their latencies; the first rule's mode is the one applied."""
    faults = FaultSet(
        [FaultRule(mode="error-before-commit", latency_ms=3), FaultRule(mode="down", latency_ms=4)]
    )
    assert faults.decide("perform", "payments", "k") == FaultDecision(7, "error-before-commit")


def test_a_rule_must_do_something() -> None:
    """A rule without a mode or a latency is refused."""
    with pytest.raises(ValidationError):
        FaultRule()
    with pytest.raises(ValidationError):
        FaultRule.model_validate({"mode": "explode"})


def test_header_parses_modes_and_latency() -> None:
    """The X-Sandbox-Fault header combines a latency and a mode."""
    assert parse_fault_header("latency=25, drop-after-commit") == FaultDecision(
        25, "drop-after-commit"
    )
    assert parse_fault_header("down") == FaultDecision(0, "down")


@pytest.mark.parametrize("value", ["latency=-1", "latency=abc", "explode", "latency=600001"])
def test_header_refuses_unknown_faults(value: str) -> None:
    """An unknown fault or a bad latency in the header is an error, not silently ignored."""
    with pytest.raises(ValueError, match="X-Sandbox-Fault"):
        parse_fault_header(value)

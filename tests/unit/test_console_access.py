"""The console's guard: read-only without a token; sessions, CSRF tokens and bearers checked."""

from __future__ import annotations

from pydantic import SecretStr

from agentledger.console.access import Guard, bearer_of
from agentledger.console.reads import RunFilter, matches, search_hit
from agentledger.views.model import Budget, EffectView, RunView


def test_without_a_token_every_change_is_refused() -> None:
    """A console started without AGENTLEDGER_CONSOLE_TOKEN refuses bearers and sessions alike."""
    guard = Guard(None)
    assert not guard.writable
    assert guard.authorize(bearer="", cookie=None, csrf=None) is not None
    assert guard.csrf_token(guard.new_session()) is None


def test_a_session_needs_its_own_csrf_token() -> None:
    """A signed-in form passes only with the CSRF token of its own session."""
    guard = Guard(SecretStr("s3cret"))
    one, two = guard.new_session(), guard.new_session()
    assert guard.authorize(bearer=None, cookie=one, csrf=guard.csrf_token(one)) is None
    assert guard.authorize(bearer=None, cookie=one, csrf=guard.csrf_token(two)) is not None
    assert guard.authorize(bearer=None, cookie=one, csrf=None) is not None
    assert guard.authorize(bearer=None, cookie=None, csrf=guard.csrf_token(one)) is not None


def test_a_forged_session_cookie_is_not_a_session() -> None:
    """A cookie whose MAC was not made with the token (or another console's) is refused."""
    guard = Guard(SecretStr("s3cret"))
    other = Guard(SecretStr("other")).new_session()
    assert guard.session_nonce(other) is None
    assert guard.session_nonce("abc.def") is None
    assert guard.session_nonce("nodot") is None


def test_bearer_tokens_are_compared_with_the_token() -> None:
    """``Authorization: Bearer`` with the token passes without CSRF; any other value fails."""
    guard = Guard(SecretStr("s3cret"))
    assert guard.authorize(bearer=bearer_of("Bearer s3cret"), cookie=None, csrf=None) is None
    assert guard.authorize(bearer=bearer_of("Bearer nope"), cookie=None, csrf=None) is not None
    assert bearer_of("Basic s3cret") is None


def _view() -> RunView:
    effect = EffectView(
        idempotency_key="k-1", step=1, ordinal=0, effect="pay", provider="p", kind="payments",
        identity_hash="i", payload_hash="p", state="unknown", external_ref="pay_9",
    )  # fmt: skip
    return RunView(
        run_id="refund-42", status="paused", agent="refund", updated_at=10_000,
        budget=Budget(usd=0.5), effects={"k-1": effect},
    )  # fmt: skip


def test_the_runs_filters_and_search() -> None:
    """Status, agent, age, cost and open effects filter; search finds id part, key and ref."""
    view, now = _view(), 20_000
    assert matches(view, RunFilter(), now)
    assert matches(view, RunFilter(status="paused", agent="refund", open_effects=True), now)
    assert not matches(view, RunFilter(status="succeeded"), now)
    assert not matches(view, RunFilter(agent="other"), now)
    assert matches(view, RunFilter(max_age_s=10), now)
    assert not matches(view, RunFilter(max_age_s=5), now)
    assert not matches(view, RunFilter(min_usd=1.0), now)
    assert all(search_hit(view, q) for q in ("fund-4", "k-1", "pay_9"))
    assert not search_hit(view, "k-")
    assert RunFilter.from_query({"status": "bogus", "min_usd": "x"}) == RunFilter()

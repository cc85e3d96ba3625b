"""The run hash written straight from the view is byte for byte the run hash written from its
pydantic dump through the JSON encoder, as it was before (views in Redis compare equal)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.views import RunView, fold
from agentledger.views.layout import PARKED_FIELD, encode_run
from agentledger.views.model import Approval, Budget, Pause, Versions

from .event_samples import RUN
from .test_fold_fast import _deliveries

_SPLIT = {"steps", "effects"}


def _dumped(view: RunView) -> dict[str, bytes]:
    """The run hash's view fields as encode_run wrote them before (commit 1176227)."""
    data = view.model_dump(mode="json", exclude=_SPLIT)
    plain = {n for n, f in RunView.model_fields.items() if f.annotation is str}
    return {
        n: (
            v.encode()
            if n in plain
            else json.dumps(v, separators=(",", ":"), sort_keys=True).encode()
        )
        for n, v in data.items()
    }


def _fields(view: RunView) -> dict[str, bytes]:
    return {k: v for k, v in encode_run(view, 2, 7).items() if not k.startswith("_")}


@settings(max_examples=200, deadline=None)
@given(_deliveries())
def test_run_hash_of_folded_views_is_unchanged(events: list) -> None:  # type: ignore[type-arg]
    """Views folded from generated deliveries encode to the same run hash bytes as before."""
    view = fold(RunView(run_id=RUN), events).view
    assert _fields(view) == _dumped(view)
    assert encode_run(view, 2, 7)[PARKED_FIELD] == b"3"


text = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
floats = st.floats(allow_nan=True, allow_infinity=True)
maybe_int = st.none() | st.integers(min_value=-(2**70), max_value=2**70)


odd_views = st.builds(
    RunView,
    run_id=st.just("r\u00e9"),
    status=st.just("\u2603\x00"),
    versions=st.builds(Versions, code=text, prompt=text, tool_schema=text, model=text),
    budget=st.builds(
        Budget, max_usd=st.none() | floats, usd=floats, tokens=st.integers(), max_steps=maybe_int
    ),
    pause=st.none() | st.builds(Pause, reason=text, step=maybe_int, intent_hash=st.none() | text),
    approvals=st.lists(st.builds(Approval, approval_id=text, decision=text, note=text), max_size=3),
    plan=st.lists(text, max_size=4),
    recent_digests=st.dictionaries(st.integers(min_value=-5, max_value=10**6), text, max_size=20),
    error=st.none() | text,
)


@settings(max_examples=300, deadline=None)
@given(odd_views)
def test_run_hash_of_odd_values_is_unchanged(view: RunView) -> None:
    """Non-ASCII and control characters, infinities and NaN, huge ints, int keys sorting
    differently as text: each field's bytes are what the dump and the JSON encoder gave."""
    assert _fields(view) == _dumped(view)

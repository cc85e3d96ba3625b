"""Resume views: the pure fold of run events, and the stores that keep views."""

from __future__ import annotations

from agentledger.views.fold import Admission, FoldResult, admit, apply_event, fold
from agentledger.views.model import (
    OPEN_EFFECT_STATES,
    PERFORMED_STATES,
    ActivityView,
    Approval,
    Budget,
    CheckView,
    EffectView,
    Pause,
    RunView,
    StepView,
    Versions,
)

__all__ = [
    "OPEN_EFFECT_STATES",
    "PERFORMED_STATES",
    "ActivityView",
    "Admission",
    "Approval",
    "Budget",
    "CheckView",
    "EffectView",
    "FoldResult",
    "Pause",
    "RunView",
    "StepView",
    "Versions",
    "admit",
    "apply_event",
    "fold",
]

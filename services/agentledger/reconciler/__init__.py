"""The reconciler: resolves effects whose outcome was never recorded, settles runs, relays alerts.

The names below are what other packages (the console) may use; the modules are its own.
"""

from __future__ import annotations

from agentledger.reconciler.resolve import Verdict, verdict
from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.reconciler.settle import Settled, Settler, open_settler

__all__ = ["ReconcilerSettings", "Settled", "Settler", "Verdict", "open_settler", "verdict"]

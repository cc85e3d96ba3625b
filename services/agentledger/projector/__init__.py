"""The projector service: folds the run topics into Redis resume views, exactly once per event.

``agentledger projector`` runs one instance (a faust worker; any number form one consumer
group); ``agentledger views rebuild|verify|dump`` replay, check and show the views.
"""

from __future__ import annotations

from agentledger.projector.applier import Applier
from agentledger.projector.ports import LogReader, Record
from agentledger.projector.runner import Projector
from agentledger.projector.settings import ProjectorSettings

__all__ = ["Applier", "LogReader", "Projector", "ProjectorSettings", "Record"]

"""The projector's faust worker leaves the root logger at the configured level."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import faust
import pytest

from agentledger.projector.app import ProjectorWorker


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the root logger's level and handlers back after the worker configured them."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.usefixtures("root_logging")
def test_debug_lines_of_aiokafka_are_not_built_at_warning() -> None:
    """Set up at WARNING, the worker leaves the root logger there (faust's own worker sets it
    to DEBUG for its spinner), so aiokafka's debug lines are never made into records."""
    app = faust.App("test-projector-worker", broker="kafka://127.0.0.1:9", autodiscover=False)
    worker = ProjectorWorker(app, loglevel="warning", redirect_stdouts=False, quiet=True)
    worker._setup_logging()  # what execute_from_commandline does first
    assert logging.getLogger().level == logging.WARNING
    assert not logging.getLogger("aiokafka.consumer.fetcher").isEnabledFor(logging.DEBUG)
    assert logging.getLogger("aiokafka").isEnabledFor(logging.WARNING)

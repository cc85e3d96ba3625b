"""Event ids are the hex of fresh version-4 UUIDs, whether the run writer passes one
(``fresh_event_id``) or the model's default (``uuid.uuid4().hex``) makes it."""

from __future__ import annotations

import re
import uuid

from agentledger._core.writer import RunWriter
from agentledger.bus.memory import MemoryEventLog
from agentledger.events.ids import fresh_event_id
from agentledger.events.models import StepStarted
from agentledger.views import RunView

ENVELOPE = {"run_id": "r", "seq": 1, "fence": 1, "worker_id": "w"}


def test_event_ids_are_random_version_4_uuids_in_hex() -> None:
    """Every id is 32 lower-case hex digits of an RFC 4122 version-4 UUID, and none repeats."""
    ids = [fresh_event_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        assert re.fullmatch(r"[0-9a-f]{32}", text)
        parsed = uuid.UUID(hex=text)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert parsed.hex == text
    # the 122 random bits vary: the version digit is 4, the variant digit one of 8, 9, a, b,
    # every other digit takes all 16 values over 5,000 ids
    for position in range(32):
        seen = {text[position] for text in ids}
        if position == 12:
            assert seen == {"4"}
        elif position == 16:
            assert seen == set("89ab")
        else:
            assert seen == set("0123456789abcdef")


def test_an_event_built_without_an_id_gets_a_fresh_one() -> None:
    """The model's default factory makes the same kind of id, a new one per event."""
    a = StepStarted(**ENVELOPE, step=0, step_name="s", attempt=1)
    b = StepStarted(**ENVELOPE, step=0, step_name="s", attempt=1)
    assert a.event_id != b.event_id
    assert uuid.UUID(hex=a.event_id).version == 4


def test_the_run_writer_stamps_each_event_with_a_fresh_id() -> None:
    """Events the writer builds carry ids of the same form, one per event."""
    writer = RunWriter(MemoryEventLog(), RunView(run_id="r"), fence=1, worker_id="w")
    first = writer.append(StepStarted, step=0, step_name="s", attempt=1)
    second = writer.append(StepStarted, step=1, step_name="t", attempt=1)
    assert first.event_id != second.event_id
    for event in (first, second):
        assert uuid.UUID(hex=event.event_id).version == 4
        assert uuid.UUID(hex=event.event_id).hex == event.event_id

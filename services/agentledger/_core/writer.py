"""The run's writer: stamps the envelope, folds its own events, and publishes them in batches.

Events are appended to a pending batch (and folded into the writer's view at once, with the
same pure fold the projector uses; only the digests of the last events, which no reader of the
writer's own events compares, are made when :attr:`RunWriter.view` is read);
:meth:`RunWriter.flush` publishes the batch in one transaction. If a publish fails the writer
is broken: its view may be ahead of the log, so the run must be reopened (resumed) from the
log, never continued.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from agentledger.alerts.codes import AlertCode
from agentledger.alerts.model import closing_alert, run_alert_id
from agentledger.bus.port import EventLog
from agentledger.errors import RunClosedError
from agentledger.events.ids import fresh_event_id
from agentledger.events.models import Alert, Event, RunEvent, Severity, now_ms
from agentledger.views import Admission, FoldResult, RunView, admit, apply_event
from agentledger.views.fold import RECENT_DIGESTS, note_digests

E = TypeVar("E", bound=RunEvent)
#: When a step's checkpoint is committed: at once, or with the run's next durable write.
Checkpoints = Literal["each_step", "with_next_commit"]
#: A queue of deferred checkpoints longer than this is committed at the end of the step.
MAX_DEFERRED_EVENTS = 64
#: What the fold reports touched, which no writer reads: one result for every writer, emptied
#: after each event (a FoldResult is seven lists and two sets, each alive as long as its run:
#: fewer objects for the cyclic collector to walk; DESIGN.md §13, sessions 15 and 19). The
#: fold never reads it and appends only within one apply_event, which no await interrupts.
_UNREAD = FoldResult(view=RunView(run_id="unread"))


class RunWriter:
    """Appends events of one run with gapless ``seq`` (``applied_seq + 1``) under one fence."""

    def __init__(
        self,
        log: EventLog,
        view: RunView,
        *,
        fence: int,
        worker_id: str,
        clock: Callable[[], int] = now_ms,
        before_publish: Callable[[], None] | None = None,
        after_commit: Callable[[], None] | None = None,
    ) -> None:
        self.log = log
        self._view = view
        # the events folded without their digest (DESIGN.md §13, session 17): the last
        # RECENT_DIGESTS are enough, an older one's entry would be dropped by the next ones.
        # Each is kept as its class and its own field dict, not as the event: such a dict
        # holds no container (the cyclic collector does not track it), while the event and
        # its set of fields are two objects more to walk for as long as the run is open
        # (session 19). The two deques stay in step: appended and cleared together.
        self._undigested: deque[dict[str, Any]] = deque(maxlen=RECENT_DIGESTS)
        self._undigested_kinds: deque[type[RunEvent]] = deque(maxlen=RECENT_DIGESTS)
        self.fence = fence
        self.worker_id = worker_id
        self._clock = clock
        self._before_publish = before_publish
        self._after_commit = after_commit
        self.pending: list[Event] = []
        self._touched = _UNREAD
        self.broken: BaseException | None = None
        self.commits = 0
        self.events_written = 0

    @property
    def view(self) -> RunView:
        """The run as this writer knows it: the loaded view with every appended event folded in
        (``recent_digests`` included, made now for the events appended since the last read)."""
        undigested = self._undigested
        if undigested:
            kinds = self._undigested_kinds
            events = [kind.model_construct(**f) for kind, f in zip(kinds, undigested, strict=True)]
            note_digests(self._view, events)
            undigested.clear()
            kinds.clear()
        return self._view

    @property
    def folded(self) -> RunView:
        """:attr:`view` without making the pending digests: every field is current except
        ``recent_digests``, which may lack the entries of the events appended since ``view``
        was last read. For the SDK's own reads, none of which looks at the digests (an event
        is compared with a digest only when it arrives at a seq already applied: never one of
        this writer's own, each written at ``applied_seq + 1``)."""
        return self._view

    def append(self, cls: type[E], **fields: Any) -> E:
        """Build the next event of the run, fold it into the view, and queue it."""
        self._check_usable()
        view = self._view
        # the id passed, not left to the default factory: pydantic's call of a factory costs
        # more than the model's whole validation (DESIGN.md §13, per-step CPU); the model's
        # validator called as cls(**data) calls it, without BaseModel.__init__'s frame (the
        # same validation, instance and errors: DESIGN.md §13, session 16)
        event: E = cls.__pydantic_validator__.validate_python(
            dict(
                event_id=fresh_event_id(),
                run_id=view.run_id,
                seq=view.applied_seq + 1,
                fence=self.fence,
                worker_id=self.worker_id,
                occurred_at=self._clock(),
                **fields,
            )
        )
        # admit compares digests only for a seq already applied, never this one
        verdict = admit(view, event)
        if verdict is not Admission.APPLY:
            msg = f"own event seq {event.seq} fence {self.fence} not admitted: {verdict.value}"
            raise RunClosedError(msg, run_id=view.run_id)
        touched = self._touched
        apply_event(view, event, touched, digest=False)
        self._undigested.append(event.__dict__)
        self._undigested_kinds.append(cls)
        touched.touched_steps.clear()
        touched.touched_effects.clear()
        self.pending.append(event)
        return event

    def alert(
        self,
        code: AlertCode,
        summary: str,
        *,
        severity: Severity | None = None,
        key: str | None = None,
        **fields: Any,
    ) -> Alert:
        """Queue an Alert about this run (one open alert per code, run and key); severity and
        action default to the code's."""
        self._check_usable()
        fields.setdefault("action", code.action)
        alert = Alert(
            event_id=fresh_event_id(),
            alert_id=run_alert_id(code.code, self._view.run_id, key),
            code=code.code,
            severity=severity or code.severity,
            summary=summary,
            source="worker",
            run_id=self._view.run_id,
            idempotency_key=key,
            worker_id=self.worker_id,
            occurred_at=self._clock(),
            **fields,
        )
        self.pending.append(alert)
        return alert

    def close_alert(
        self, code: AlertCode, reason: str, *, key: str | None = None, **fields: Any
    ) -> Alert:
        """Queue the closed event of this run's alert ``code`` (about ``key``), saying why."""
        self._check_usable()
        alert = closing_alert(
            code.code,
            run_id=self._view.run_id,
            key=key,
            reason=reason,
            source="worker",
            at=self._clock(),
            worker_id=self.worker_id,
            **fields,
        )
        self.pending.append(alert)
        return alert

    async def flush(self) -> None:
        """Publish the pending batch in one transaction (no-op when empty)."""
        self._check_usable()
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        try:
            if self._before_publish is not None:
                self._before_publish()
            await self.log.publish(batch)
        except BaseException as e:
            self.broken = e
            raise
        self.commits += 1
        self.events_written += len(batch)
        if self._after_commit is not None:
            self._after_commit()

    async def publish(self, cls: type[E], **fields: Any) -> E:
        """Append one event and flush it with everything pending."""
        event = self.append(cls, **fields)
        await self.flush()
        return event

    def _check_usable(self) -> None:
        if self.broken is not None:
            msg = (
                f"an earlier publish failed ({type(self.broken).__name__}: {self.broken}); "
                "reopen the run to resume it from the log"
            )
            raise RunClosedError(msg, run_id=self._view.run_id) from self.broken

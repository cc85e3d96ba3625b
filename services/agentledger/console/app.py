"""The console's aiohttp application: pages, actions, live change events and ``/metrics``.

Routes (binding, for tooling): ``GET /runs``, ``GET /runs/{run_id}``, ``GET /alerts``,
``GET /metrics``, ``POST /runs/{run_id}/approve`` and ``/reject``; besides them the effect
settle and alert ack forms, sign in/out, ``GET /live`` (server-sent events) and static files.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
import structlog
from aiohttp import web

from agentledger.errors import AgentLedgerError
from agentledger.events.models import Decision
from agentledger.telemetry.prom import metrics_response
from agentledger.views.keys import STATUSES
from agentledger.views.model import OPEN_EFFECT_STATES

from .access import COOKIE, CSRF_FIELD, Guard, bearer_of
from .actions import ConsoleActions
from .metrics import ConsoleMetrics
from .pages import environment, render, static_file
from .reads import ConsoleReads, RunFilter
from .settings import ConsoleSettings

_log = structlog.get_logger(__name__)
_SECURITY_HEADERS = {
    # Scripts only from this origin (no inline ones), no framing, no sniffing.
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
_STATIC = {"live.js": "text/javascript", "console.css": "text/css"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Console:
    """The pages and actions over one set of reads, actions and a guard."""

    def __init__(
        self, settings: ConsoleSettings, reads: ConsoleReads, actions: ConsoleActions
    ) -> None:
        self.settings = settings
        self.reads = reads
        self.actions = actions
        self.guard = Guard(settings.console_token)
        self.metrics = ConsoleMetrics()
        self.env: jinja2.Environment = environment()
        # Set on shutdown: every live stream ends within one interval (they never end by
        # themselves, and one left running would go on reading Redis after the reads closed).
        self._closing = asyncio.Event()

    def app(self) -> web.Application:
        """The aiohttp application with every route."""
        app = web.Application(middlewares=[self._middleware])
        app.on_shutdown.append(self._end_live_streams)
        app.router.add_get("/", self._root)
        app.router.add_get("/runs", self._runs)
        app.router.add_get("/runs/{run_id}", self._run)
        app.router.add_post("/runs/{run_id}/approve", self._approve)
        app.router.add_post("/runs/{run_id}/reject", self._reject)
        app.router.add_post("/runs/{run_id}/effects/{key}/settle", self._settle)
        app.router.add_get("/alerts", self._alerts)
        app.router.add_post("/alerts/{alert_id}/ack", self._ack)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/live", self._live)
        app.router.add_get("/login", self._login_page)
        app.router.add_post("/login", self._login)
        app.router.add_post("/logout", self._logout)
        app.router.add_get("/static/{name}", self._static)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as e:
            self._count(request, e.status)
            e.headers.update(_SECURITY_HEADERS)
            raise
        except AgentLedgerError as e:
            response = self._page(request, "message.html", status=409, heading="Refused",
                                  message=str(e), back=request.path)  # fmt: skip
        self._count(request, response.status)
        if not response.prepared:
            response.headers.update(_SECURITY_HEADERS)
        return response

    def _count(self, request: web.Request, status: int) -> None:
        resource = request.match_info.route.resource
        name = resource.canonical if resource is not None else "unmatched"
        self.metrics.requests.labels(route=name, status=str(status)).inc()

    # --- pages -------------------------------------------------------------------------------

    def _page(
        self, request: web.Request, template: str, *, status: int = 200, **context: Any
    ) -> web.Response:
        cookie = request.cookies.get(COOKIE)
        base = {
            "writable": self.guard.writable,
            "csrf": self.guard.csrf_token(cookie),
            "flash": request.query.get("done", ""),
            "request_path": request.path_qs,
            "live_url": "",
        }
        html = render(self.env, template, **{**base, **context})
        return web.Response(text=html, content_type="text/html", status=status)

    async def _root(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/runs")

    async def _runs(self, request: web.Request) -> web.StreamResponse:
        f = RunFilter.from_query(dict(request.query))
        live_url = await self._live_url(None)
        rows = await self.reads.runs(f)
        return self._page(request, "runs.html", rows=rows, f=f, statuses=STATUSES,
                          live_url=live_url)  # fmt: skip

    async def _run(self, request: web.Request) -> web.StreamResponse:
        run_id = request.match_info["run_id"]
        live_url = await self._live_url(run_id)
        found = await self.reads.run(run_id)
        if found is None:
            return self._page(request, "message.html", status=404, heading="No such run",
                              message=f"run {run_id} has no events", back="/runs")  # fmt: skip
        view, detail = found
        by_step: dict[int, list[Any]] = {}
        for e in sorted(view.effects.values(), key=lambda e: (e.step, e.ordinal)):
            by_step.setdefault(e.step, []).append(e)
        return self._page(
            request, "run.html", d=detail, steps=sorted(view.steps.values(), key=lambda s: s.step),
            effects_by_step=by_step, open_states=OPEN_EFFECT_STATES,
            forks=await self.reads.forks(run_id),
            live_url=live_url,
        )  # fmt: skip

    async def _alerts(self, request: web.Request) -> web.StreamResponse:
        live_url = await self._live_url(None)
        return self._page(request, "alerts.html", alerts=await self.reads.alerts(),
                          live_url=live_url)  # fmt: skip

    async def _live_url(self, run_id: str | None) -> str:
        """The page's change stream, from the fingerprint of what it is about to show.

        The mark is taken before the page reads its data, so a change that lands while the page
        renders or before its stream connects still reloads it (at worst once too often).
        """
        query = {"since": await self.reads.fingerprint(run_id)}
        if run_id is not None:
            query["run_id"] = run_id
        return "/live?" + urlencode(query)

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        intents, runs = await self.reads.counts()
        self.metrics.observe_views(open_intents=intents, alerts=await self.reads.alerts(),
                                   runs=runs)  # fmt: skip
        return metrics_response(self.metrics.registry)

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound
        return web.Response(body=static_file(name), content_type=_STATIC[name])

    async def _live(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the page's fingerprint whenever it differs from ``since`` (the
        fingerprint the page was rendered from) or from the one sent last."""
        run_id = request.query.get("run_id") or None
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})  # fmt: skip
        await response.prepare(request)
        last = request.query.get("since") or None
        async for mark in self._marks(run_id, request):
            if mark != last:
                await response.write(f"data: {mark}\n\n".encode())
                last = mark
        return response

    async def _marks(self, run_id: str | None, request: web.Request) -> AsyncIterator[str]:
        """The fingerprint every interval, until the console shuts down or the client leaves
        (aiohttp does not cancel a handler whose client left: it would poll forever)."""
        while not self._closing.is_set() and not _gone(request):
            yield await self.reads.fingerprint(run_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.console_live_interval_s):
                    await self._closing.wait()

    async def _end_live_streams(self, app: web.Application) -> None:
        """On shutdown, before aiohttp waits for the handlers: the live streams end."""
        self._closing.set()

    # --- access ------------------------------------------------------------------------------

    async def _login_page(self, request: web.Request) -> web.StreamResponse:
        return self._page(request, "login.html", next=_local(request.query.get("next", "/runs")))

    async def _login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        target = _local(str(form.get("next", "/runs")))
        if not self.guard.token_ok(str(form.get("token", ""))):
            self.metrics.actions.labels(action="login", outcome="refused").inc()
            return self._page(request, "message.html", status=403, heading="Refused",
                              message="wrong console token", back="/login")  # fmt: skip
        done = web.HTTPSeeOther(target)
        done.set_cookie(COOKIE, self.guard.new_session(), httponly=True, samesite="Strict",
                        path="/")  # fmt: skip
        raise done

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        await self._authorized(request, "logout")
        done = web.HTTPSeeOther("/runs")
        done.del_cookie(COOKIE, path="/")
        raise done

    async def _authorized(self, request: web.Request, action: str) -> dict[str, str]:
        """The form of a state-changing request, or HTTP 403 if the request may not change state."""
        form = {k: str(v) for k, v in (await request.post()).items()}
        refusal = self.guard.authorize(
            bearer=bearer_of(request.headers.get("Authorization")),
            cookie=request.cookies.get(COOKIE), csrf=form.get(CSRF_FIELD),
        )  # fmt: skip
        if refusal is not None:
            self.metrics.actions.labels(action=action, outcome="refused").inc()
            _log.warning("console_refused", action=action, reason=refusal.reason)
            html = render(self.env, "message.html", heading="Refused", message=refusal.reason,
                          back=request.path.rsplit("/", 1)[0], writable=self.guard.writable,
                          csrf=None, flash="", request_path=request.path, live_url="")  # fmt: skip
            raise web.HTTPForbidden(text=html, content_type="text/html")
        return form

    # --- actions -----------------------------------------------------------------------------

    async def _approve(self, request: web.Request) -> web.StreamResponse:
        return await self._decide(request, "approved")

    async def _reject(self, request: web.Request) -> web.StreamResponse:
        return await self._decide(request, "rejected")

    async def _decide(self, request: web.Request, decision: Decision) -> web.StreamResponse:
        run_id = request.match_info["run_id"]
        action = "approve" if decision == "approved" else "reject"
        form = await self._authorized(request, action)
        approver = form.get("approver", "").strip() or "console"
        line = await self._counted(action, self.actions.decide(
            run_id, decision, approver=approver, note=form.get("note", "")))  # fmt: skip
        raise web.HTTPSeeOther(_run_url(run_id, line))

    async def _settle(self, request: web.Request) -> web.StreamResponse:
        run_id, key = request.match_info["run_id"], request.match_info["key"]
        form = await self._authorized(request, "settle")
        line = await self._counted("settle", self.actions.settle(
            run_id, key, landed=form.get("finding") == "landed", ref=form.get("ref", "").strip(),
            note=form.get("note", ""), by=form.get("by", "").strip() or "console"))  # fmt: skip
        raise web.HTTPSeeOther(_run_url(run_id, line))

    async def _ack(self, request: web.Request) -> web.StreamResponse:
        alert_id = request.match_info["alert_id"]
        form = await self._authorized(request, "ack")
        line = await self._counted("ack", self.actions.ack(alert_id, form.get("by") or "console"))
        done = line if line is not None else f"no open alert {alert_id}"
        raise web.HTTPSeeOther("/alerts?" + urlencode({"done": done}))

    async def _counted(self, action: str, work: Awaitable[Any]) -> Any:
        try:
            result = await work
        except AgentLedgerError:
            self.metrics.actions.labels(action=action, outcome="error").inc()
            raise
        self.metrics.actions.labels(action=action, outcome="done").inc()
        return result


def _run_url(run_id: str, done: str) -> str:
    return f"/runs/{quote(run_id, safe='')}?" + urlencode({"done": done})


def _local(target: str) -> str:
    """Only same-site paths as redirect targets (no ``//host`` or ``https://…``)."""
    return target if target.startswith("/") and not target.startswith("//") else "/runs"


def _gone(request: web.Request) -> bool:
    """Whether the client of ``request`` has closed its connection."""
    transport = request.transport
    return transport is None or transport.is_closing()

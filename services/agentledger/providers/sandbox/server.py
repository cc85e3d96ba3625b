"""The sandbox provider's HTTP API: a payment/email/ticket API with Stripe-like idempotency.

Endpoints (JSON everywhere; errors are ``{"error": {"type", "message", …}}``):

- ``POST /v1/{kind}`` (``Idempotency-Key`` required, ``X-Identity-Fields`` optional, flat JSON
  object body) — performs once per key; 200 with the object (``Idempotent-Replayed: true`` on a
  repeat); 409 if the key holds another identity or kind; 400 if malformed.
- ``GET /v1/{kind}?idempotency_key=K`` — 200 with the object or 404; every lookup is counted.
- ``POST /v1/{kind}/{id}/compensate`` (``Idempotency-Key`` required) — undo once; idempotent.
- ``GET /v1/effects[?kind=]`` — every effect performed; ``GET /v1/lookups`` — counts per key.
- ``GET|POST|DELETE /v1/_faults`` — read, replace, clear the fault rules; ``GET /healthz``.

Per request, ``X-Sandbox-Fault`` (see :mod:`agentledger.providers.faults`) adds faults.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import web
from pydantic import JsonValue, TypeAdapter, ValidationError

from agentledger.errors import (
    ProviderConflictError,
    ProviderIdentityConflictError,
    ProviderRequestError,
)
from agentledger.providers.faults import (
    FAULT_HEADER,
    NO_FAULT,
    FaultDecision,
    FaultRule,
    FaultSet,
    Operation,
    parse_fault_header,
)
from agentledger.providers.http import IDEMPOTENCY_HEADER, IDENTITY_FIELDS_HEADER
from agentledger.providers.protocol import check_key, check_kind
from agentledger.providers.sandbox.store import SqliteEffectStore
from agentledger.providers.semantics import StoredEffect, identity_of, timestamp

RESERVED_KINDS = frozenset({"effects", "lookups"})
STORE: web.AppKey[SqliteEffectStore] = web.AppKey("store", SqliteEffectStore)
FAULTS: web.AppKey[FaultSet] = web.AppKey("faults", FaultSet)
_RULES = TypeAdapter(list[FaultRule])
_log = structlog.get_logger(__name__)


def _error(status: int, kind: str, message: str, **extra: JsonValue) -> web.Response:
    return web.json_response({"error": {"type": kind, "message": message, **extra}}, status=status)


def _refusal(status: int, kind: str, message: str) -> web.HTTPException:
    """An aiohttp HTTP exception carrying the sandbox's JSON error body."""
    text = json.dumps({"error": {"type": kind, "message": message}})
    exc = web.HTTPBadRequest if status == 400 else web.HTTPServiceUnavailable
    return exc(text=text, content_type="application/json")


def _bad_request(message: str) -> web.HTTPException:
    return _refusal(400, "invalid_request", message)


def _kind(request: web.Request) -> str:
    kind = request.match_info["kind"]
    try:
        check_kind(kind)
    except ProviderRequestError as e:
        raise _bad_request(str(e)) from e
    if kind in RESERVED_KINDS:
        msg = f"{kind!r} is reserved for inspection; choose another kind"
        raise _bad_request(msg)
    return kind


def _key(request: web.Request, value: str | None) -> str:
    if value is None:
        msg = f"the {IDEMPOTENCY_HEADER} is required"
        raise _bad_request(msg)
    try:
        return check_key(value)
    except ProviderRequestError as e:
        raise _bad_request(str(e)) from e


async def _apply_faults(request: web.Request, op: Operation, kind: str, key: str) -> FaultDecision:
    """Wait and fail as the header and the armed rules say; returns what is left to do."""
    header = request.headers.get(FAULT_HEADER)
    try:
        decision = parse_fault_header(header) if header else NO_FAULT
    except ValueError as e:
        raise _bad_request(str(e)) from e
    decision = decision.combine(request.app[FAULTS].decide(op, kind, key))
    if decision.mode == "down":
        raise _refusal(503, "unavailable", "the sandbox is down (injected)")
    if decision.latency_ms:
        await asyncio.sleep(decision.latency_ms / 1000)
    if decision.mode == "error-before-commit":
        raise _refusal(503, "unavailable", "failed before committing (injected)")
    return decision


def _answer(
    request: web.Request, decision: FaultDecision, effect: StoredEffect, *, replayed: bool
) -> web.Response:
    """The stored object, or no answer at all when the connection is to drop after the commit."""
    if decision.mode == "drop-after-commit" and request.transport is not None:
        _log.info("sandbox_dropped_answer", key=effect.idempotency_key, id=effect.id)
        request.transport.close()
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    return web.json_response(effect.response, headers=headers)


def _conflict(e: ProviderConflictError, key: str) -> web.Response:
    if isinstance(e, ProviderIdentityConflictError):
        return _error(
            409,
            "idempotency_conflict",
            str(e),
            idempotency_key=key,
            recorded_identity_hash=e.recorded_hash,
            request_identity_hash=e.new_hash,
        )
    return _error(409, "conflict", str(e), idempotency_key=key)


#: Deepest nesting of a request body; deeper (5,000 levels) is a 400, never a 500 "unknown".
MAX_JSON_DEPTH = 64


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True when ``value`` nests lists/objects deeper than ``limit`` (iterative: no recursion)."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


async def _json_object(request: web.Request) -> dict[str, JsonValue]:
    too_deep = f"the body nests deeper than {MAX_JSON_DEPTH} levels"
    try:
        body: Any = await request.json(loads=json.loads)
    except RecursionError as e:
        raise _bad_request(too_deep) from e
    except ValueError as e:
        msg = f"the body is not JSON: {e}"
        raise _bad_request(msg) from e
    if _depth_exceeds(body, MAX_JSON_DEPTH):
        raise _bad_request(too_deep)
    if not isinstance(body, dict):
        msg = "the body must be a JSON object of fields"
        raise _bad_request(msg)
    return body


def _identity_fields(request: web.Request) -> list[str] | None:
    raw = request.headers.get(IDENTITY_FIELDS_HEADER)
    if raw is None:
        return None
    return [name.strip() for name in raw.split(",") if name.strip()]


def _now() -> str:
    return timestamp(datetime.now(UTC))


async def perform(request: web.Request) -> web.Response:
    """POST /v1/{kind}: perform once per key."""
    kind = _kind(request)
    key = _key(request, request.headers.get(IDEMPOTENCY_HEADER))
    payload = await _json_object(request)
    try:
        identity = identity_of(payload, _identity_fields(request))
    except ProviderRequestError as e:
        raise _bad_request(str(e)) from e
    decision = await _apply_faults(request, "perform", kind, key)
    try:
        effect, created = await request.app[STORE].perform(
            kind=kind,
            key=key,
            payload=payload,
            identity=identity,
            token=secrets.token_hex(12),
            created_at=_now(),
        )
    except ProviderConflictError as e:
        _log.warning("sandbox_conflict", key=key, kind=kind, error=str(e))
        return _conflict(e, key)
    _log.info("sandbox_performed" if created else "sandbox_replayed", key=key, id=effect.id)
    return _answer(request, decision, effect, replayed=not created)


async def lookup(request: web.Request) -> web.Response:
    """GET /v1/{kind}?idempotency_key=K: the object or 404."""
    kind = _kind(request)
    key = _key(request, request.query.get("idempotency_key"))
    decision = await _apply_faults(request, "lookup", kind, key)
    effect = await request.app[STORE].lookup(kind, key)
    if effect is None:
        if decision.mode == "drop-after-commit" and request.transport is not None:
            request.transport.close()
        return _error(404, "not_found", f"no {kind} effect under key {key}")
    return _answer(request, decision, effect, replayed=False)


async def compensate(request: web.Request) -> web.Response:
    """POST /v1/{kind}/{id}/compensate: undo once, under its own key."""
    kind = _kind(request)
    key = _key(request, request.headers.get(IDEMPOTENCY_HEADER))
    target = request.match_info["id"]
    decision = await _apply_faults(request, "compensate", kind, key)
    try:
        effect, created = await request.app[STORE].compensate(
            kind=kind, target_id=target, key=key, token=secrets.token_hex(12), created_at=_now()
        )
    except ProviderConflictError as e:
        return _conflict(e, key)
    except ProviderRequestError as e:
        return _error(e.status or 400, "invalid_request", str(e))
    _log.info("sandbox_compensated" if created else "sandbox_replayed", key=key, id=effect.id)
    return _answer(request, decision, effect, replayed=not created)


async def list_effects(request: web.Request) -> web.Response:
    """GET /v1/effects: every effect actually performed, oldest first."""
    effects = await request.app[STORE].effects(request.query.get("kind"))
    return web.json_response([effect.listing() for effect in effects])


async def list_lookups(request: web.Request) -> web.Response:
    """GET /v1/lookups: lookups answered per key."""
    return web.json_response(await request.app[STORE].lookups())


async def get_faults(request: web.Request) -> web.Response:
    """GET /v1/_faults: the armed rules with their uses left."""
    rules = request.app[FAULTS].active()
    return web.json_response([rule.model_dump(mode="json") for rule in rules])


async def set_faults(request: web.Request) -> web.Response:
    """POST /v1/_faults: replace the rules with a rule, a list, or ``{"rules": [...]}``."""
    try:
        body: Any = await request.json() if request.can_read_body else None
    except ValueError as e:
        return _error(400, "invalid_request", f"the body is not JSON: {e}")
    if isinstance(body, dict) and "rules" in body:
        body = body["rules"]
    if isinstance(body, dict):
        body = [body]
    try:
        rules = _RULES.validate_python(body)
    except ValidationError as e:
        return _error(400, "invalid_request", f"bad fault rules: {e}")
    request.app[FAULTS].replace(rules)
    _log.info("sandbox_faults_set", rules=[rule.model_dump(mode="json") for rule in rules])
    return await get_faults(request)


async def clear_faults(request: web.Request) -> web.Response:
    """DELETE /v1/_faults: behave again."""
    request.app[FAULTS].clear()
    _log.info("sandbox_faults_cleared")
    return web.json_response([])


async def healthz(_request: web.Request) -> web.Response:
    """GET /healthz: the process is up and its store is open."""
    return web.json_response({"status": "ok"})


def create_app(store: SqliteEffectStore, faults: FaultSet) -> web.Application:
    """The sandbox application over an open store; inspection routes come before ``{kind}``."""
    app = web.Application()
    app[STORE] = store
    app[FAULTS] = faults
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/v1/effects", list_effects)
    app.router.add_get("/v1/lookups", list_lookups)
    app.router.add_get("/v1/_faults", get_faults)
    app.router.add_post("/v1/_faults", set_faults)
    app.router.add_delete("/v1/_faults", clear_faults)
    app.router.add_post("/v1/{kind}", perform)
    app.router.add_get("/v1/{kind}", lookup)
    app.router.add_post("/v1/{kind}/{id}/compensate", compensate)
    return app

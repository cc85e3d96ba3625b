"""The secret shapes issue 17 found leaking into Kafka, Redis and logs are masked."""

from __future__ import annotations

import json
import socket

import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from agentledger.errors import UnreachableError
from agentledger.redaction import DEFAULT_REDACTOR
from agentledger.redisclient import redacted
from agentledger.settings import CommonSettings
from agentledger.testing import LedgerEnvironment
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Check, RunSpec

from .test_redaction_events import leak_everywhere

SECRET = "Zq8vR2mXp4Lt9Wn3"
CARD = "4111111111111111"


@pytest.mark.parametrize(
    "text",
    [
        f"call it with api_key={SECRET} please",
        f"password={SECRET}",
        f"login password: {SECRET}",
        f"X-Api-Key: {SECRET}",
        f"GET https://api.example.com/v1/items?password={SECRET}&page=2",
        f"https://api.example.com/v1/items?page=2&api_key={SECRET}",
        f"redis://cache.internal/0?password={SECRET}",
        f"clientSecret={SECRET}",
        f'{{"apiToken": "{SECRET} with spaces"}}',
        f'escaped {{\\"session_token\\": \\"{SECRET}\\"}}',
    ],
)
def test_secrets_assigned_in_free_text_and_queries_are_masked(text: str) -> None:
    """A value after api_key=, password=, X-Api-Key:, ?password= or a token key is masked."""
    assert SECRET not in DEFAULT_REDACTOR.text(text)


@pytest.mark.parametrize(
    "secret",
    [
        "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "npm_" + "a1B2c3D4e5" * 3 + "f6G7h8",
        "hf_" + "xYzAbC" * 6,
    ],
)
def test_webhook_npm_and_hugging_face_tokens_are_masked(secret: str) -> None:
    """Stripe webhook secrets, npm tokens and Hugging Face tokens are masked in text."""
    assert secret not in DEFAULT_REDACTOR.text(f"token {secret} here")


def test_a_gcp_service_account_json_inside_a_string_is_masked() -> None:
    """The private key and its id in a service-account file pasted into a string are masked."""
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" * 3
    account = {
        "type": "service_account",
        "project_id": "demo",
        "private_key_id": "3f1e5c0a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f",
        "private_key": f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n",
        "client_email": "svc@demo.iam.gserviceaccount.com",
    }
    out = DEFAULT_REDACTOR.json({"note": "creds: " + json.dumps(account)})
    text = json.dumps(out)
    assert body[:40] not in text
    assert "3f1e5c0a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f" not in text


@pytest.mark.parametrize(
    "text",
    [
        "4111.1111.1111.1111",
        "4111\u00a01111\u00a01111\u00a01111",
        "4111  1111  1111  1111",
        "charge 4111111111111111.0 now",
    ],
)
def test_card_numbers_with_dots_no_break_or_double_spaces_are_masked(text: str) -> None:
    """Card numbers grouped by dots, no-break spaces or double spaces are masked."""
    out = DEFAULT_REDACTOR.text(text)
    assert "[REDACTED:card_number]" in out
    assert "1111" not in out


def test_a_card_number_as_a_json_float_is_masked() -> None:
    """A card number that arrives as a float (4111111111111111.0) is masked like an integer."""
    assert DEFAULT_REDACTOR.json({"n": float(CARD), "x": 1.5}) == {
        "n": "[REDACTED:card_number]",
        "x": 1.5,
    }


@pytest.mark.parametrize(
    "key",
    [
        "token",
        "clientSecret",
        "apiToken",
        "secretAccessKey",
        "AWS_SECRET_ACCESS_KEY",
        "session_token",
        "id_token",
        "pwd",
        "passphrase",
        "credentials.pass",
    ],
)
def test_values_under_the_listed_json_keys_are_masked(key: str) -> None:
    """Values under token-, secret- and password-like keys are masked whatever they are."""
    out = DEFAULT_REDACTOR.json({key: SECRET, "nested": {"credentials": {"pass": SECRET}}})
    assert SECRET not in json.dumps(out)


def test_counters_and_flags_under_similar_keys_stay_readable() -> None:
    """max_tokens, token counts and boolean flags are not secrets."""
    doc = {"max_tokens": 5, "tokens": 12, "token_count": 3, "pass": True}
    assert DEFAULT_REDACTOR.json(doc) == doc


async def test_new_shapes_never_reach_an_encoded_event() -> None:
    """A free-text api_key= assignment put everywhere in a run is absent from every record."""
    async with LedgerEnvironment() as env:
        await leak_everywhere(env, "r", f"api_key={SECRET}")
        log = env.memory_log
        raw = [
            r.value or b""
            for role in ("steps", "effects", "acceptance", "alerts")
            for r in log.records(log.topics.for_role(role))
        ]
        assert not any(SECRET.encode() in value for value in raw)


async def test_the_step_rejected_log_line_carries_the_redacted_detail() -> None:
    """A failed check whose detail holds a secret is logged with the secret masked."""
    spec = RunSpec(run_id="r1", agent="t", plan=("a",))

    async def body(step: object) -> int:
        return 1

    async with LedgerEnvironment() as env:
        with capture_logs() as logs:
            async with env.ledger().run(spec) as run:
                with pytest.raises(Exception, match="bad"):
                    await run.step(
                        "a", body, accept=lambda v: Check("bad", False, f"password={SECRET}")
                    )
    rejected = [entry for entry in logs if entry["event"] == "step_rejected"]
    assert rejected
    assert SECRET not in repr(rejected)


def test_a_redis_url_with_a_password_in_its_query_is_printed_redacted() -> None:
    """redis://host/0?password=X is named without X (SDK, projector and reconciler use this)."""
    assert SECRET not in redacted(f"redis://cache/0?password={SECRET}")
    assert redacted("redis://cache:6379/0?db=1") == "redis://cache:6379/0?db=1"


async def test_an_unreachable_redis_is_named_without_the_query_password() -> None:
    """The UnreachableError of a view store whose URL has ?password= does not show it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = RedisViewStore.from_url(
        f"redis://127.0.0.1:{port}/0?password={SECRET}", key_prefix="al"
    )
    with pytest.raises(UnreachableError) as caught:
        async with store:
            pass
    assert SECRET not in str(caught.value)


def test_a_url_with_the_wrong_scheme_is_rejected_without_echoing_its_password() -> None:
    """The validation error for an http:// Redis URL names the setting, not the password."""
    with pytest.raises(ValidationError) as caught:
        CommonSettings(redis_url=f"http://app:{SECRET}@cache:6379/0")
    assert "AGENTLEDGER_REDIS_URL" in str(caught.value)
    assert SECRET not in str(caught.value)

"""The provider port's value types: effect requests, results and lookups validate themselves."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from agentledger.errors import ProviderError, ProviderRequestError
from agentledger.providers import (
    EffectRequest,
    HttpProvider,
    LookupResult,
    MemoryProvider,
    Provider,
    ProviderResult,
    identity_hash,
    response_hash,
    supports_compensation,
)
from agentledger.providers.protocol import check_key


def test_body_is_identity_and_free_text_flattened() -> None:
    """The HTTP body is one flat object holding identity and free-text fields."""
    request = EffectRequest(
        kind="emails", identity={"to": "a@example.com"}, free_text={"body": ["hi", "there"]}
    )
    assert request.body() == {"to": "a@example.com", "body": ["hi", "there"]}
    assert request.identity_hash == identity_hash({"to": "a@example.com"})


def test_a_field_cannot_be_both_identity_and_free_text() -> None:
    """A field named in identity and in free text is refused."""
    with pytest.raises(ValidationError, match="both identity and free text"):
        EffectRequest(kind="emails", identity={"to": "a"}, free_text={"to": "b"})


@pytest.mark.parametrize("kind", ["Payments", "", "pay ments", "pay/ments", "a" * 64, "x\n"])
def test_kind_must_be_a_lower_case_path_segment(kind: str) -> None:
    """A kind that cannot be a URL path segment is refused."""
    with pytest.raises(ValidationError):
        EffectRequest(kind=kind, identity={})


@pytest.mark.parametrize("name", ["a,b", "to field", "", "1st"])
def test_identity_field_names_are_header_safe(name: str) -> None:
    """Identity field names travel in a comma-separated header, so commas and spaces are refused."""
    with pytest.raises(ValidationError):
        EffectRequest(kind="payments", identity={name: 1})


def test_identity_values_are_finite_scalars() -> None:
    """Identity values are JSON scalars, and NaN is not one."""
    with pytest.raises(ValidationError):
        EffectRequest(kind="payments", identity={"amount": math.nan})
    with pytest.raises(ValidationError):
        EffectRequest.model_validate({"kind": "payments", "identity": {"items": [1, 2]}})


@pytest.mark.parametrize("key", ["", "has space", "line\nbreak", "trailing\n", "é", "k" * 256])
def test_keys_must_be_printable_ascii(key: str) -> None:
    """An idempotency key must be able to travel as an HTTP header value."""
    with pytest.raises(ProviderRequestError):
        check_key(key)


def test_result_hashes_its_response() -> None:
    """A result built from a response carries that response's hash and its id as the reference."""
    result = ProviderResult.of({"id": "pay_1", "status": "succeeded"})
    assert result.external_ref == "pay_1"
    assert result.response_hash == response_hash({"id": "pay_1", "status": "succeeded"})


def test_result_needs_an_id() -> None:
    """A response without an object id cannot be a result."""
    with pytest.raises(ProviderError):
        ProviderResult.of({"status": "succeeded"})


def test_lookup_result_carries_a_result_exactly_when_found() -> None:
    """found=True needs a result, found=False forbids one."""
    result = ProviderResult.of({"id": "pay_1"})
    assert LookupResult.of(result).result == result
    assert LookupResult.missing().result is None
    with pytest.raises(ValidationError):
        LookupResult(found=True)
    with pytest.raises(ValidationError):
        LookupResult(found=False, result=result)


def test_memory_and_http_providers_can_compensate() -> None:
    """Both shipped providers declare compensation through the CompensatingProvider port."""
    providers: list[Provider] = [MemoryProvider(), HttpProvider("http://127.0.0.1:1")]
    assert all(supports_compensation(provider) for provider in providers)

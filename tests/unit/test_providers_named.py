"""Providers named in a program (connect(), the LangGraph saver): a Provider, a URL, sandbox."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agentledger.errors import ConfigurationError
from agentledger.providers import HttpProvider, MemoryProvider
from agentledger.providers.named import open_providers


async def test_a_url_is_an_http_provider_and_a_provider_is_itself(tmp_path: Path) -> None:
    """``"https://…"`` becomes an HttpProvider on that URL under the given name; a Provider
    instance is used as given; nothing is served for either."""
    mine = MemoryProvider()
    async with AsyncExitStack() as stack:
        given = {"payments": "https://payments.example/api/", "mine": mine}
        started = await open_providers(stack, given, tmp_path)
        payments = started["payments"]
        assert isinstance(payments, HttpProvider)
        assert (payments.name, payments.base_url) == ("payments", "https://payments.example/api")
        assert started["mine"] is mine
    assert not (tmp_path / "sandbox").exists()


async def test_sandbox_is_served_over_a_file_named_after_the_provider(tmp_path: Path) -> None:
    """``"sandbox"`` serves a sandbox over ``<state dir>/sandbox/<name>.db`` and hands back an
    HttpProvider on it that answers lookups."""
    async with AsyncExitStack() as stack:
        started = await open_providers(stack, {"refunds": "sandbox"}, tmp_path)
        assert not (await started["refunds"].lookup("refunds", "never-sent")).found
    assert (tmp_path / "sandbox" / "refunds.db").exists()


@pytest.mark.parametrize("value", ["payments.example", "ftp://x", "Sandbox", ""])
async def test_anything_else_is_refused_naming_the_provider(value: str, tmp_path: Path) -> None:
    """A string that is not a URL nor ``"sandbox"`` is a ConfigurationError naming the provider
    and the three forms it may take."""
    async with AsyncExitStack() as stack:
        with pytest.raises(ConfigurationError, match=r"provider 'payments'.*'sandbox'"):
            await open_providers(stack, {"payments": value}, tmp_path)

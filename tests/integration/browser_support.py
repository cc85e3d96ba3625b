"""Debian's headless Chromium under Playwright for the console tests, and signing in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright

TOKEN = "console-test-token"
CHROMIUM = Path("/usr/bin/chromium")


@pytest_asyncio.fixture(loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    """Debian's headless Chromium driven by Playwright (its own browser download is not used)."""
    async with async_playwright() as p:
        found = await p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield found
        finally:
            await found.close()


async def sign_in(page: Page) -> None:
    """Follow the header's sign-in link and post the token; back on the page it came from."""
    await page.click("#sign-in")
    await page.fill("#token", TOKEN)
    await page.click("#sign-in-submit")

"""The console's alert ack and effect settle in Chromium, on an UNKNOWN effect of a dead worker."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser
from pydantic import SecretStr

from agentledger.console.server import running_console
from agentledger.console.testing import console_settings
from agentledger.fleet.testing import wait_until
from agentledger.providers.faults import FaultRule
from tests.integration.browser_support import TOKEN, browser, sign_in
from tests.integration.test_reconciler import Env, env, module_settings, reconcile_once

pytestmark = pytest.mark.integration
__all__ = ["browser", "env", "module_settings"]
WAIT_S = 60.0


async def test_ack_the_alert_then_settle_the_unknown_effect(env: Env, browser: Browser) -> None:
    """The alerts page shows the effect.unknown alert with its action text and acks it; the run
    page shows the effect UNKNOWN with its key, and settling it LANDED with the provider's id
    (as ``effects resolve`` does) makes it landed in the views."""
    run_id = "run-console"
    key = await env.dying_worker(run_id, perform=True)
    [performed] = await env.effects(key)
    await env.client.set_faults(FaultRule(mode="down"))
    assert (await reconcile_once(env, "rec-console-pass"))["unknown"] == 1
    await env.client.set_faults()
    console = console_settings(env.common, console_token=SecretStr(TOKEN))
    async with running_console(console, env.settings("rec-console")) as url:
        page = await browser.new_page()
        await page.goto(f"{url}/alerts")
        row = page.locator("#alerts tr", has_text="effect.unknown")
        assert await row.count() == 1
        assert (await row.locator(".action-text").inner_text()).strip()
        await sign_in(page)
        await row.locator("button.ack").click()
        assert "acknowledged" in await page.inner_text("#flash")
        assert "acked by console" in await page.inner_text("#alerts")

        await page.goto(f"{url}/runs/{run_id}")
        effect = page.locator(".effect", has_text=key)
        assert await effect.locator(".effect-state").inner_text() == "UNKNOWN"
        await effect.locator("select[name=finding]").select_option("landed")
        await effect.locator("input[name=ref]").fill(performed.id)
        await effect.locator("input[name=note]").fill("seen in the provider's dashboard")
        await effect.locator("button", has_text="Settle").click()
        assert f"{key}) of run {run_id}: LANDED as {performed.id}" in await page.inner_text(
            "#flash"
        )

    async def state() -> str:
        view = await env.views.load(run_id)
        return view.effects[key].state if view is not None else "-"

    assert await wait_until(state, lambda s: s == "landed", timeout_s=WAIT_S) == "landed"

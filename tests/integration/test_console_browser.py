"""The operator console in a real Chromium on the real stack: list → run → approve, refusals,
escaping; the screenshot in the README is made here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Browser, expect
from pydantic import SecretStr

from agentledger._core.spec import RunSpec
from agentledger.bus.publisher import KafkaPublisher
from agentledger.console.server import running_console
from agentledger.console.testing import console_settings, reconciler_settings
from agentledger.fleet import FleetSettings, fork_run, submit_run
from agentledger.fleet.agent import Agent
from agentledger.fleet.examples import gated_refund
from agentledger.fleet.testing import running_worker, wait_until
from agentledger.fleet.wiring import operator
from agentledger.projector.testing import ProjectorProcess, projector_settings
from agentledger.settings import CommonSettings
from agentledger.views import RunView
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Run, Step
from tests.integration.browser_support import TOKEN, browser, sign_in

pytestmark = pytest.mark.integration
__all__ = ["browser"]
WAIT_S = 90.0
# Under the (git-ignored) state dir: a test run never dirties the work tree. docs/console.png,
# the README's, is a copy of one.
SCREENSHOT = Path(__file__).resolve().parents[2] / ".agentledger" / "console.png"
SCRIPT = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"


@pytest.fixture
def fleet_overrides() -> dict[str, Any]:
    """These runs resume from the projector's views, behind a barrier."""
    return {"use_views": True, "resume_barrier_s": 2.0}


def scripted(name: str = "scripted") -> Agent:
    """An agent whose one step returns text with a script tag in it (as an agent might)."""

    def spec(run_id: str, value: Any) -> RunSpec:
        return RunSpec(run_id=run_id, agent=name, plan=("echo",), input=value)

    async def body(run: Run, value: Any) -> Any:
        async def echo(step: Step) -> Any:
            return {"said": SCRIPT}

        await run.step("echo", echo)
        await run.finish({"said": SCRIPT})
        return None

    return Agent(name=name, spec=spec, body=body, providers=dict)


async def statuses(views: RedisViewStore, *run_ids: str) -> dict[str, str]:
    """The runs' statuses in the projector's views."""
    found = {r: await views.load(r) for r in run_ids}
    return {r: v.status for r, v in found.items() if isinstance(v, RunView)}


async def test_console_lists_shows_approves_and_escapes(
    ledger_settings: CommonSettings, fleet: FleetSettings, browser: Browser
) -> None:
    """In Chromium: the runs list links to the paused run, approving it unsigned is refused
    (403, run still paused), signed in it is approved and the page goes live to succeeded;
    a fork of it is linked both ways; a script tag in a step result is shown as text and never
    runs; a wrong bearer is refused."""
    gated, xss = f"{fleet.key_prefix}-gated", f"{fleet.key_prefix}-xss"
    proj = projector_settings(ledger_settings, projector_group=f"{fleet.key_prefix}-projector")
    console = console_settings(fleet, console_token=SecretStr(TOKEN), console_live_interval_s=0.5)
    assert fleet.redis_url is not None
    async with (
        ProjectorProcess(proj) as projector,
        RedisViewStore.from_url(fleet.redis_url, key_prefix=fleet.key_prefix) as views,
        running_worker(fleet, gated_refund(fleet)),
        running_worker(fleet.model_copy(update={"worker_id": f"{fleet.worker_id}-s"}), scripted()),
        running_console(console, reconciler_settings(fleet)) as url,
    ):
        await projector.wait_ready()
        async with KafkaPublisher(fleet) as publisher:
            await submit_run(publisher, "refund-gated", {"seed": 3}, run_id=gated)
            await submit_run(publisher, "scripted", None, run_id=xss)
        want = {gated: "paused", xss: "succeeded"}
        seen = await wait_until(lambda: statuses(views, gated, xss), lambda s: s == want,
                                timeout_s=WAIT_S)  # fmt: skip
        assert seen == want

        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await page.goto(f"{url}/runs")
        await page.click(f"a.run-link:text-is('{gated}')")
        assert await page.inner_text("#run-status") == "paused"
        assert "waiting for approval of refund" in await page.inner_text("#pending-approval")

        await page.click("#approve")
        assert "sign in with the console token first" in await page.inner_text("#message")
        assert (await statuses(views, gated))[gated] == "paused"

        await page.go_back()
        await sign_in(page)
        # a second tab of the same run with a half-typed note: the approval changes the run, and
        # the tab says so instead of reloading the note away
        typing = await browser.new_page(viewport={"width": 1280, "height": 900})
        await typing.goto(page.url)
        await typing.fill("form[action$='/reject'] input[name=note]", "half a sentence")
        await page.click("#approve")
        assert "approved by console" in await page.inner_text("#flash")
        await expect(typing.locator("#live-notice")).to_be_visible(timeout=30_000)
        assert await typing.input_value("form[action$='/reject'] input[name=note]") == (
            "half a sentence"
        )
        await typing.close()
        final = await wait_until(lambda: statuses(views, gated), lambda s: s[gated] == "succeeded",
                                 timeout_s=WAIT_S)  # fmt: skip
        assert final[gated] == "succeeded"
        # The live page reloads itself once the projector has the new state.
        await expect(page.locator("#run-status")).to_have_text("succeeded", timeout=30_000)
        assert "approved by console" in await page.inner_text("#approvals")
        SCREENSHOT.parent.mkdir(exist_ok=True)
        await page.screenshot(path=str(SCREENSHOT), full_page=True)

        fork = f"{gated}-fork"
        async with operator(fleet, "console-test") as op:
            await fork_run(op.ledger, gated, 1, run_id=fork, resume=False, barrier=op.barrier)
        await wait_until(lambda: statuses(views, fork), lambda s: fork in s, timeout_s=WAIT_S)
        await page.goto(f"{url}/runs/{gated}")
        assert fork in await page.inner_text("#forks")
        await page.click(f"#forks a:text-is('{fork}')")
        assert f"fork of {gated} at step 1" in await page.inner_text("#fork")

        await page.goto(f"{url}/runs/{xss}")
        shown = await page.inner_text("#step-0 pre.result")
        assert "<script>document.title='pwned'</script>" in shown
        assert await page.title() != "pwned"
        assert await page.locator("main script, main img").count() == 0

        async with aiohttp.ClientSession() as http:
            for headers in ({"Authorization": "Bearer wrong"}, {}):
                async with http.post(f"{url}/runs/{gated}/reject", headers=headers) as r:
                    assert r.status == 403

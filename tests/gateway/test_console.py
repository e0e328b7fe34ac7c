"""The web console in headless Chromium: send, watch the answer stream, approve, reload the history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, Page, async_playwright, expect

from loopwright.gateway import GatewayConfig, ServerThread
from tests.gateway.conftest import MakeServer

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path("/tmp")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)",
)


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
            viewport={"width": 1280, "height": 800},
        )
        try:
            yield context
        finally:
            await context.close()


async def _open(context: BrowserContext, server: ServerThread) -> Page:
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(server.url)
    await expect(page.locator("#status")).to_have_text("connected")
    assert errors == []
    return page


async def _send(page: Page, text: str) -> None:
    await page.locator("#message").fill(text)
    await page.locator("#message").press("Enter")


async def test_send_stream_and_reload(browser: BrowserContext, server: ServerThread) -> None:
    page = await _open(browser, server)
    await expect(page.locator("#agent")).to_have_value("helper")
    await _send(page, "please add")
    answer = page.locator(".msg.assistant").last
    await expect(answer).to_contain_text("add → 2")
    await expect(page.locator(".msg.assistant.streaming")).to_have_count(0)
    card = page.locator(".tool").first
    await expect(card.locator(".tool-name")).to_have_text("add")
    await expect(card).to_have_attribute("data-state", "done")
    await expect(card.locator(".args")).to_contain_text('"a": 1')
    await expect(card.locator(".result")).to_have_text("2")
    await expect(card.locator(".tool-state")).to_contain_text("done in")
    await expect(page.locator("#session-list li")).to_have_count(1)
    await expect(page.locator("#report-list .report")).to_have_count(1)
    await page.screenshot(path=str(SCREENSHOTS / "loopwright-console-chat.png"))

    await page.reload()
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator(".msg.user")).to_have_text(["please add"])
    await expect(page.locator(".msg.assistant").last).to_contain_text("add → 2")
    await expect(page.locator(".tool .result")).to_have_text(["2"])
    await expect(page.locator(".tool .tool-state")).to_contain_text(["done in"])
    await expect(page.locator("#report-list .report .reason")).to_have_text(["done"])
    await expect(page.locator("#session-list li .title")).to_have_text(["please add"])


async def test_approve_a_pending_call(browser: BrowserContext, server: ServerThread) -> None:
    page = await _open(browser, server)
    await page.locator("#agent").select_option("careful")
    await expect(page.locator("#model")).to_have_text("model test")
    await _send(page, "email the report to bob")
    card = page.locator(".tool").first
    await expect(card).to_have_attribute("data-state", "pending")
    await expect(page.locator("#approvals .approval")).to_have_count(1)
    await page.screenshot(path=str(SCREENSHOTS / "loopwright-console-approval.png"))
    await card.get_by_role("button", name="Approve").click()
    await expect(card).to_have_attribute("data-state", "done")
    await expect(card.locator(".result")).to_contain_text("sent to")
    await expect(page.locator(".msg.assistant").last).to_contain_text("send_email → sent to")
    await expect(page.locator("#approvals")).to_be_hidden()


async def test_browse_past_sessions(browser: BrowserContext, server: ServerThread) -> None:
    page = await _open(browser, server)
    await _send(page, "first conversation")
    await expect(page.locator(".msg.assistant").last).to_contain_text("add → 2")
    await page.locator("#new-session").click()
    await expect(page.locator(".msg")).to_have_count(0)
    await _send(page, "second conversation")
    await expect(page.locator(".msg.assistant").last).to_contain_text("add → 2")
    await expect(page.locator("#session-list li")).to_have_count(2)
    await page.locator("#session-list li", has_text="first conversation").click()
    await expect(page.locator(".msg.user")).to_have_text(["first conversation"])
    await expect(page.locator("#session-title")).to_have_text("first conversation")


async def test_the_console_asks_for_the_token(browser: BrowserContext, make_server: MakeServer) -> None:
    server = make_server(GatewayConfig(token="console-token", auth_slowdown=0.001))
    page = await browser.new_page()
    await page.goto(server.url)
    await expect(page.locator("#auth")).to_be_visible()
    await expect(page.locator("#status")).to_have_text("needs a token")
    await page.locator("#token").fill("wrong")
    await page.locator("#auth-form button").click()
    await expect(page.locator("#auth-error")).to_contain_text("invalid bearer token")
    await page.locator("#token").fill("console-token")
    await page.locator("#auth-form button").click()
    await expect(page.locator("#status")).to_have_text("connected")
    await expect(page.locator("#auth")).to_be_hidden()
    await _send(page, "hello with a token")
    await expect(page.locator(".msg.assistant").last).to_contain_text("add → 2")

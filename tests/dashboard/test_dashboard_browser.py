"""The dashboard in a real browser: Debian's chromium, driven by Selenium through Debian's
chromedriver, on a dashboard subscribed to a real mosquitto, while simulated phones (real
adb) run Mobile-Eval-sim tasks with the oracle planner through the real actors.

Every wait below is for a condition (a tile, a status, an outcome), with a timeout only as
a guard; nothing asserts how long anything took. Set MOBAGENT_SCREENSHOTS=DIR to keep the
fleet and phone views as PNGs (docs/screens/ holds the ones the docs show).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from actors.config import AgentConfig, AgentSettings
from actors.perception import PerceptionEngine
from actors.planner import Choice, Completion, Decision, Policy, StepContext
from devices.discovery import FixedDevices
from host.oracle import OraclePolicy
from host.runner import agent_host
from protocol.operations import Ask, Stop, Wait, format_operation
from runtime.bus import parse_broker_url
from runtime.config import HostConfig
from sim.eval.tasks import get_task
from sim.fleet import SimFleet
from tests.dashboard.conftest import dashboard
from tests.fixtures.mosquitto import MosquittoBroker
from tests.fleet.helpers import FAST, fleet_client

pytestmark = [pytest.mark.anyio, pytest.mark.needs_mosquitto, pytest.mark.needs_adb,
              pytest.mark.slow]

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
ASK_TEXT = "Ask me which account to use, then stop."
WAIT_TEXT = "Keep waiting until you are stopped."


class Scripted:
    """A benchmark-style stand-in planner for the control tests: Ask once, or Wait forever."""

    name = "scripted"

    def __init__(self, ops: Callable[[StepContext], Any]) -> None:
        self.ops = ops
        self.seen: list[StepContext] = []

    async def decide(self, ctx: StepContext) -> Decision:
        self.seen.append(ctx)
        op = self.ops(ctx)
        return Decision("", "scripted", format_operation(op), op)

    async def choose(self, ctx: StepContext, target: str, image: bytes, labels: Sequence[int],
                     texts: Sequence[str], points: Sequence[tuple[int, int]] = (),
                     reason: str = "", crops: Sequence[bytes] = ()) -> Choice:
        return Choice(None)

    async def check_completion(self, ctx: StepContext) -> Completion:
        return Completion(True, "scripted")


def ask_then_stop(ctx: StepContext) -> Any:
    return Ask(question="Which account should I use?") if not ctx.history else Stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/bootstrap --test)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--disable-background-networking",
                "--disable-component-update", "--no-first-run"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


class Page:
    """The browser side, each call blocking (run through ``anyio.to_thread``)."""

    def __init__(self, driver: Any, url: str) -> None:
        self.d = driver
        self.url = url

    def wait(self, cond: Callable[[Any], Any], timeout_s: float = 60) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.d, timeout_s, poll_frequency=0.1).until(cond)

    def tiles(self) -> dict[str, dict[str, str]]:
        return self.d.execute_script("""
            const out = {};
            for (const t of document.querySelectorAll('article.tile')) {
              out[t.querySelector('h3.serial').textContent] = {
                status: t.dataset.status || '', seen: t.dataset.seen || '',
                screen: t.dataset.hasScreen, serial: t.dataset.serial};
            }
            return out;""")

    def submit(self, serial: str, text: str) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import Select

        box = self.d.find_element(By.ID, "submit-text")
        box.clear()
        box.send_keys(text)
        Select(self.d.find_element(By.ID, "submit-target")).select_by_value(serial)
        acks = int(self.d.execute_script("return Number(document.body.dataset.acks || 0)"))
        self.d.find_element(By.CSS_SELECTOR, "#submit button[type=submit]").click()
        self.wait(lambda d: int(d.execute_script(
            "return Number(document.body.dataset.acks || 0)")) > acks)
        assert self.d.execute_script("return document.body.dataset.lastAck") == "ok submit"

    def click(self, element_id: str) -> None:
        from selenium.webdriver.common.by import By

        self.d.find_element(By.ID, element_id).click()

    def shot(self, name: str) -> None:
        where = os.environ.get("MOBAGENT_SCREENSHOTS")
        if where:
            Path(where).mkdir(parents=True, exist_ok=True)
            self.d.save_screenshot(str(Path(where) / name))


async def test_the_fleet_live_in_chromium(
    mosquitto: MosquittoBroker, sim_fleet: Callable[..., SimFleet], browser: Any,
) -> None:
    fleet = sim_fleet(count=2)
    a, b = fleet.serials
    settings = AgentSettings(settle_s=0.05, wait_s=0.2, max_steps=400, speculative_ocr=False,
                             stream_interval_s=0.5)
    cfg = AgentConfig(bus=msgspec.structs.replace(FAST, url=mosquitto.url),
                      host=HostConfig(name="browser-host"), agent=settings)
    tasks = {t.instruction: t for t in (get_task("settings-1")(0), get_task("notes-2")(0))}
    scripted: dict[str, Scripted] = {}

    def policy_for(serial: str, instr: Any) -> Policy:
        if instr.text == ASK_TEXT:
            scripted[serial] = Scripted(ask_then_stop)
            return scripted[serial]
        if instr.text == WAIT_TEXT:
            return Scripted(lambda _ctx: Wait())
        return OraclePolicy(tasks[instr.text], fleet.phone(serial))  # type: ignore[arg-type]

    host = agent_host(cfg, policy_for, source=FixedDevices(fleet.serials),
                      perception=PerceptionEngine())
    settings_task, notes_task = tasks.values()
    async with anyio.create_task_group() as tg, \
            fleet_client(parse_broker_url(mosquitto.url)) as client:
        await tg.start(host.run)
        async with dashboard(mosquitto) as url:
            page = Page(browser, url)
            await anyio.to_thread.run_sync(browser.get, url)
            # A tile per phone, each naming its serial and showing the phone's screen.
            await anyio.to_thread.run_sync(page.wait, lambda _d: (
                (t := page.tiles()).keys() == {a, b}
                and all(x["screen"] == "yes" for x in t.values())))

            # An episode run on the host: tile A goes busy, then idle.
            await anyio.to_thread.run_sync(settings_task.setup, fleet.phone(a))
            run = Instruction_for(settings_task.instruction, a)
            tg.start_soon(host.run_on, a, run)
            await anyio.to_thread.run_sync(page.wait, lambda _d: "busy idle" in
                                           page.tiles()[a]["seen"])
            assert (await client.wait_finished_on(a, 1, timeout_s=120)).status == "succeeded"

            # Submitted from the page: the episode runs and the task holds on the phone.
            await anyio.to_thread.run_sync(notes_task.setup, fleet.phone(b))
            await anyio.to_thread.run_sync(page.submit, b, notes_task.instruction)
            outcome = await client.wait_finished_on(b, 1, timeout_s=120)
            assert outcome.status == "succeeded", outcome.reason
            assert await anyio.to_thread.run_sync(notes_task.is_successful, fleet.phone(b))
            await anyio.to_thread.run_sync(page.shot, "dashboard-fleet.png")

            # A question from the agent, answered from the phone view.
            await anyio.to_thread.run_sync(page.submit, a, ASK_TEXT)
            await anyio.to_thread.run_sync(browser.get, f"{url}#/phone/{a}")
            await anyio.to_thread.run_sync(page.wait, lambda d: d.execute_script(
                "return !document.getElementById('form-answer').hidden"))
            await anyio.to_thread.run_sync(page.wait, lambda d: d.execute_script(
                "return document.querySelectorAll('#timeline section.step').length > 0"))
            await anyio.to_thread.run_sync(page.shot, "dashboard-phone.png")
            from selenium.webdriver.common.by import By

            await anyio.to_thread.run_sync(lambda: browser.find_element(
                By.ID, "answer-text").send_keys("the work account"))
            await anyio.to_thread.run_sync(page.click, "form-answer-submit")
            outcome = await client.wait_finished_on(a, 2, timeout_s=120)
            assert outcome.status == "succeeded", outcome.reason
            results = [r.result for c in scripted[a].seen for r in c.history]
            assert "answered: the work account" in results

            # Cancel from the page stops a running episode.
            await anyio.to_thread.run_sync(page.submit, a, WAIT_TEXT)
            await anyio.to_thread.run_sync(page.wait, lambda d: d.execute_script(
                "return !document.getElementById('btn-cancel').disabled"))
            await anyio.to_thread.run_sync(page.click, "btn-cancel")
            outcome = await client.wait_finished_on(a, 3, timeout_s=120)
            assert outcome.status == "cancelled"
            await anyio.to_thread.run_sync(page.wait, lambda _d: page.tiles()[a]["status"]
                                           == "idle")
        tg.cancel_scope.cancel()


def Instruction_for(text: str, serial: str) -> Any:  # noqa: N802 (reads like the message)
    from protocol.messages import Instruction

    return Instruction(id=f"run-{serial}", text=text, device=serial)

"""perception.text_grounding / icon_grounding: the grounder role served elsewhere (the
loopback OpenAI server standing for vLLM on a GPU host), through the real LLMClient, with
OCR lines and icon proposals given (no model loads)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import pytest

from actors.capture import Captured
from actors.perception import PerceptionEngine
from devices.codecs import encode_png
from models.detector import Proposal
from models.grounding import IconSettings, Perception, PerceptionSettings
from models.icons import IconScores
from models.llm import LLMClient, LLMSettings
from models.llm.grounder import ModelGrounder
from models.ocr import OcrLine, OcrResult, Reading
from protocol.messages import Ambiguous, Frame, Grounded, GroundRequest, NotFound
from protocol.operations import ClickIcon, ClickText
from runtime.config import ConfigError
from tests.fixtures.openai_server import Behaviour, OpenAIServer

pytestmark = pytest.mark.anyio

W, H = 1000, 2000  # Qwen3-VL answers 0..1000: x is pixels, y is half


class FixedOcr:
    def __init__(self, lines: Sequence[tuple[str, tuple[float, float, float, float]]]) -> None:
        self.lines = tuple(OcrLine(t, 0.99, b, ((b[0], b[1]), (b[2], b[1]), (b[2], b[3]), (b[0], b[3])))
                           for t, b in lines)

    def run_bgr(self, bgr: np.ndarray) -> OcrResult:
        return OcrResult(W, H, self.lines)

    def read_bgr(self, bgr: np.ndarray, *_: object, **__: object) -> Reading:
        return Reading(self.run_bgr(bgr), tuple(range(len(self.lines))), ())


class FixedDetector:
    def __init__(self, boxes: Sequence[tuple[float, float, float, float]]) -> None:
        self.boxes = boxes

    def detect(self, bgr: np.ndarray) -> list[Proposal]:
        return [Proposal(b, 0.9) for b in self.boxes]


LINES = [("Send message", (100, 400, 500, 460)), ("Send later", (100, 800, 400, 860)),
         ("Settings", (100, 1200, 400, 1260)), ("Settings", (600, 1200, 900, 1260)),
         ("Display", (100, 1600, 400, 1660))]
ICONS = [(800, 300, 900, 400), (100, 1800, 200, 1900)]


def captured() -> Captured:
    rgb = np.full((H, W, 3), 255, np.uint8)
    png = encode_png(rgb)
    frame = Frame(frame_id="f1", sha256=hashlib.sha256(png).hexdigest(), width=W, height=H,
                  format="png", data=png)
    return Captured(frame, rgb, 0.0, 0.0)


def settings(url: str) -> LLMSettings:
    return msgspec.convert({
        "base_url": "http://127.0.0.1:9/v1", "api_key": "k", "max_retries": 0,
        "family": {"grounder": "auto"},
        "roles": {"grounder": {"base_url": url, "model": "Qwen3-VL-8B-Instruct"}}}, LLMSettings)


def engine(llm: LLMClient, text: str = "hybrid", icon: str = "hybrid") -> PerceptionEngine:
    ps = PerceptionSettings(text_grounding=text, icon_grounding=icon,  # type: ignore[arg-type]
                            icons=IconSettings(matcher="none"))
    p = Perception(ps, ocr=FixedOcr(LINES), detector=FixedDetector(ICONS))  # type: ignore[arg-type]
    return PerceptionEngine(p, grounder=ModelGrounder.from_settings(llm, llm.settings))


def ask(op: ClickText | ClickIcon, thought: str = "") -> GroundRequest:
    return GroundRequest(frame_id="f1", operation=op, device="p1", thought=thought)


async def test_an_ambiguous_text_is_resolved_by_the_grounder_and_snapped(
    openai_server: OpenAIServer,
) -> None:
    # "Send" is a word of two lines: Ambiguous for OCR; the grounder points inside
    # "Send later", off its centre: the answer is that line's centre.
    openai_server.script('[{"point_2d": [120, 410], "label": "Send later"}]')
    async with LLMClient(settings(openai_server.base_url)) as llm:
        eng = engine(llm)
        got = await eng.ground(ask(ClickText("Send"), "Send it later"), captured())
    assert isinstance(got, Grounded) and got.source == "grounder"
    assert (got.x, got.y) == (250, 830) and got.frame_id == "f1"
    (req,) = openai_server.requests
    assert req.body is not None and req.body["model"] == "Qwen3-VL-8B-Instruct"
    assert any("point_2d" in t and "Send later" not in t for t in req.texts())
    assert any("Send it later" in t for t in req.texts()) and len(req.images()) == 1


async def test_ocrs_exact_match_wins_over_a_grounder_pointing_elsewhere(
    openai_server: OpenAIServer,
) -> None:
    # Two lines read "Settings" exactly; the grounder points at "Display": OCR wins, the
    # Ambiguous answer stands for the chooser, and its reason says so.
    openai_server.script('{"point_2d": [250, 815]}', '{"point_2d": [700, 615]}')
    async with LLMClient(settings(openai_server.base_url)) as llm:
        eng = engine(llm)
        lost = await eng.ground(ask(ClickText("Settings")), captured())
        won = await eng.ground(ask(ClickText("Settings")), captured())
    assert isinstance(lost, Ambiguous) and len(lost.candidates) == 2
    assert "OCR's exact matches win" in lost.reason and eng.grounder_overruled == 1
    assert isinstance(won, Grounded) and won.source == "grounder" and (won.x, won.y) == (750, 1230)


async def test_an_icon_always_asks_the_grounder_and_snaps_to_the_icon_box(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script("(820, 155)")  # inside the first icon, near its corner
    async with LLMClient(settings(openai_server.base_url)) as llm:
        got = await engine(llm).ground(ask(ClickIcon("search", "top")), captured())
    assert isinstance(got, Grounded) and got.source == "grounder" and (got.x, got.y) == (850, 350)
    assert any("the icon: search (in the top" in t for t in openai_server.requests[0].texts())


class SureOfTheLast:
    """A matcher confident that the last box is the icon."""

    def judge(self, bgr: np.ndarray, boxes: Sequence[tuple[float, float, float, float]],
              description: str) -> IconScores:
        return IconScores([0.95 if i == len(boxes) - 1 else 0.1 for i in range(len(boxes))])


async def test_a_confident_matcher_elsewhere_puts_both_icons_before_the_chooser(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script("(850, 175)", "(150, 925)")  # the first icon; then the matcher's
    async with LLMClient(settings(openai_server.base_url)) as llm:
        eng = engine(llm)
        eng.perception = Perception(eng.perception.settings, ocr=FixedOcr(LINES),
                                    detector=FixedDetector(ICONS), matcher=SureOfTheLast())
        disputed = await eng.ground(ask(ClickIcon("share")), captured())
        agreed = await eng.ground(ask(ClickIcon("share")), captured())
    assert isinstance(disputed, Ambiguous) and eng.grounder_disputed == 1
    assert [c.box.center for c in disputed.candidates] == [(850, 350), (150, 1850)]
    assert "icon matcher" in disputed.reason and disputed.marked_image
    assert isinstance(agreed, Grounded) and agreed.source == "grounder"
    assert agreed.point == (150, 1850)


async def test_a_confident_ocr_text_match_needs_no_grounder(openai_server: OpenAIServer) -> None:
    async with LLMClient(settings(openai_server.base_url)) as llm:
        got = await engine(llm).ground(ask(ClickText("Display")), captured())
    assert isinstance(got, Grounded) and got.source == "exact" and not openai_server.requests


async def test_a_failing_grounder_leaves_ocrs_answer(openai_server: OpenAIServer) -> None:
    openai_server.script(Behaviour.error(400, "bad model"))
    async with LLMClient(settings(openai_server.base_url)) as llm:
        eng = engine(llm)
        got = await eng.ground(ask(ClickText("Send")), captured())
    assert isinstance(got, Ambiguous) and eng.grounder_failed == 1


async def test_model_mode_is_the_grounder_alone(openai_server: OpenAIServer) -> None:
    openai_server.script("(333, 444)", "NONE")
    async with LLMClient(settings(openai_server.base_url)) as llm:
        eng = engine(llm, text="model", icon="model")
        at = await eng.ground(ask(ClickText("Settings")), captured())
        none = await eng.ground(ask(ClickIcon("share")), captured())
    assert isinstance(at, Grounded) and (at.x, at.y) == (333, 888) and at.source == "grounder"
    assert isinstance(none, NotFound)


def test_a_grounding_mode_without_a_grounder_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="llm.roles.grounder"):
        PerceptionEngine(settings=PerceptionSettings(text_grounding="hybrid"))


def test_a_hosts_engine_gets_the_grounder_role_from_its_llm_client() -> None:
    from actors.config import AgentConfig
    from actors.perception import engine_for

    cfg = msgspec.convert({"perception": {"text_grounding": "hybrid"},
                           "llm": {"api_key": "k", "roles": {"grounder": {
                               "base_url": "http://gpu-host:8000/v1", "model": "UI-TARS-1.5-7B"}}}},
                          AgentConfig)
    assert engine_for(AgentConfig()).grounder is None  # ocr: today's behaviour, no model
    with pytest.raises(ConfigError):
        engine_for(cfg)
    llm = LLMClient(cfg.llm)
    eng = engine_for(cfg, llm)
    assert isinstance(eng.grounder, ModelGrounder) and eng.grounder.family.name == "uitars"
    assert llm.role_config("grounder").endpoint == "gpu-host:8000"


# -- what the grounder's calls cost: carried back to the planner, under its cap ---------------


def priced(url: str, **grounder: object) -> LLMSettings:
    raw = msgspec.to_builtins(settings(url))
    raw["prices"] = {"Qwen3-VL-8B-Instruct": {"prompt_per_mtok": 10.0, "completion_per_mtok": 20.0}}
    raw["roles"]["grounder"].update(grounder)
    return msgspec.convert(raw, LLMSettings)


async def test_the_answer_carries_each_grounder_call_and_its_cost(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(
        Behaviour.reply("(333, 444)", prompt_tokens=1000, completion_tokens=10, cached_tokens=5),
        Behaviour.reply("NONE", prompt_tokens=900, completion_tokens=2),
        Behaviour.reply('[{"point_2d": [120, 410]}]', prompt_tokens=800, completion_tokens=20))
    async with LLMClient(priced(openai_server.base_url)) as llm:
        eng = engine(llm, text="model", icon="model")
        at = await eng.ground(ask(ClickText("Settings")), captured())
        none = await eng.ground(ask(ClickIcon("share")), captured())
        hybrid = await engine(llm).ground(ask(ClickText("Send")), captured())
    (call,) = at.llm_calls
    assert (call.model, call.role, call.prompt_tokens, call.completion_tokens,
            call.cached_tokens, call.attempts) == ("Qwen3-VL-8B-Instruct", "grounder", 1000, 10, 5, 1)
    assert call.cost_usd == pytest.approx((1000 * 10.0 + 10 * 20.0) / 1e6) and call.latency_s > 0
    assert isinstance(none, NotFound) and [c.prompt_tokens for c in none.llm_calls] == [900]
    assert isinstance(hybrid, Grounded) and [c.prompt_tokens for c in hybrid.llm_calls] == [800]
    assert not at.cost_capped and not none.cost_capped
    # and it crosses the wire (a remote perception worker's answer)
    assert msgspec.json.decode(msgspec.json.encode(at), type=Grounded).llm_calls == at.llm_calls


async def test_no_grounder_call_no_calls_in_the_answer(openai_server: OpenAIServer) -> None:
    openai_server.script(Behaviour.error(400, "bad model"))
    async with LLMClient(priced(openai_server.base_url)) as llm:
        exact = await engine(llm).ground(ask(ClickText("Display")), captured())
        failed = await engine(llm).ground(ask(ClickText("Send")), captured())
    assert exact.llm_calls == () and failed.llm_calls == ()  # a failed call answered nothing
    assert isinstance(failed, Ambiguous) and not failed.cost_capped


@pytest.mark.parametrize("mode", ["model", "hybrid"])
async def test_a_call_the_requests_cap_cannot_pay_for_is_not_made(
    openai_server: OpenAIServer, mode: str,
) -> None:
    # The worst cost: the frame's ~1k prompt tokens at $10/M plus 1000 output tokens at
    # $20/M, over $0.02; $0.09 of the $0.10 cap is spent.
    openai_server.script("(333, 444)")
    req = msgspec.structs.replace(ask(ClickIcon("share")), max_cost_usd=0.1, cost_usd=0.09)
    async with LLMClient(priced(openai_server.base_url, max_tokens=1000)) as llm:
        eng = engine(llm, text=mode, icon=mode)
        got = await eng.ground(req, captured())
        assert isinstance(got, NotFound) and got.llm_calls == ()
        assert got.cost_capped.startswith("cost cap of $0.1 would be passed: the next grounder")
        assert not openai_server.requests and eng.grounder_failed == 0
        # with room left the same call is made
        roomy = msgspec.structs.replace(req, cost_usd=0.01)
        made = await eng.ground(roomy, captured())
    assert len(openai_server.requests) == 1 and len(made.llm_calls) == 1 and not made.cost_capped


def test_an_answer_from_before_the_cost_fields_still_decodes() -> None:
    old = b'{"kind":"grounded","frame_id":"f1","x":1,"y":2,"box":[0,0,4,4]}'
    got = msgspec.json.decode(old, type=Grounded)
    assert got.llm_calls == () and got.cost_capped == ""
    req = msgspec.json.decode(msgspec.json.encode(ask(ClickText("a"))), type=GroundRequest)
    assert (req.max_cost_usd, req.cost_usd) == (0.0, 0.0)


async def test_a_grounding_out_of_time_still_carries_the_calls_it_made(
    openai_server: OpenAIServer,
) -> None:
    # The grounder answers, then snapping its point waits past the answer's deadline (a
    # busy CPU pool): the request is answered NotFound in time, with the call to charge.
    import anyio

    openai_server.script(Behaviour.reply("(820, 155)", prompt_tokens=700, completion_tokens=8))
    async with LLMClient(priced(openai_server.base_url)) as llm:
        eng = engine(llm)
        eng.answer_within_s = 1.0
        off_loop = eng._off_loop

        async def stuck_after_the_grounder(device: str, fn: Any) -> Any:
            if eng.grounder_calls:
                await anyio.sleep(30)
            return await off_loop(device, fn)

        eng._off_loop = stuck_after_the_grounder  # type: ignore[method-assign]
        with anyio.fail_after(10):
            got = await eng.ground(ask(ClickIcon("search", "top")), captured())
    assert isinstance(got, NotFound) and got.frame_id == "f1"
    assert [c.prompt_tokens for c in got.llm_calls] == [700]

"""bench/model_families.py: the stand-in's arithmetic, and a short run of two families
(a text one and a coordinate one) through the real agent with noise on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.model_families import gpt4o_image_tokens, main, model_space, smart_resize
from models.llm.families import smart_resize as product_smart_resize
from protocol.operations import Operation, Stop


def test_gpt4o_image_tokens_follow_the_published_examples() -> None:
    assert gpt4o_image_tokens((1024, 1024)) == 765  # 4 tiles
    assert gpt4o_image_tokens((2048, 4096)) == 1105  # -> 1024x2048 -> 768x1536: 6 tiles
    assert gpt4o_image_tokens((4096, 8192), "low") == 85
    assert gpt4o_image_tokens((461, 1024)) == 425  # the agent's default planner image


def test_model_spaces() -> None:
    # The stand-in's resize rule is its own; it must agree with the product's.
    for h, w in ((2400, 1080), (1024, 461), (1920, 1080), (100, 50)):
        assert smart_resize(h, w, 28, 3136, 12845056) == product_smart_resize(
            h, w, factor=28, min_pixels=3136, max_pixels=12845056)
    assert model_space("uitars", (461, 1024)) == (448, 1036)
    assert model_space("autoglm", (461, 1024)) == (1000.0, 1000.0)
    assert model_space("tools", (461, 1024)) == (461.0, 1024.0)


def test_unknown_family_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["--families", "react,gpt", "--out", str(tmp_path)]) == 2


@pytest.mark.needs_adb
@pytest.mark.slow
def test_two_families_on_one_task_with_noise(
    adb_server: object, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main(["--families", "react,uitars", "--tasks", "settings-1", "--seeds", "0",
               "--devices", "1", "--noise", "0.35", "--llm-timeout-s", "1", "--out", str(tmp_path),
               "--set", "agent.speculative_ocr=false"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(out["families"]) == {"react", "uitars"}
    for name, fam in out["families"].items():
        assert fam["SU"] == 1.0, (name, fam)
        assert fam["episodes_failed_by_transient_errors"] == 0
        # every malformed answer was caught (re-asked), none executed
        assert fam["parse_failures"] == fam["malformed_sent"], (name, fam)
        assert 0 < fam["image_tokens_per_task"] < fam["v1_image_tokens_per_task"]
    # the draws are seeded: noise did happen in this episode
    assert sum(f["retries"] + f["malformed_sent"] for f in out["families"].values()) > 0
    assert (tmp_path / "uitars" / "results.json").exists()


def test_a_model_without_enter_taps_the_keyboards_search_key() -> None:
    # youtube-1: open YouTube, tap the search box, type, submit. The stand-in for a family
    # without an Enter action (AutoGLM) submits by tapping what submit_target finds, and
    # that tap on the simulated phone submits the search as a keyboard's action key would.
    from bench.model_families import submit_target
    from protocol.operations import Enter, TypeText
    from sim.eval.ground_truth import GroundTruthExecutor
    from sim.eval.tasks import TASKS
    from sim.phone import SimPhone
    from sim.phone_api import DeviceInfo

    cls = next(t for t in TASKS if t.task_id() == "youtube-1")
    task = cls(0)
    phone = SimPhone(DeviceInfo("kb"), seed=0)
    task.setup(phone)
    run = GroundTruthExecutor(phone)
    ref = task.reference
    assert isinstance(ref[-1], Enter) and isinstance(ref[-2], TypeText)
    for op in ref[:-1]:
        run.run(op)
    assert not task.is_successful(phone)
    key = submit_target(phone)
    assert key is not None and key.kind == "key" and key.desc == "Enter"
    phone.tap(*key.center)
    assert task.is_successful(phone)


def test_the_completion_answer_is_the_tasks_own_check() -> None:
    from bench.openai_loopback import completion_reply, task_state
    from sim.eval.ground_truth import GroundTruthExecutor
    from sim.eval.tasks import TASKS
    from sim.phone import SimPhone
    from sim.phone_api import DeviceInfo

    cls = next(t for t in TASKS if t.task_id() == "settings-1")
    task = cls(0)
    phone = SimPhone(DeviceInfo("c"), seed=0)
    task.setup(phone)
    done, why = task_state(task, phone)
    assert not done and why.startswith("not yet: ")
    assert completion_reply(done, why).startswith("Complete: no\nReason: not yet: ")
    run = GroundTruthExecutor(phone)
    ops = task.reference
    for op in ops[:-1]:
        run.run(op)
    # the earlier milestones may hold no more (a screen left behind): the missing one is
    # the first after the last that holds
    assert task_state(task, phone) == (False, f"not yet: {task.milestones()[-1].name}")
    run.run(ops[-1])
    assert task_state(task, phone)[0]
    assert not task_state(task, None)[0]  # a phone that cannot be read is not done


def test_the_stand_in_grounder_answers_the_planned_targets_box_in_its_familys_format() -> None:
    import random
    from collections import Counter

    from bench.model_families import (
        Board,
        Intent,
        StandInGrounder,
        StandInModel,
    )
    from bench.openai_loopback import RecordedRequest
    from models.llm.families import get_family
    from models.llm.grounder import grounder_messages, parse_grounder_reply
    from protocol.operations import ClickIcon, ClickText

    model = StandInModel("react", noise=0.0, timeout_s=1.0)
    board = Board("react", "p1", "open the settings", (1000, 2000), random.Random(0))
    board.intent = Intent("plan", op=ClickText("Wi-Fi"), box=(100, 400, 500, 500))
    model._boards["p1"] = board
    grounder = StandInGrounder(model, "qwen3")
    fam = get_family("auto", "qwen3-vl-8b-instruct")
    geom = fam.geometry(1000, 2000)

    def ask(target: str) -> tuple[str, object]:
        import base64
        import io

        from PIL import Image

        buf = io.BytesIO()
        Image.new("RGB", (1000, 2000)).save(buf, format="PNG")
        msgs = grounder_messages(fam, geom, target, "", buf.getvalue())
        url = "data:image/png;base64," + base64.b64encode(
            msgs[0].content[0].data).decode()  # type: ignore[union-attr]
        body = {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": msgs[0].content[1]}]}]}
        text = grounder.answer(RecordedRequest("/v1/chat/completions", {}, body, 0.0)).text or ""
        return text, parse_grounder_reply(text, geom)

    hits: Counter[str] = Counter()
    for _ in range(200):
        _, ans = ask('the element showing the text "Wi-Fi"')
        inside = ans is not None and 100 <= ans.point[0] <= 500 and 400 <= ans.point[1] <= 500  # type: ignore[attr-defined]
        hits["in" if inside else "out"] += 1
    assert 0.8 <= hits["in"] / 200 <= 0.97  # the assumed ~90 %
    assert grounder.stats["asked"] == 200 and grounder.stats["elsewhere"] > 0
    board.intent = Intent("plan", op=ClickIcon("search"), box=None)  # not on the screen
    assert ask("the icon: search")[0] == "NONE"


# -- the newer families' stand-ins: each answer parsed back by the family itself ------------

NEWER = ["agentcpm", "glm", "cogagent", "venus", "venus-1.0", "gelab", "holo", "holo-1.5",
         "holo-1", "claude", "gemini", "gui-owl", "gui-owl-1.5", "mai-ui", "uitars-doubao"]
SCREEN = (1080, 2400)
TARGET = (100, 1000, 300, 1100)  # device pixels: a button
FIELD = (40, 200, 1040, 300)


def _family(key: str) -> Any:
    from bench.model_families import NEW_STANDINS
    from models.llm.families import get_family

    kind, model = NEW_STANDINS[key]
    return get_family(kind, model, max_image_side=1024)


def _answer(key: str, op: Operation, *, box: tuple[int, int, int, int] | None = None,
            seed: int = 0, noise: bool = False) -> tuple[Any, Any]:
    """The stand-in's answer for ``op`` as a request of that family would get it, and
    the family's geometry for the screen."""
    import random

    from bench.model_families import Aim, model_space, new_family_malformed, new_family_reply

    fam = _family(key)
    geom = fam.geometry(*SCREEN)
    space = model_space(key, geom.sent_size)
    rng = random.Random(seed)
    if noise:
        return new_family_malformed(key, rng), geom
    sw, sh = SCREEN
    point = None
    aim = Aim(space)
    if box is not None:
        x0, y0, x1, y1 = box
        point = ((x0 + x1) / 2 / sw * space[0], (y0 + y1) / 2 / sh * space[1])
        aim = Aim(space, point, ((x1 - x0) / 2 / sw * space[0], (y1 - y0) / 2 / sh * space[1]))
    aim.field = ((FIELD[0] + FIELD[2]) / 2 / sw * space[0], (FIELD[1] + FIELD[3]) / 2 / sh * space[1])
    return new_family_reply(key, op, aim, rng), geom


def _parse(key: str, behaviour: Any, geom: Any) -> Operation:
    from models.llm.families import ToolCall

    calls = tuple(ToolCall(n, a) for n, a in behaviour.tool_calls or ())
    return _family(key).parse(behaviour.text or "", geom, calls).operation


@pytest.mark.parametrize("key", NEWER)
def test_each_newer_stand_in_taps_the_target_in_its_convention(key: str) -> None:
    from protocol.operations import ClickText, TapPoint

    for seed in range(6):  # every spelling the stand-in draws
        b, geom = _answer(key, ClickText("Save"), box=TARGET, seed=seed)
        op = _parse(key, b, geom)
        assert isinstance(op, TapPoint), (key, b)
        # the centre (200, 1050), within a pixel or two of rounding in the model's grid
        assert abs(op.x - 200) <= 4 and abs(op.y - 1050) <= 4, (key, b, op)


@pytest.mark.parametrize("key", [k for k in NEWER if not k.startswith("holo")])
def test_each_newer_stand_in_speaks_every_reference_operation(key: str) -> None:
    from protocol.operations import (
        Back,
        Enter,
        Exit,
        OpenApp,
        PageDown,
        Stop,
        Swipe,
        SwipePoints,
        TapPoint,
        TypeText,
    )

    for seed in range(3):
        def parsed(op: Operation, box: tuple[int, int, int, int] | None = None) -> Operation:
            b, geom = _answer(key, op, box=box, seed=seed)  # noqa: B023
            return _parse(key, b, geom)

        typed = parsed(TypeText("hello world"))
        assert isinstance(typed, TypeText) and typed.text == "hello world", (key, typed)
        assert parsed(Back()) == Back()
        assert parsed(Exit()) == Exit()
        assert isinstance(parsed(Stop()), Stop)
        down = parsed(PageDown())  # shows what is below: a wheel, or the finger moving up
        assert down in (PageDown(), Swipe("up")) or (
            isinstance(down, SwipePoints) and down.y2 < down.y1), (key, down)
        if key == "agentcpm":  # no open-app action: it taps the icon the policy found
            assert isinstance(parsed(OpenApp("Notes"), box=TARGET), TapPoint)
        else:
            assert parsed(OpenApp("Notes")) == OpenApp("Notes")
        enter = parsed(Enter(), box=TARGET if key == "gelab" else None)
        # GELab's prompt has no Enter: it taps the keyboard's action key
        assert enter == (TapPoint(200, 1050) if key == "gelab" else Enter()) or (
            key == "gelab" and isinstance(enter, TapPoint)), (key, enter)


@pytest.mark.parametrize("key", NEWER)
def test_each_newer_stand_ins_malformed_answers_are_refused(key: str) -> None:
    from models.llm.errors import ParseError

    seen = set()
    for seed in range(40):
        b, geom = _answer(key, Stop(), seed=seed, noise=True)
        seen.add((b.text, b.tool_calls))
        with pytest.raises(ParseError):
            _parse(key, b, geom)
    assert len(seen) >= 3


def test_every_registered_family_is_a_stand_in() -> None:
    from bench.model_families import MODELS, family_list
    from models.llm.families import FAMILY_NAMES

    assert set(FAMILY_NAMES) <= set(MODELS)
    assert family_list("all") == list(MODELS)
    assert family_list("uitars-1.5,qwen2.5,claude") == ["uitars", "qwen", "claude"]


def test_agentcpm_opens_an_app_from_the_drawer() -> None:
    from bench.model_families import open_app_step
    from sim.phone import SimPhone
    from sim.phone_api import DeviceInfo

    phone = SimPhone(DeviceInfo("d"), seed=0)
    assert open_app_step(phone, "Notes")[0] == "tap"  # on the home screen
    assert open_app_step(phone, "YouTube") == ("drawer", None)
    phone.swipe(540, 1800, 540, 900, 300)  # the finger up: the drawer
    for _ in range(4):
        nav, el = open_app_step(phone, "YouTube")
        if nav == "tap":
            break
        phone.swipe(540, 1800, 540, 900, 300)
    assert nav == "tap" and el is not None
    phone.tap(*el.center)
    assert phone.foreground() != phone.home_component().split("/")[0]


def test_a_stand_in_that_missed_its_tap_goes_back_and_taps_again() -> None:
    # settings-1: Open Settings, Display, Dark mode. The stand-in's noise sends the Display
    # tap onto another row (Network & internet); as a model that sees the wrong page would,
    # it goes Back once, then taps Display again, then goes on with the reference.
    import random

    import anyio

    from actors.planner import Decision, StepContext
    from bench.model_families import Board, StandInPolicy
    from host.oracle import OraclePolicy
    from models.llm.prompts.shared import PastStep
    from protocol.operations import Back, ClickText
    from sim.eval.ground_truth import GroundTruthExecutor, resolve
    from sim.eval.tasks import TASKS
    from sim.phone import SimPhone
    from sim.phone_api import DeviceInfo

    cls = next(t for t in TASKS if t.task_id() == "settings-1")
    task = cls(0)
    phone = SimPhone(DeviceInfo("miss"), seed=0)
    task.setup(phone)
    board = Board("uitars", "miss", task.instruction, (1080, 2400), random.Random(0))

    class Echo:  # the family's model answers what the board says it means
        image_view = None

        async def decide(self, ctx: StepContext) -> Decision:
            assert board.intent is not None and board.intent.op is not None
            return Decision("", "", "", board.intent.op)

    policy = StandInPolicy(Echo(), OraclePolicy(task, phone), board, phone,  # type: ignore[arg-type]
                           coordinates=True, task=task, stats=board.stats)
    run = GroundTruthExecutor(phone)
    history: list[PastStep] = []

    def decide() -> Operation | None:
        op = anyio.run(policy.decide, StepContext("x", b"", history=tuple(history))).operation
        assert op is not None
        history.append(PastStep(action=op, verdict="ok"))
        return op

    assert decide() == task.reference[0]
    run.run(task.reference[0])
    assert decide() == ClickText("Display")
    stray = resolve(phone, ClickText("Network & internet"))
    assert stray is not None
    phone.tap(*stray.center)  # the noisy tap lands on the row above
    assert decide() == Back()
    run.run(Back())
    assert decide() == ClickText("Display")
    run.run(ClickText("Display"))
    assert decide() == ClickText("Dark mode")
    assert board.stats == {"back_after_a_miss": 1, "retap_after_a_miss": 1}


# -- a grounding model as hybrid's grounder: the stand-in's answer read by the family ------

GROUNDING_VARIANTS = ["seeclick", "os-atlas", "showui", "uground", "aria-ui", "jedi", "gta1",
                      "gui-actor", "venus-ground"]


def _grounder_request(fam: Any, geom: Any, screen: tuple[int, int], target: str) -> Any:
    """The grounder role's request for ``target`` as the loopback server records it."""
    import base64
    import io

    from PIL import Image

    from bench.openai_loopback import RecordedRequest
    from models.llm.grounder import grounder_messages

    buf = io.BytesIO()
    Image.new("RGB", screen).save(buf, format="PNG")
    msgs = grounder_messages(fam, geom, target, "", buf.getvalue())
    url = "data:image/png;base64," + base64.b64encode(
        msgs[0].content[0].data).decode()  # type: ignore[union-attr]
    body = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "text", "text": msgs[0].content[1]}]}]}
    return RecordedRequest("/v1/chat/completions", {}, body, 0.0)


@pytest.mark.parametrize("variant", GROUNDING_VARIANTS)
@pytest.mark.parametrize("screen", [(1080, 2400), (1600, 2560)])
def test_a_grounding_models_answer_is_read_back_at_the_targets_centre(
        variant: str, screen: tuple[int, int]) -> None:
    from bench.model_families import GROUNDING_GROUNDERS, grounding_answer
    from models.llm.families import get_family
    from models.llm.families.grounding import GroundingFamily
    from models.llm.grounder import parse_grounder_reply

    fam = get_family("auto", GROUNDING_GROUNDERS[variant])
    assert isinstance(fam, GroundingFamily) and fam.variant == variant
    geom = fam.geometry(*screen)
    req = _grounder_request(fam, geom, screen, 'the element showing the text "Wi-Fi"')
    sent = req.images()[-1].size  # the image as the grounder receives it
    box = (100, 1000, 500, 1100)  # device pixels
    sw, sh = screen
    text = grounding_answer(variant, "Wi-Fi", ((300 + 0.5) / sw, (1050 + 0.5) / sh),
                            (200 / sw, 50 / sh), sent)
    ans = parse_grounder_reply(text, geom, fam)
    assert ans is not None, text
    # SeeClick and ShowUI answer two decimals: 0.005 of the side; the others a pixel or two
    tol = 0.005 * max(screen) + 2 if variant in ("seeclick", "showui") else 3
    assert abs(ans.point[0] - 300) <= tol and abs(ans.point[1] - 1050) <= tol, (text, ans)
    if variant in ("os-atlas", "venus-ground"):  # a box: the target's, within a pixel or two
        assert ans.box is not None
        assert all(abs(a - b) <= 3 for a, b in zip(ans.box, box, strict=True)), (text, ans.box)


def test_the_stand_in_grounder_finds_a_target_quoted_in_a_grounding_prompt() -> None:
    import random
    from collections import Counter

    from bench.model_families import (
        GROUNDING_GROUNDERS,
        Board,
        Intent,
        StandInGrounder,
        StandInModel,
    )
    from models.llm.families import get_family
    from models.llm.grounder import parse_grounder_reply
    from protocol.operations import ClickText

    model = StandInModel("react", noise=0.0, timeout_s=1.0)
    board = Board("react", "p1", "open the settings", (1080, 2400), random.Random(0))
    board.intent = Intent("plan", op=ClickText("Wi-Fi"), box=(100, 1000, 500, 1100))
    model._boards["p1"] = board
    for variant in ("seeclick", "os-atlas"):  # '..."{target}" (with point)?': the quote after
        grounder = StandInGrounder(model, variant)
        fam = get_family("auto", GROUNDING_GROUNDERS[variant])
        geom = fam.geometry(1080, 2400)
        hits: Counter[str] = Counter()
        for _ in range(200):
            req = _grounder_request(fam, geom, (1080, 2400), 'the element showing the text "Wi-Fi"')
            ans = parse_grounder_reply(grounder.answer(req).text or "", geom, fam)
            inside = ans is not None and 100 <= ans.point[0] <= 500 and 1000 <= ans.point[1] <= 1100
            hits["in" if inside else "out"] += 1
        assert grounder.stats["none"] < 20, (variant, grounder.stats)  # found the board
        assert 0.75 <= hits["in"] / 200 <= 0.97, (variant, hits)

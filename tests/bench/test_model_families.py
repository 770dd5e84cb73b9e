"""bench/model_families.py: the stand-in's arithmetic, and a short run of two families
(a text one and a coordinate one) through the real agent with noise on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.model_families import gpt4o_image_tokens, main, model_space, smart_resize
from models.llm.families import smart_resize as product_smart_resize


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

"""The grounder role: its prompts per family, its reply reader and the device mapping."""

from __future__ import annotations

import io

import msgspec
import pytest
from PIL import Image

from models.llm import LLMSettings
from models.llm.errors import ParseError
from models.llm.families import get_family
from models.llm.grounder import (
    GrounderAnswer,
    grounder_prompt,
    parse_grounder_reply,
    read_numbers,
)


def _png(w: int, h: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (w, h), "white").save(out, format="PNG")
    return out.getvalue()


def test_the_grounder_is_a_role_with_its_own_endpoint_model_and_family() -> None:
    s = msgspec.convert({"api_key": "k", "family": {"grounder": "auto"}, "roles": {"grounder": {
        "base_url": "http://gpu-host:8000/v1", "model": "ByteDance-Seed/UI-TARS-1.5-7B"}}},
        LLMSettings)
    rc = s.role("grounder")
    assert (rc.base_url, rc.model) == ("http://gpu-host:8000/v1", "ByteDance-Seed/UI-TARS-1.5-7B")
    assert s.role("planner").base_url == "https://api.openai.com/v1"
    assert s.family.grounder == "auto" and LLMSettings().models.grounder == "gpt-4o"


@pytest.mark.parametrize(("family", "model", "expect"), [
    ("uitars", "UI-TARS-1.5-7B", "<point>x1 y1</point>"),
    ("uitars", "UI-TARS-7B-SFT", "start_box="),
    ("qwen", "Qwen2.5-VL-7B", "point_2d"),
    ("qwen", "MAI-UI-8B", "<grounding_think>"),
    ("holo", "Hcompany/Holo2-8B", "Your target is:"),
    ("venus", "UI-Venus-Ground-7B", "[x1,y1,x2,y2]"),
    ("react", "gpt-4o", "Answer the point"),
])
def test_each_grounding_family_gets_its_own_prompt(family: str, model: str, expect: str) -> None:
    fam = get_family(family, model)
    geom = fam.geometry(1080, 2400)
    text = grounder_prompt(fam, geom, "the Send button")
    assert expect in text and "the Send button" in text


def test_the_generic_prompt_names_the_familys_convention() -> None:
    fam = get_family("react", "gpt-4o", max_image_side=1024)
    assert "461x1024" in grounder_prompt(fam, fam.geometry(1080, 2400), "x")
    rel = get_family("qwen", "Qwen3-VL-8B")
    assert rel.geometry(1080, 2400).convention == "relative"


@pytest.mark.parametrize(("text", "nums"), [
    ("Action: click(point='<point>500 250</point>')", [500, 250]),
    ("Action: click(start_box='(500,250)')", [500, 250]),
    ('```json\n[{"point_2d": [500, 250], "label": "Send"}]\n```', [500, 250]),
    ('<grounding_think>the arrow [1, 2]</grounding_think><answer>{"coordinate": [500,250]}</answer>',
     [500, 250]),
    ('<think>hmm</think>{"x": 500, "y": 250}', [500, 250]),
    ("[400,200,600,300]", [400, 200, 600, 300]),
    ("NONE", None),
])
def test_the_reply_reader_takes_every_familys_spelling(text: str, nums: list[float] | None) -> None:
    assert read_numbers(text) == nums


def test_a_reply_without_a_point_is_unparsable() -> None:
    with pytest.raises(ParseError):
        read_numbers("I think it is the blue one")


def test_points_and_boxes_map_to_device_pixels_with_the_familys_geometry() -> None:
    qwen3 = get_family("qwen", "Qwen3-VL-8B")  # relative 0..1000
    geom = qwen3.geometry(1080, 2400)
    assert parse_grounder_reply("(500, 250)", geom) == GrounderAnswer((540, 600), None, "(500, 250)")
    box = parse_grounder_reply("[400,200,600,300]", geom)
    assert box is not None and box.box == (432, 480, 648, 720) and box.point == (540, 600)
    gpt = get_family("react", "gpt-4o", max_image_side=1200)  # pixels of the image sent
    g = gpt.geometry(1080, 2400)
    assert parse_grounder_reply("(270, 600)", g).point == (540, 1200)  # type: ignore[union-attr]
    with pytest.raises(ParseError):  # off the image
        parse_grounder_reply("(5000, 600)", g)


def test_the_frame_is_sent_at_the_familys_size() -> None:
    from models.llm.grounder import grounder_messages
    from models.llm.messages import ImageInput

    fam = get_family("react", "gpt-4o", max_image_side=1024)
    geom = fam.geometry(1080, 2400)
    msgs = grounder_messages(fam, geom, "Send", "I will send it", _png(1080, 2400))
    image = msgs[0].content[0]
    assert isinstance(image, ImageInput)
    assert Image.open(io.BytesIO(image.data)).size == (461, 1024)
    assert "I will send it" in str(msgs[0].content[1])


def test_grounding_models_get_their_trained_prompt_and_their_reading() -> None:
    """As llm.roles.grounder: SeeClick's own question, its 0..1 answer; OS-Atlas's box tokens
    (github.com/njucckevin/SeeClick readme.md; github.com/OS-Copilot/OS-Atlas README.md)."""
    from models.llm.families import get_family
    from models.llm.grounder import grounder_prompt, parse_grounder_reply

    fam = get_family("auto", "cckevinn/SeeClick")
    geom = fam.geometry(1080, 2400)
    assert grounder_prompt(fam, geom, "add an event").startswith(
        'In this UI screenshot, what is the position of the element corresponding to the command "add an event"')
    got = parse_grounder_reply("(0.17,0.06)", geom, fam)
    assert got is not None and got.point == (184, 144)
    atlas = get_family("auto", "OS-Copilot/OS-Atlas-Base-7B")
    g = atlas.geometry(1080, 2400)
    got = parse_grounder_reply("<|object_ref_start|>language switch<|object_ref_end|><|box_start|>(576,12),"
                               "(592,42)<|box_end|>", g, atlas)
    assert got is not None and got.box == (622, 29, 639, 101) and got.point == (630, 65)
    assert parse_grounder_reply("NONE", g, atlas) is None

"""The published Mobile-Eval wording (sim/eval/instructions.py)."""

import pytest

from sim.eval.instructions import APP_ROWS, INSTRUCTIONS, PAPER_HUMAN_STEPS, instruction


def test_thirty_three_instructions_eleven_rows_three_tiers() -> None:
    assert len(INSTRUCTIONS) == 33
    assert {(a, t) for a in APP_ROWS for t in (1, 2, 3)} == set(INSTRUCTIONS)
    assert set(PAPER_HUMAN_STEPS) == set(INSTRUCTIONS)


def test_placeholders_are_filled_and_unknown_ones_stay() -> None:
    text = instruction("Gmail", 2, address="kim@example.com")
    assert text == "Send an email to kim@example.com to tell my new work."
    assert "{today's date}" in instruction("Multi-App", 1)


def test_spot_check_published_wording() -> None:
    assert instruction("Alibaba.com", 2).startswith('Help me find caps in Alibaba.com. If the "Add to cart" is available')
    assert instruction("Settings", 3) == (
        "I want to see the real time internet speed at the battery level, please turn on this "
        "setting for me.")


def test_unknown_row_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="no Mobile-Eval instruction"):
        instruction("Facebook", 1)

"""The fresh-frame rule (devices/scrcpy.py ``Frames``) on frames put by a fake decoder at
the moments a phone's encoder would send them: a page fade with a pause in it, the repeat
of the old picture, a screen that never settles, an action that changes nothing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from devices.scrcpy import QUIET_S, SETTLE_CAP_S, UNCHANGED_S, Frames, ScrcpyError

H, W = 240, 108


def _screen(level: int) -> np.ndarray:
    rgb = np.full((H, W, 3), 40, np.uint8)
    rgb[40:200, 10:98] = level  # a page's content: what a change moves
    return rgb


def _feed(frames: Frames, plan: list[tuple[float, np.ndarray]],
          keys: tuple[int, ...] = ()) -> threading.Thread:
    """Put each picture ``delay`` seconds after the one before, in a thread (the decoder);
    the ones at the indexes ``keys`` are key frames."""
    def run() -> None:
        for i, (delay, rgb) in enumerate(plan):
            time.sleep(delay)
            frames.put(rgb, key=i in keys)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_pause_inside_a_page_fade_is_not_its_end() -> None:
    frames = Frames()
    frames.put(_screen(0))
    since = time.monotonic()
    # the fade's frames, a 0.2 s stall (a busy encoder) after the second, the last picture,
    # then the encoder's repeat of it, refined (a level off: not bit-identical)
    old, new = _screen(0), _screen(200)
    refined = new.copy()
    refined[50:60, 20:30] += 1
    _feed(frames, [(0.02, _screen(40)), (0.02, _screen(90)), (0.2, _screen(150)),
                   (0.03, new), (0.1, refined)])
    shot = frames.settled_after(since, 5.0, UNCHANGED_S)
    assert shot is not None and shot.repeat
    assert np.abs(shot.rgb.astype(int) - new.astype(int)).max() <= 1
    assert not np.array_equal(shot.rgb, old)


def test_the_old_pictures_repeat_after_the_action_is_not_a_change() -> None:
    frames = Frames()
    frames.put(_screen(0))
    since = time.monotonic()
    _feed(frames, [(0.05, _screen(0))])  # the repeat, due 0.1 s after the last change
    t0 = time.monotonic()
    assert frames.settled_after(since, 5.0, UNCHANGED_S) is None  # nothing changed
    assert time.monotonic() - t0 >= UNCHANGED_S - 0.01


def test_after_a_key_frame_is_asked_for_the_same_picture_is_the_screen() -> None:
    frames = Frames()
    frames.put(_screen(0))
    asked = time.monotonic()
    # a frame encoded before the ask arrives after it (a busy phone), then the key frame
    _feed(frames, [(0.03, _screen(0)), (0.1, _screen(0))], keys=(1,))
    shot = frames.settled_after(asked, 5.0, None)
    assert shot is not None and shot.key and shot.decoded_at > asked


def test_a_late_change_seen_in_the_asked_key_frame_is_waited_out() -> None:
    frames = Frames()
    frames.put(_screen(0))
    asked = time.monotonic()
    _feed(frames, [(0.03, _screen(60)), (0.03, _screen(200)), (0.1, _screen(200))], keys=(0,))
    shot = frames.settled_after(asked, 5.0, None)
    assert shot is not None and int(shot.rgb[100, 50, 0]) == 200


def test_frames_from_before_the_ask_are_not_the_screen_after_it() -> None:
    frames = Frames()
    frames.put(_screen(0))
    asked = time.monotonic()
    # the old page's last frames still in flight, then the key frame of the new one
    _feed(frames, [(0.02, _screen(0)), (0.02, _screen(0)), (0.1, _screen(200)),
                   (0.1, _screen(200))], keys=(2,))
    shot = frames.settled_after(asked, 5.0, None)
    assert shot is not None and int(shot.rgb[100, 50, 0]) == 200


def test_a_screen_that_never_settles_gives_its_newest_frame_at_the_cap() -> None:
    frames = Frames()
    frames.put(_screen(0))
    since = time.monotonic()
    spinner = [(0.05, _screen(10 + 60 * (i % 3))) for i in range(int(SETTLE_CAP_S / 0.05) + 20)]
    _feed(frames, spinner)
    shot = frames.settled_after(since, 10.0, UNCHANGED_S)
    took = time.monotonic() - since
    assert shot is not None and SETTLE_CAP_S - 0.05 <= took < SETTLE_CAP_S + 0.5


def test_without_a_repeat_a_long_quiet_is_settled() -> None:
    frames = Frames()
    frames.put(_screen(0))
    since = time.monotonic()
    _feed(frames, [(0.02, _screen(200))])  # an encoder that never repeats
    shot = frames.settled_after(since, 5.0, UNCHANGED_S)
    assert shot is not None and not shot.repeat
    assert time.monotonic() - shot.decoded_at >= QUIET_S - 0.01


def test_a_closed_stream_ends_the_wait_with_its_reason() -> None:
    frames = Frames()
    threading.Timer(0.05, frames.close, args=("video: ConnectionResetError",)).start()
    with pytest.raises(ScrcpyError, match="ConnectionResetError"):
        frames.settled_after(time.monotonic(), 5.0, UNCHANGED_S)

"""The topic scheme: builders, parsers and the names that cannot be topic levels."""

from __future__ import annotations

import pytest

from protocol.messages import Cancel, DeviceStatus, EpisodeFinished, HostStatus, Instruction
from runtime import topics
from runtime.actor import topic_matches


def test_builders_and_parser_agree() -> None:
    serial = "127.0.0.1:5555"
    cases = {
        topics.device_instructions(serial): ("device", "instructions", serial, None),
        topics.device_control(serial): ("device", "control", serial, None),
        topics.device_status(serial): ("device", "status", serial, None),
        topics.device_screen(serial): ("device", "screen", serial, None),
        topics.device_event(serial, EpisodeFinished): ("device", "events", serial, "episode_finished"),
        topics.fleet_instructions(): ("fleet", "instructions", None, None),
        topics.fleet_watching(): ("fleet", "watching", None, None),
        topics.host_status("h1"): ("host", "status", "h1", None),
        topics.host_event("h1", "error"): ("host", "events", "h1", "error"),
    }
    for topic, (scope, channel, name, kind) in cases.items():
        assert topic.startswith("mobagent/v1/")
        info = topics.parse(topic)
        assert (info.scope, info.channel, info.name, info.kind) == (scope, channel, name, kind)
    assert topics.serial_of(topics.device_event(serial, "plan")) == serial
    assert topics.serial_of(topics.host_status("h1")) is None


@pytest.mark.parametrize("bad", ["", "a/b", "a+b", "a#", "$SYS", "x\x00y", "z" * 201])
def test_bad_names_are_refused_clearly(bad: str) -> None:
    with pytest.raises(topics.TopicError):
        topics.device_instructions(bad)


@pytest.mark.parametrize(
    "topic",
    ["", "mobagent/v2/devices/a/status", "mobagent/v1", "mobagent/v1/devices/a",
     "mobagent/v1/devices//status", "mobagent/v1/devices/a/frames", "mobagent/v1/hosts/h/instructions",
     "mobagent/v1/devices/a/events/"],
)
def test_foreign_topics_do_not_parse(topic: str) -> None:
    with pytest.raises(topics.TopicError):
        topics.parse(topic)


def test_filters_match_what_the_builders_make() -> None:
    assert topic_matches(topics.device_event("d", "plan"), topics.device_events_filter("d"))
    assert topic_matches(topics.device_event("d", "plan"), topics.device_events_filter())
    assert not topic_matches(topics.device_event("e", "plan"), topics.device_events_filter("d"))
    assert topic_matches(topics.device_instructions("d"), topics.all_instructions_filter())
    assert topic_matches(topics.fleet_instructions(), topics.shared_fleet_instructions())
    assert topic_matches(topics.host_status("h"), topics.all_host_status_filter())
    assert topic_matches(topics.device_screen("d"), topics.all_screens_filter())
    assert not topic_matches(topics.device_screen("d"), topics.device_events_filter())
    assert topic_matches("mobagent/v1/a/b", "mobagent/#")
    assert not topic_matches("mobagent/v1", "mobagent/v1/+")


def test_expected_kinds_per_channel() -> None:
    assert topics.expected_kinds(topics.device_instructions("d")) == (Instruction,)
    assert Cancel in (topics.expected_kinds(topics.device_control("d")) or ())
    assert topics.expected_kinds(topics.device_status("d")) == (DeviceStatus,)
    assert topics.expected_kinds(topics.host_status("h")) == (HostStatus,)
    assert topics.expected_kinds(topics.device_event("d", "plan")) is None
    assert topics.expected_kinds("somebody/else") is None

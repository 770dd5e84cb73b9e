"""The mobagent command line: help everywhere, submit and watch against a real runtime."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskStatus

from host.client_cli import submit, watch
from host.host_runtime import HostRuntime
from protocol.messages import CODEC, EpisodeFinished, EpisodeStarted, Instruction, Reflection
from runtime import topics
from runtime.bus import Bus
from runtime.cli import PLUGIN_COMMANDS, build_parser, main
from runtime.config import RuntimeConfig, load_config
from tests.fixtures.mosquitto import MosquittoBroker, free_port
from tests.runtime.conftest import FAST

ROOT = Path(__file__).resolve().parents[2]
SERIAL = "phone-1"


def command_names() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[arg-type]


def test_help_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    names = command_names()
    assert {"serve", "submit", "watch", *PLUGIN_COMMANDS} <= set(names)
    for argv in [["--help"], *([n, "--help"] for n in names)]:
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: mobagent"), argv


def test_a_plugin_command_that_did_not_load_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    for name in PLUGIN_COMMANDS:
        parser = build_parser(load_plugins=False)
        args = parser.parse_args([name])
        assert args.func(args) == 2
        assert "not installed" in capsys.readouterr().err


def test_config_errors_exit_2_naming_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--set", "bus.keepalive_s=often", "watch", "--timeout", "1"]) == 2
    err = capsys.readouterr().err
    assert "bus.keepalive_s: expected int, got str (override bus.keepalive_s)" in err


def test_bad_device_names_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "a/b", "do it", "--timeout", "1"]) == 2
    assert "contains '/'" in capsys.readouterr().err


def test_unreachable_broker_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"mqtt://127.0.0.1:{free_port()}"
    rc = main(["--broker", url, "--set", "bus.connect_timeout_s=1", "watch", "--timeout", "1"])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"could not connect to {url}" in err and "Traceback" not in err


async def fake_fleet(cfg: RuntimeConfig, *, task_status: TaskStatus[HostRuntime]) -> None:
    """A host runtime whose 'fleet' finishes every episode at once (a test double of the fleet)."""
    runtime: HostRuntime

    async def on_instruction(serial: str | None, msg: Instruction) -> None:
        assert runtime.bus is not None and serial is not None
        ids = {"device": serial, "episode_id": f"ep-{msg.id}", "correlation_id": msg.id}
        await runtime.bus.publish(topics.device_event(serial, EpisodeStarted),
                                  EpisodeStarted(instruction_id=msg.id, text=msg.text, **ids))
        await runtime.bus.publish(topics.device_event(serial, Reflection),
                                  Reflection(verdict="complete", step=1, **ids))
        status = "failed" if "fail" in msg.text else "succeeded"
        await runtime.bus.publish(topics.device_event(serial, EpisodeFinished), EpisodeFinished(
            instruction_id=msg.id, status=status, steps=1, reason="test fleet", **ids))

    runtime = HostRuntime(cfg, on_instruction=on_instruction)
    async with anyio.create_task_group() as tg:
        await tg.start(runtime.run)
        task_status.started(runtime)


def cfg_for(broker: MosquittoBroker, **extra: object) -> RuntimeConfig:
    return load_config(None, RuntimeConfig, env={}, overrides={
        "bus.url": broker.url, "host.name": "cli-host", "bus.reconnect_min_s": 0.05, **extra})


@pytest.mark.anyio
async def test_submit_prints_the_outcome(mosquitto: MosquittoBroker) -> None:
    cfg = cfg_for(mosquitto)
    async with anyio.create_task_group() as tg:
        await tg.start(fake_fleet, cfg)
        out = io.StringIO()
        rc = await submit(cfg, SERIAL, "open settings", instruction_id="s-1", task=None,
                          timeout_s=10, as_json=False, out=out)
        assert rc == 0 and "episode succeeded after 1 steps (s-1): test fleet" in out.getvalue()
        out = io.StringIO()
        rc = await submit(cfg, SERIAL, "please fail", instruction_id="s-2", task="t1",
                          timeout_s=10, as_json=True, out=out)
        event = json.loads(out.getvalue())
        assert rc == 1 and event["event"] == "episode_finished" and event["status"] == "failed"
        assert event["instruction_id"] == "s-2" and event["device"] == SERIAL
        # Resubmitting an id is a no-op: nothing answers, so it times out.
        rc = await submit(cfg, SERIAL, "open settings", instruction_id="s-1", task=None,
                          timeout_s=1, as_json=False, out=io.StringIO())
        assert rc == 3
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_submit_shows_a_refusal(mosquitto: MosquittoBroker) -> None:
    host_cfg = cfg_for(mosquitto, **{"limits.max_instruction_chars": 10})
    async with anyio.create_task_group() as tg:
        await tg.start(fake_fleet, host_cfg)
        out = io.StringIO()
        rc = await submit(cfg_for(mosquitto), SERIAL, "a rather long instruction",
                          instruction_id="r-1", task=None, timeout_s=10, as_json=False, out=out)
        assert rc == 1
        assert "ERROR instruction refused" in out.getvalue() and "limit is 10" in out.getvalue()
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_watch_tails_events(mosquitto: MosquittoBroker) -> None:
    cfg = cfg_for(mosquitto)
    human, as_json = io.StringIO(), io.StringIO()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: watch(cfg, SERIAL, as_json=False, count=2, timeout_s=10, out=human))
        tg.start_soon(lambda: watch(cfg, None, as_json=True, count=2, timeout_s=10, out=as_json))
        await anyio.sleep(0.5)
        async with Bus(FAST, topics_address(mosquitto), codec=CODEC) as pub:
            await pub.publish(topics.device_event(SERIAL, Reflection),
                              Reflection(verdict="unchanged", reason="same screen", device=SERIAL, step=4))
            await pub.publish(topics.device_event("other", Reflection), Reflection(verdict="ok"))
            await pub.publish(topics.device_event(SERIAL, Reflection), Reflection(verdict="ok", device=SERIAL))
    lines = human.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].endswith(f"{SERIAL} #4 reflection unchanged: same screen")
    events = [json.loads(x) for x in as_json.getvalue().splitlines()]
    assert [e["topic"] for e in events] == [topics.device_event(SERIAL, "reflection"),
                                            topics.device_event("other", "reflection")]


def topics_address(broker: MosquittoBroker):  # type: ignore[no-untyped-def]
    from runtime.bus import parse_broker_url

    return parse_broker_url(broker.url)


def test_serve_and_submit_as_processes_on_the_embedded_broker(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "MOBAGENT_BROKER__PORT": str(port), "MOBAGENT_HOST__NAME": "proc-host"}
    cli = [sys.executable, "-m", "runtime.cli"]
    with (tmp_path / "serve.log").open("wb") as logf:
        # --runtime-only: the host runtime without the agent plug-in's phones and LLM
        serve = subprocess.Popen([*cli, "--set", "limits.max_instruction_chars=5", "serve",
                                  "--runtime-only"],
                                 cwd=ROOT, env=env, stdout=logf, stderr=subprocess.STDOUT)
    try:
        watch_proc = subprocess.run([*cli, "watch", "--count", "1", "--timeout", "20"], cwd=ROOT,
                                    env=env, capture_output=True, text=True, timeout=60)
        assert watch_proc.returncode == 0, watch_proc.stderr
        assert watch_proc.stdout.strip() == "status proc-host: online"
        done = subprocess.run([*cli, "submit", SERIAL, "too long for the host", "--timeout", "20"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stderr
        assert "instruction refused" in done.stdout
    finally:
        serve.terminate()
        serve.wait(timeout=20)
    assert serve.returncode == 0
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_a_bad_broker_url_is_a_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--broker", "http://example.com", "watch", "--timeout", "1"]) == 2
    assert "bus.url: bad broker url scheme 'http'" in capsys.readouterr().err

"""The bus against real brokers: round trips, reconnects, persistence, last will, auth."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

from host.host_runtime import InstructionGate
from protocol.messages import (
    CODEC,
    Ambiguous,
    Answer,
    Approve,
    Cancel,
    DeviceStatus,
    Frame,
    HostStatus,
    Instruction,
    Message,
    Plan,
    Steer,
    kind_of,
)
from runtime import topics
from runtime.actor import run_actors
from runtime.bus import Bus, BusError, parse_broker_url
from runtime.dedupe import SeenIds
from tests.fixtures.mosquitto import MosquittoFactory
from tests.runtime.conftest import FAST, open_broker
from tests.runtime.samples import sample_messages, sample_of

ROOT = Path(__file__).resolve().parents[2]
SERIAL = "emulator-5554"


def topic_for(msg: Message) -> str:
    """Where each kind of message really travels."""
    if isinstance(msg, Instruction):
        return topics.device_instructions(SERIAL)
    if isinstance(msg, Cancel | Approve | Answer | Steer):
        return topics.device_control(SERIAL)
    if isinstance(msg, DeviceStatus):
        return topics.device_status(SERIAL)
    if isinstance(msg, HostStatus):
        return topics.host_status("h1")
    return topics.device_event(SERIAL, msg)


@pytest.mark.anyio
async def test_every_message_type_round_trips(broker_kind: str,
                                              mosquitto_factory: MosquittoFactory) -> None:
    sent = sample_messages()
    async with open_broker(broker_kind, mosquitto_factory) as address:
        async with Bus(FAST, address, client_id="rt-sub", codec=CODEC) as sub, Bus(FAST, address, codec=CODEC) as pub:
            assert sub.protocol == ("5" if broker_kind == "mosquitto" else "3.1.1")
            await sub.subscribe("mobagent/v1/#")
            for msg in sent:
                await pub.publish(topic_for(msg), msg)
            got: list[tuple[str, Message]] = []
            with anyio.fail_after(10):
                async for item in sub.messages():
                    got.append(item)
                    if len(got) == len(sent):
                        break
    assert [t for t, _ in got] == [topic_for(m) for m in sent]
    assert [m for _, m in got] == sent
    assert sub.stats.rejected == 0


@pytest.mark.anyio
async def test_the_connection_has_nagle_off(broker_kind: str,
                                            mosquitto_factory: MosquittoFactory) -> None:
    # With Nagle on, an event published right after a PUBACK waits ~40 ms for a delayed ACK.
    import socket

    async with open_broker(broker_kind, mosquitto_factory) as address, \
            Bus(FAST, address, codec=CODEC) as bus:
        assert bus._client is not None
        sock = bus._client._client.socket()
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


@pytest.mark.anyio
async def test_bad_payloads_are_rejected_and_reported(broker_kind: str,
                                                      mosquitto_factory: MosquittoFactory) -> None:
    reject_topic = topics.host_event("h1", "error")
    async with open_broker(broker_kind, mosquitto_factory) as address:
        async with (
            Bus(FAST, address, max_payload_bytes=20_000, reject_topic=reject_topic, codec=CODEC) as host,
            Bus(FAST, address, codec=CODEC) as watcher,
            Bus(FAST, address, codec=CODEC) as pub,
        ):
            await host.subscribe(topics.all_instructions_filter())
            await watcher.subscribe(reject_topic)
            instr_topic = topics.device_instructions(SERIAL)
            await pub.publish_raw(instr_topic, b"\x00garbage")
            await pub.publish_raw(instr_topic, b"{" + b" " * 30_000 + b"}")
            await pub.publish(instr_topic, sample_of(Frame))  # a Frame on an instruction topic
            await pub.publish(instr_topic, Instruction(id="ok", text="fine"))
            with anyio.fail_after(10):
                _, good = await host.messages().receive()
                reasons = []
                while len(reasons) < 3:
                    _, err = await watcher.messages().receive()
                    reasons.append(err.reason)  # type: ignore[union-attr]
    assert isinstance(good, Instruction) and good.id == "ok"
    assert sorted(reasons) == ["rejected: invalid", "rejected: oversized", "rejected: unexpected kind"]
    assert host.stats.rejected == 3


@pytest.mark.anyio
async def test_qos1_instructions_survive_a_broker_restart_exactly_once(
    mosquitto_factory: MosquittoFactory,
) -> None:
    broker = mosquitto_factory()
    address = parse_broker_url(broker.url)
    delivered: list[str] = []
    seen = SeenIds()
    instr_topic = topics.device_instructions(SERIAL)

    changed = [anyio.Event()]

    async def on_instruction(serial: str | None, msg: Instruction) -> None:
        assert serial == SERIAL
        delivered.append(msg.id)
        changed[0].set()
        changed[0] = anyio.Event()

    async def host_until(stop: anyio.Event) -> None:
        async with Bus(FAST, address, client_id="restart-host", persistent=True, codec=CODEC) as bus:
            gate = InstructionGate(bus, max_chars=100, on_instruction=on_instruction, seen=seen)
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_actors, bus, [gate])
                await stop.wait()
                tg.cancel_scope.cancel()

    async def wait_for(n: int) -> None:
        with anyio.fail_after(20):
            while len(set(delivered)) < n:
                await changed[0].wait()

    def instr(i: int) -> Instruction:
        return Instruction(id=f"i{i}", text=f"task {i}", device=SERIAL)

    async with Bus(FAST, address, client_id="restart-pub", persistent=True, codec=CODEC) as pub:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(host_until, stop)
            await anyio.sleep(0.3)  # subscribed
            for i in range(0, 10):  # published just before the kill
                await pub.publish(instr_topic, instr(i))
            await anyio.to_thread.run_sync(broker.restart)
            for i in range(10, 20):  # after the restart, once both buses are back
                await pub.publish(instr_topic, instr(i))
            await wait_for(20)
            stop.set()
        # The host is away: these queue in its persistent session.
        for i in range(20, 30):
            await pub.publish(instr_topic, instr(i))
        await pub.publish(instr_topic, instr(3))  # a redelivery by a confused publisher
        await anyio.to_thread.run_sync(broker.restart)  # and the broker restarts meanwhile
        for i in range(30, 35):
            await pub.publish(instr_topic, instr(i))
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(host_until, stop)
            await wait_for(35)
            await anyio.sleep(0.3)  # give any duplicate the chance to show up
            stop.set()
    assert sorted(delivered, key=lambda s: int(s[1:])) == [f"i{i}" for i in range(35)]
    assert len(delivered) == len(set(delivered)) == 35
    assert broker.starts == 3


@pytest.mark.anyio
async def test_last_will_is_published_when_serve_is_sigkilled(
    mosquitto_factory: MosquittoFactory, tmp_path: Path,
) -> None:
    broker = mosquitto_factory()
    address = parse_broker_url(broker.url)
    status_topic = topics.host_status("lwt-host")
    env = {**os.environ, "MOBAGENT_HOST__NAME": "lwt-host", "MOBAGENT_LOG__FORMAT": "json"}
    cmd = [sys.executable, "-m", "runtime.cli", "--broker", broker.url, "serve", "--runtime-only"]
    async with Bus(FAST, address, codec=CODEC) as watcher:
        await watcher.subscribe(status_topic)
        with (tmp_path / "serve.log").open("wb") as logf:
            proc = await anyio.open_process(cmd, cwd=ROOT, env=env, stdout=logf,
                                            stderr=subprocess.STDOUT)
        try:
            with anyio.fail_after(20):
                _, online = await watcher.messages().receive()
            assert isinstance(online, HostStatus) and online.state == "online"
            proc.send_signal(signal.SIGKILL)
            with anyio.fail_after(20):
                _, offline = await watcher.messages().receive()
            assert isinstance(offline, HostStatus) and offline.state == "offline"
            assert offline.host == "lwt-host"
        finally:
            if proc.returncode is None:
                proc.kill()
            with anyio.fail_after(10):
                await proc.wait()
    # Retained: a late subscriber learns the host is offline.
    async with Bus(FAST, address, codec=CODEC) as late:
        await late.subscribe(status_topic)
        with anyio.fail_after(10):
            _, retained = await late.messages().receive()
    assert isinstance(retained, HostStatus) and retained.state == "offline"


@pytest.mark.anyio
async def test_a_clean_close_publishes_the_will_too(broker_kind: str,
                                                    mosquitto_factory: MosquittoFactory) -> None:
    status = topics.device_status(SERIAL)
    async with open_broker(broker_kind, mosquitto_factory) as address:
        async with Bus(FAST, address, codec=CODEC) as watcher:
            await watcher.subscribe(status)
            async with Bus(FAST, address, will=(status, DeviceStatus(state="offline")), codec=CODEC) as dev:
                await dev.publish(status, DeviceStatus(state="idle"), retain=True)
            with anyio.fail_after(10):
                states = [(await watcher.messages().receive())[1] for _ in range(2)]
    assert [s.state for s in states] == ["idle", "offline"]  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_username_password_and_acl(mosquitto_factory: MosquittoFactory) -> None:
    broker = mosquitto_factory(users={"agent": "s3cret-pw"},
                               acl="user agent\ntopic readwrite mobagent/#\n")
    address = parse_broker_url(broker.url)
    good = msgspec.structs.replace(FAST, username="agent", password="s3cret-pw")
    async with Bus(good, address, codec=CODEC) as bus:
        assert bus.protocol == "5"
        await bus.subscribe(topics.device_events_filter(SERIAL))
        await bus.publish(topics.device_event(SERIAL, "plan"), sample_of(Plan))
        with anyio.fail_after(10):
            _, msg = await bus.messages().receive()
        assert kind_of(type(msg)) == "plan"
    # Credentials in the URL work too.
    url_address = parse_broker_url(f"mqtt://agent:s3cret-pw@127.0.0.1:{broker.port}")
    async with Bus(FAST, url_address, codec=CODEC) as bus:
        assert bus.connected
    bad = msgspec.structs.replace(FAST, username="agent", password="wrong", connect_timeout_s=2.0)
    with pytest.raises(BusError, match="could not connect") as info:
        async with Bus(bad, address, codec=CODEC):
            pass
    assert "wrong" not in str(info.value)


@pytest.mark.anyio
async def test_no_broker_is_a_clear_error() -> None:
    from tests.fixtures.mosquitto import free_port

    cfg = msgspec.structs.replace(FAST, connect_timeout_s=1.0)
    with pytest.raises(BusError, match=r"could not connect to mqtt://127.0.0.1:\d+ within 1.0s"):
        async with Bus(cfg, parse_broker_url(f"mqtt://127.0.0.1:{free_port()}"), codec=CODEC):
            pass


@pytest.mark.parametrize(
    ("url", "error"),
    [("http://x", "scheme"), ("mqtt://", "no host"), ("mqtt://h:99999", "bad broker url"),
     ("mqtt://h/path", "no path")],
)
def test_bad_broker_urls(url: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_broker_url(url)


def test_broker_url_parsing() -> None:
    a = parse_broker_url("mqtts://u%40x:p%3Aw@broker.example:8884")
    assert (a.host, a.port, a.tls, a.username, a.password) == ("broker.example", 8884, True, "u@x", "p:w")
    assert a.url == "mqtts://broker.example:8884" and "p:w" not in repr(a)
    assert parse_broker_url("mqtt://h").port == 1883
    assert parse_broker_url("mqtts://h").port == 8883


@pytest.mark.anyio
async def test_tls_with_a_private_ca(mosquitto_factory: MosquittoFactory) -> None:
    broker = mosquitto_factory(users={"agent": "tls-pw"}, acl="user agent\ntopic readwrite #\n",
                               tls=True)
    address = parse_broker_url(broker.url)
    assert address.tls and address.port == broker.port
    cfg = msgspec.structs.replace(FAST, username="agent", password="tls-pw")
    trusted = msgspec.structs.replace(cfg, tls=msgspec.structs.replace(cfg.tls, ca_file=str(broker.ca_file)))
    sample = sample_of(Ambiguous)
    async with Bus(trusted, address, codec=CODEC) as bus:
        await bus.subscribe(topics.device_events_filter(SERIAL))
        await bus.publish(topics.device_event(SERIAL, sample), sample)
        with anyio.fail_after(10):
            _, msg = await bus.messages().receive()
        assert msg == sample
    # Without the CA the certificate is not trusted: a clear connection error.
    untrusted = msgspec.structs.replace(cfg, connect_timeout_s=2.0)
    with pytest.raises(BusError, match="could not connect to mqtts://127.0.0.1"):
        async with Bus(untrusted, address, codec=CODEC):
            pass


PRESENCE_SCRIPT = """
import sys, anyio
from runtime.bus import parse_broker_url
from runtime.config import BusConfig
from runtime.presence import DevicePresence

async def main():
    async with DevicePresence(BusConfig(), parse_broker_url(sys.argv[1]), sys.argv[2], "h1") as p:
        await p.set("busy", episode_id="ep-7")
        print("ready", flush=True)
        await anyio.sleep(60)

anyio.run(main)
"""


@pytest.mark.anyio
async def test_device_presence_goes_offline_when_its_process_dies(
    mosquitto_factory: MosquittoFactory,
) -> None:
    broker = mosquitto_factory()
    address = parse_broker_url(broker.url)
    status = topics.device_status(SERIAL)
    async with Bus(FAST, address, codec=CODEC) as watcher:
        await watcher.subscribe(status)
        proc = await anyio.open_process([sys.executable, "-c", PRESENCE_SCRIPT, broker.url, SERIAL],
                                        cwd=ROOT)
        try:
            with anyio.fail_after(20):
                seen = [(await watcher.messages().receive())[1] for _ in range(2)]
            assert [(s.state, s.episode_id) for s in seen] == [("idle", ""), ("busy", "ep-7")]  # type: ignore[union-attr]
            proc.send_signal(signal.SIGKILL)
            with anyio.fail_after(20):
                _, last = await watcher.messages().receive()
        finally:
            if proc.returncode is None:
                proc.kill()
            with anyio.fail_after(10):
                await proc.wait()
    assert isinstance(last, DeviceStatus) and last.state == "offline"
    assert (last.device, last.host) == (SERIAL, "h1")


@pytest.mark.anyio
async def test_a_clean_session_resubscribes_after_a_broker_restart(
    mosquitto_factory: MosquittoFactory,
) -> None:
    broker = mosquitto_factory()
    address = parse_broker_url(broker.url)
    topic = topics.device_event(SERIAL, "plan")
    async with Bus(FAST, address, persistent=False, codec=CODEC) as sub:
        await sub.subscribe(topic)
        # SIGKILL: nothing of the session survives; only our resubscription can bring it back.
        await anyio.to_thread.run_sync(lambda: broker.restart(signal.SIGKILL))
        async with Bus(FAST, address, persistent=False, codec=CODEC) as pub:
            plan = sample_of(Plan)
            with anyio.fail_after(15):
                while True:  # until the subscriber is back and subscribed
                    await pub.publish(topic, plan)
                    with anyio.move_on_after(0.2):
                        _, got = await sub.messages().receive()
                        break
    assert got == plan and sub.stats.connects == 2


def test_bad_tls_files_are_a_clear_error(tmp_path: Path) -> None:
    cfg = msgspec.structs.replace(FAST, tls=msgspec.structs.replace(
        FAST.tls, ca_file=str(tmp_path / "missing-ca.pem")))
    with pytest.raises(BusError, match="TLS setup for mqtts://h:8883 failed"):
        Bus(cfg, parse_broker_url("mqtts://h"), codec=CODEC)


@pytest.mark.anyio
async def test_a_writer_for_an_already_closed_socket_is_not_a_loop_error() -> None:
    """The aiomqtt race under broker restarts: paho asks for a writer on a dead socket."""
    import asyncio

    from runtime.bus import _GuardedClient

    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    client = _GuardedClient("127.0.0.1", 1)
    class DeadSocket:
        def fileno(self) -> int:
            return 999_999  # never open in this process: add_writer fails with EBADF

    client._on_socket_register_write(client._client, None, DeadSocket())
    await anyio.sleep(0.05)
    assert errors == []
    loop.set_exception_handler(None)


@pytest.mark.anyio
async def test_aiomqtt_still_has_the_queue_the_bus_drains() -> None:
    """runtime.bus.queued_messages reads aiomqtt's private ``_queue`` (measured benefit:
    see its docstring). When aiomqtt changes, this fails instead of the drain silently
    turning off."""
    import asyncio

    import aiomqtt

    from runtime.bus import queued_messages

    queue = queued_messages(aiomqtt.Client("localhost"))
    assert isinstance(queue, asyncio.Queue), (
        "aiomqtt.Client has no asyncio.Queue `_queue` any more: update queued_messages")

"""Stream services a device offers: shell (v1 and shell_v2), exec, sync and
localabstract (AOSP SERVICES.TXT)."""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from sim.adb import scrcpy_server
from sim.adb.abstract import AbstractSockets
from sim.adb.commands import DeviceShell, Result
from sim.adb.fs import VirtualFS
from sim.adb.sync import SyncService
from sim.phone_api import Phone

if TYPE_CHECKING:
    from sim.adb.server import Connection, Stream

# shell_v2 packet ids (AOSP adb/shell_protocol.h)
ID_STDIN = 0
ID_STDOUT = 1
ID_STDERR = 2
ID_EXIT = 3
ID_CLOSE_STDIN = 4
ID_WINDOW_SIZE = 5
V2_HEADER = struct.Struct("<BI")

PROMPT = "{name}:/ $ "

Service = Callable[["Stream"], Awaitable[None]]


def v2_packet(packet_id: int, data: bytes) -> bytes:
    return V2_HEADER.pack(packet_id, len(data)) + data


class V2Reader:
    """Reassembles shell_v2 packets from WRTE payloads, which may split or join them."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        packets: list[tuple[int, bytes]] = []
        while len(self._buf) >= V2_HEADER.size:
            packet_id, length = V2_HEADER.unpack_from(self._buf)
            if len(self._buf) < V2_HEADER.size + length:
                break
            packets.append((packet_id, bytes(self._buf[V2_HEADER.size : V2_HEADER.size + length])))
            del self._buf[: V2_HEADER.size + length]
        return packets


class ShellService:
    def __init__(self, phone: Phone, fs: VirtualFS, command: str, v2: bool, pty: bool,
                 sockets: AbstractSockets | None = None) -> None:
        self.shell = DeviceShell(phone, fs)
        self.phone, self.fs = phone, fs
        self.sockets = sockets if sockets is not None else AbstractSockets()
        self.command = command
        self.v2 = v2
        self.pty = pty
        self.prompt = PROMPT.format(name=phone.info.device).encode()

    async def _run(self, line: str) -> Result:
        # commands block (rendering, sleep); a closed connection abandons, not waits for, them
        return await anyio.to_thread.run_sync(self.shell.run, line, abandon_on_cancel=True)

    async def _send(self, stream: Stream, result: Result) -> None:
        if not self.v2:
            out = result.output
            await stream.write(out.replace(b"\n", b"\r\n") if self.pty else out)
            return
        # one packet per run of same-fd chunks keeps stdout/stderr order
        batch = bytearray()
        for fd, data in result.chunks:
            if self.pty:
                fd, data = ID_STDOUT, data.replace(b"\n", b"\r\n")  # a pty merges stderr
            batch += v2_packet(ID_STDOUT if fd == 1 else ID_STDERR, data)
            if len(batch) >= stream.max_payload:
                await stream.write(bytes(batch))
                batch.clear()
        if batch:
            await stream.write(bytes(batch))

    async def _exit(self, stream: Stream, status: int) -> None:
        if self.v2:
            await stream.write(v2_packet(ID_EXIT, bytes([status & 0xFF])))

    async def __call__(self, stream: Stream) -> None:
        invocation = scrcpy_server.is_app_process(self.command) if self.command else None
        if invocation is not None:
            await self._app_process(stream, invocation)
            return
        if self.command:
            result = await self._run(self.command)
            await self._send(stream, result)
            await self._exit(stream, result.status)
            return
        await self._interactive(stream)

    async def _app_process(self, stream: Stream, invocation: scrcpy_server.Invocation) -> None:
        """A long-running ``app_process`` (the scrcpy server): its log lines go out as they
        come, the stream stays open while it serves, and closing the stream ends it."""
        closed = anyio.Event()

        async def out(fd: int, text: str) -> None:
            await self._send(stream, Result([(fd, text.encode())], 0))

        async def watch() -> None:
            while await stream.read() is not None:
                pass  # stdin is not read by the server
            closed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            status = await scrcpy_server.run_app_process(invocation, self.phone, self.fs,
                                                         self.sockets, out, closed)
            tg.cancel_scope.cancel()
        if not closed.is_set():
            await self._exit(stream, status)

    async def _prompt(self, stream: Stream) -> None:
        if self.pty:  # mksh prompts only when it runs on a terminal
            await stream.write(v2_packet(ID_STDOUT, self.prompt) if self.v2 else self.prompt)

    async def _interactive(self, stream: Stream) -> None:
        """A line-at-a-time session; `exit` or closing stdin ends it."""
        reader = V2Reader()
        pending = bytearray()
        status = 0
        await self._prompt(stream)
        while True:
            data = await stream.read()
            if data is None:
                return
            stdin_closed = False
            if self.v2:
                for packet_id, body in reader.feed(data):
                    if packet_id == ID_STDIN:
                        pending += body
                    elif packet_id == ID_CLOSE_STDIN:
                        stdin_closed = True
            else:
                pending += data
            while b"\n" in pending or (b"\r" in pending and self.pty):
                cut = min(i for i in (pending.find(b"\n"), pending.find(b"\r")) if i >= 0)
                line = pending[:cut].decode("utf-8", errors="replace")
                del pending[: cut + 1]
                result = await self._run(line)
                await self._send(stream, result)
                status = result.status
                if self.shell.exited:
                    await self._exit(stream, status)
                    return
                await self._prompt(stream)
            if stdin_closed:
                if pending.strip():
                    result = await self._run(pending.decode("utf-8", errors="replace"))
                    await self._send(stream, result)
                    status = result.status
                await self._exit(stream, status)
                return


def _protocol_string(status: str, text: str) -> bytes:
    """adb's reply framing: OKAY|FAIL, then a 4-hex-digit length and the text."""
    raw = text.encode()
    return status.encode() + f"{len(raw):04x}".encode() + raw


class ReverseService:
    """``reverse:<forward-command>`` (AOSP daemon/services.cpp reverse_service, adb.cpp
    handle_forward_request): the rules live as long as the host connection that made them.
    adbd answers one OKAY (the host's adb server adds the connect OKAY), or FAIL+message."""

    def __init__(self, command: str, sockets: AbstractSockets, owner: Connection) -> None:
        self.command, self.sockets, self.owner = command, sockets, owner

    def _reply(self) -> bytes:
        cmd = self.command
        if cmd == "list-forward":
            text = self.sockets.list_reverse().encode()
            return f"{len(text):04x}".encode() + text
        if cmd == "killforward-all":
            self.sockets.remove_reverse("", owner=self.owner)
            return b"OKAY"
        if cmd.startswith("killforward:"):
            local = cmd[12:]
            if not local or ";" in local:
                return _protocol_string("FAIL", f"bad killforward: {local}")
            if not self.sockets.remove_reverse(local):
                return _protocol_string("FAIL", f"listener '{local}' not found")
            return b"OKAY"
        if cmd.startswith("forward:"):
            spec = cmd[8:]
            no_rebind = spec.startswith("norebind:")
            spec = spec[9:] if no_rebind else spec
            pieces = spec.split(";")
            if len(pieces) != 2 or not pieces[0] or not pieces[1] or pieces[1][0] == "*":
                return _protocol_string("FAIL", f"bad forward: {spec}")
            error = self.sockets.install_reverse(pieces[0], pieces[1], self.owner.open_stream,
                                                 self.owner, no_rebind)
            return b"OKAY" if error is None else _protocol_string("FAIL", error)
        return _protocol_string("FAIL", "not a reverse forwarding command")

    async def __call__(self, stream: Stream) -> None:
        await stream.write(self._reply())


def parse_shell_service(destination: str) -> tuple[dict[str, str], str] | None:
    """'shell[,opt...]:command' -> ({opt: value}, command); None if it is not a shell service."""
    if not destination.startswith("shell"):
        return None
    head, sep, command = destination.partition(":")
    if not sep:
        return None
    parts = head.split(",")
    if parts[0] != "shell":
        return None
    opts: dict[str, str] = {}
    for p in parts[1:]:
        key, _, value = p.partition("=")
        opts[key] = value
    return opts, command


def resolve(destination: str, phone: Phone, fs: VirtualFS,
            sockets: AbstractSockets | None = None,
            owner: Connection | None = None) -> Service | None:
    """The service for an OPEN destination, or None (the stream is refused with CLSE)."""
    destination = destination.rstrip("\0")
    if destination == "sync:":
        return SyncService(fs)
    if destination.startswith("reverse:") and sockets is not None and owner is not None:
        return ReverseService(destination[8:], sockets, owner)
    if destination.startswith("localabstract:"):
        # adbd connects to the listener, or refuses the stream while nothing listens
        return sockets.service(destination[14:]) if sockets is not None else None
    if destination.startswith("exec:"):
        return ShellService(phone, fs, destination[5:], v2=False, pty=False, sockets=sockets)
    shell = parse_shell_service(destination)
    if shell is None:
        return None
    opts, command = shell
    v2 = "v2" in opts
    # shell v1 gives a command no pty and an interactive session a pty; v2 says which
    pty = ("pty" in opts) if v2 else not command
    if "raw" in opts:
        pty = False
    return ShellService(phone, fs, command, v2=v2, pty=pty, sockets=sockets)

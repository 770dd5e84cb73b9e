"""The `sync:` service, protocol v1 (AOSP SYNC.TXT): STAT, LIST, SEND, RECV and QUIT.

Every request is a 4-byte id and a little-endian 32-bit length, then that many bytes.
Files live in the phone's VirtualFS. A malformed request gets a FAIL with a reason and
ends the sync session, as adbd does; it never takes the connection down.
"""

from __future__ import annotations

import stat
import struct
import time
from typing import TYPE_CHECKING

from sim.adb.fs import VirtualFS

if TYPE_CHECKING:
    from sim.adb.server import Stream

REQUEST = struct.Struct("<4sI")
STAT_REPLY = struct.Struct("<4sIII")  # id, mode, size, mtime
DENT = struct.Struct("<4sIIII")  # id, mode, size, mtime, name length
SYNC_DATA_MAX = 64 * 1024
PATH_MAX = 1024
DEFAULT_MODE = 0o644


class SyncFailure(Exception):
    """Reported to the client as FAIL + message; the session then ends."""


class StreamBytes:
    """Exact-length reads over a stream's WRTE payloads, which split requests anywhere."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._buf = bytearray()
        self._eof = False

    async def read(self, n: int) -> bytes | None:
        """n bytes, or None if the peer closed the stream before sending them."""
        while len(self._buf) < n and not self._eof:
            data = await self.stream.read()
            if data is None:
                self._eof = True
            else:
                self._buf += data
        if len(self._buf) < n:
            return None
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


def _mode(entry_is_dir: bool, perm: int) -> int:
    return (stat.S_IFDIR if entry_is_dir else stat.S_IFREG) | (perm & 0o7777)


class SyncService:
    def __init__(self, fs: VirtualFS) -> None:
        self.fs = fs

    async def __call__(self, stream: Stream) -> None:
        reader = StreamBytes(stream)
        while True:
            head = await reader.read(REQUEST.size)
            if head is None:
                return
            ident, length = REQUEST.unpack(head)
            if ident == b"QUIT":
                return
            try:
                if length > PATH_MAX:
                    raise SyncFailure("path too long")
                raw = await reader.read(length)
                if raw is None:
                    return
                path = raw.decode("utf-8", errors="surrogateescape")
                if ident == b"STAT":
                    await self._stat(stream, path)
                elif ident == b"LIST":
                    await self._list(stream, path)
                elif ident == b"SEND":
                    await self._send(stream, reader, path)
                elif ident == b"RECV":
                    await self._recv(stream, path)
                else:
                    raise SyncFailure(f"unknown command {ident!r}")
            except SyncFailure as e:
                await _fail(stream, str(e))
                return

    async def _stat(self, stream: Stream, path: str) -> None:
        entry = self.fs.get(path)
        if entry is None:  # a missing file answers all zeros, not FAIL
            await stream.write(STAT_REPLY.pack(b"STAT", 0, 0, 0))
            return
        await stream.write(STAT_REPLY.pack(b"STAT", _mode(entry.is_dir, entry.mode),
                                           len(entry.data) & 0xFFFFFFFF, entry.mtime))

    async def _list(self, stream: Stream, path: str) -> None:
        entry = self.fs.get(path)
        out = bytearray()
        if entry is not None and entry.is_dir:
            base = self.fs.norm(path)
            names = [".", "..", *self.fs.listdir(base)]
            for name in names:
                child = entry if name in (".", "..") else self.fs.get(f"{base}/{name}")
                if child is None:
                    continue  # removed meanwhile
                encoded = name.encode("utf-8", errors="surrogateescape")
                out += DENT.pack(b"DENT", _mode(child.is_dir, child.mode), len(child.data),
                                 child.mtime, len(encoded)) + encoded
        out += DENT.pack(b"DONE", 0, 0, 0, 0)  # a missing directory lists as empty
        await stream.write(bytes(out))

    async def _send(self, stream: Stream, reader: StreamBytes, spec: str) -> None:
        path, sep, mode_text = spec.rpartition(",")
        if not sep:
            path, mode_text = spec, ""
        try:
            mode = int(mode_text) if mode_text else DEFAULT_MODE
        except ValueError as e:
            raise SyncFailure(f"bad mode {mode_text!r}") from e
        if not path.startswith("/"):
            raise SyncFailure(f"couldn't create file {path!r}: path is not absolute")
        body = bytearray()
        mtime = int(time.time())
        while True:  # the data must be read to the end even when the file cannot be made
            head = await reader.read(REQUEST.size)
            if head is None:
                return
            ident, length = REQUEST.unpack(head)
            if ident == b"DONE":
                mtime = length or mtime
                break
            if ident != b"DATA":
                raise SyncFailure(f"invalid data message {ident!r}")
            if length > SYNC_DATA_MAX:
                raise SyncFailure(f"oversize data message: {length} bytes")
            chunk = await reader.read(length)
            if chunk is None:
                return
            body += chunk
        try:
            self.fs.write(path, bytes(body), mode=mode & 0o7777, mtime=mtime, parents=True)
        except IsADirectoryError as e:
            raise SyncFailure(f"couldn't create file: {path}: Is a directory") from e
        except (NotADirectoryError, FileExistsError, FileNotFoundError) as e:
            raise SyncFailure(f"secure_mkdirs failed: {path}: Not a directory") from e
        await stream.write(REQUEST.pack(b"OKAY", 0))

    async def _recv(self, stream: Stream, path: str) -> None:
        try:
            data = self.fs.read(path)
        except FileNotFoundError as e:
            raise SyncFailure("open failed: No such file or directory") from e
        except IsADirectoryError as e:
            raise SyncFailure("read failed: Is a directory") from e
        out = bytearray()
        for start in range(0, len(data), SYNC_DATA_MAX):
            chunk = data[start : start + SYNC_DATA_MAX]
            out += REQUEST.pack(b"DATA", len(chunk)) + chunk
            if len(out) >= stream.max_payload:
                await stream.write(bytes(out))
                out.clear()
        out += REQUEST.pack(b"DONE", 0)
        await stream.write(bytes(out))


async def _fail(stream: Stream, message: str) -> None:
    encoded = message.encode()
    await stream.write(REQUEST.pack(b"FAIL", len(encoded)) + encoded)

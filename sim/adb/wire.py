"""ADB transport messages: the 24-byte header and its strict parser (AOSP protocol.txt)."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

HEADER = struct.Struct("<6I")
HEADER_SIZE = HEADER.size  # 24

VERSION = 0x01000001  # peers at or above this version skip the data checksum
VERSION_MIN = 0x01000000
MAX_PAYLOAD = 256 * 1024  # what we advertise in CNXN
MAX_PAYLOAD_LEGACY = 4096  # what a peer may send before CNXN told it our limit


class ProtocolError(Exception):
    """Bytes from the peer that are not a valid ADB message; the connection must close."""


class StreamClosed(Exception):
    """The stream ended (the peer closed it, or never acknowledged our data)."""


class Command(enum.IntEnum):
    SYNC = 0x434E5953
    CNXN = 0x4E584E43
    AUTH = 0x48545541
    OPEN = 0x4E45504F
    OKAY = 0x59414B4F
    CLSE = 0x45534C43
    WRTE = 0x45545257
    STLS = 0x534C5453


_KNOWN = {int(c) for c in Command}


def checksum(data: bytes) -> int:
    """The legacy 'crc32' field: really the unsigned sum of the payload bytes."""
    return sum(data) & 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class Message:
    command: Command
    arg0: int
    arg1: int
    data: bytes = b""

    def pack(self, with_checksum: bool = False) -> bytes:
        check = checksum(self.data) if with_checksum else 0
        cmd = int(self.command)
        return (
            HEADER.pack(cmd, self.arg0, self.arg1, len(self.data), check, cmd ^ 0xFFFFFFFF)
            + self.data
        )


@dataclass(frozen=True, slots=True)
class Header:
    command: Command
    arg0: int
    arg1: int
    data_length: int
    data_check: int


def parse_header(raw: bytes, max_payload: int) -> Header:
    """Validate one 24-byte header; raise ProtocolError on anything a real adbd would reject."""
    if len(raw) != HEADER_SIZE:
        raise ProtocolError(f"truncated header: {len(raw)} of {HEADER_SIZE} bytes")
    cmd, arg0, arg1, length, check, magic = HEADER.unpack(raw)
    if magic != cmd ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic {magic:#010x} for command {cmd:#010x}")
    if cmd not in _KNOWN:
        raise ProtocolError(f"unknown command {cmd:#010x}")
    if length > max_payload:
        raise ProtocolError(f"payload of {length} bytes exceeds the limit of {max_payload}")
    return Header(Command(cmd), arg0, arg1, length, check)


def verify_payload(header: Header, data: bytes, peer_version: int) -> None:
    """Check the legacy checksum, which newer peers leave at 0 (accept either)."""
    if len(data) != header.data_length:
        raise ProtocolError(f"truncated payload: {len(data)} of {header.data_length} bytes")
    if peer_version < VERSION and header.data_check and header.data_check != checksum(data):
        raise ProtocolError("payload checksum mismatch")


def parse(raw: bytes, max_payload: int = MAX_PAYLOAD, peer_version: int = VERSION) -> Message:
    """Parse a whole message (header + payload) from bytes; used by tests and tools."""
    header = parse_header(raw[:HEADER_SIZE], max_payload)
    data = raw[HEADER_SIZE:]
    verify_payload(header, data, peer_version)
    return Message(header.command, header.arg0, header.arg1, data)


def connect_banner(product_name: str, model: str, device: str, features: list[str]) -> bytes:
    props = f"ro.product.name={product_name};ro.product.model={model};ro.product.device={device};"
    return f"device::{props}features={','.join(features)}".encode()

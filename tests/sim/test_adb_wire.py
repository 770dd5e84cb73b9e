"""The ADB message format and the device shell's parser, without an adb server."""

from __future__ import annotations

import shlex
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.adb import shell as sh
from sim.adb import wire
from sim.adb.wire import Command, Message, ProtocolError


def test_header_round_trip() -> None:
    msg = Message(Command.WRTE, 7, 9, b"hello")
    raw = msg.pack(with_checksum=True)
    assert len(raw) == wire.HEADER_SIZE + 5
    cmd, a0, a1, length, check, magic = struct.unpack("<6I", raw[:24])
    assert (cmd, a0, a1, length) == (0x45545257, 7, 9, 5)
    assert check == sum(b"hello") and magic == cmd ^ 0xFFFFFFFF
    assert wire.parse(raw, peer_version=wire.VERSION_MIN) == msg
    assert wire.parse(msg.pack(), peer_version=wire.VERSION) == msg


@pytest.mark.parametrize("command", list(Command))
def test_every_command_packs_with_its_magic(command: Command) -> None:
    parsed = wire.parse(Message(command, 1, 2).pack())
    assert parsed.command is command


def test_bad_magic() -> None:
    raw = bytearray(Message(Command.OKAY, 1, 2).pack())
    raw[20] ^= 0xFF
    with pytest.raises(ProtocolError, match="magic"):
        wire.parse(bytes(raw))


def test_truncated_header() -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        wire.parse_header(Message(Command.OKAY, 1, 2).pack()[:23], wire.MAX_PAYLOAD)


def test_truncated_payload() -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        wire.parse(Message(Command.WRTE, 1, 2, b"abcdef").pack()[:-1])


def test_unknown_command() -> None:
    cmd = 0x4B4F4F42
    raw = struct.pack("<6I", cmd, 0, 0, 0, 0, cmd ^ 0xFFFFFFFF)
    with pytest.raises(ProtocolError, match="unknown command"):
        wire.parse(raw)


def test_oversized_payload() -> None:
    raw = struct.pack("<6I", Command.WRTE, 1, 1, wire.MAX_PAYLOAD + 1, 0, Command.WRTE ^ 0xFFFFFFFF)
    with pytest.raises(ProtocolError, match="exceeds"):
        wire.parse_header(raw, wire.MAX_PAYLOAD)


def test_checksum_checked_only_for_old_peers() -> None:
    raw = bytearray(Message(Command.WRTE, 1, 2, b"abc").pack(with_checksum=True))
    raw[16] ^= 1
    assert wire.parse(bytes(raw), peer_version=wire.VERSION).data == b"abc"
    with pytest.raises(ProtocolError, match="checksum"):
        wire.parse(bytes(raw), peer_version=wire.VERSION_MIN)


def test_banner_lists_only_given_features() -> None:
    banner = wire.connect_banner("p", "m", "d", ["shell_v2", "cmd"])
    assert banner == b"device::ro.product.name=p;ro.product.model=m;ro.product.device=d;features=shell_v2,cmd"


def _words(line: str) -> list[list[str]]:
    """Each step's first command's argv (no variables involved)."""
    return [[w.expand({}) for w in step.pipeline[0].words] for step in sh.parse(line)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=5))
def test_shlex_quoted_words_round_trip(words: list[str]) -> None:
    words = [w.replace("\0", "") for w in words]
    line = " ".join(shlex.quote(w) for w in ["cmd", *words])
    assert _words(line) == [["cmd", *words]]


def test_operators_split_only_outside_quotes() -> None:
    assert _words("echo a;echo b && c || d") == [["echo", "a"], ["echo", "b"], ["c"], ["d"]]
    assert [s.connector for s in sh.parse("a; b && c || d")] == [";", ";", "&&", "||"]
    assert _words("echo 'a;b' \"c && d\" e\\;f") == [["echo", "a;b", "c && d", "e;f"]]
    assert _words("input text 'a;rm -rf /'") == [["input", "text", "a;rm -rf /"]]


def test_variables_expand_outside_single_quotes() -> None:
    step = sh.parse("echo $? \"$?\" '$?' ${HOME}x \\$?")[0]
    env = {"?": "3", "HOME": "/h"}
    assert [w.expand(env) for w in step.pipeline[0].words] == ["echo", "3", "3", "$?", "/hx", "$?"]


def test_redirections() -> None:
    cmd = sh.parse("ls /x 2>/dev/null >out.txt 2>&1")[0].pipeline[0]
    assert [w.expand({}) for w in cmd.words] == ["ls", "/x"]
    assert [(r.fd, r.mode, r.target.expand({})) for r in cmd.redirects] == [
        (2, ">", "/dev/null"), (1, ">", "out.txt"), (2, ">&", "1")]


@pytest.mark.parametrize("line", ["echo 'open", 'echo "open', "&& a", "a ||", "a |", "a | ; b", "echo $(id)", "echo `id`"])
def test_syntax_errors(line: str) -> None:
    with pytest.raises(sh.ShellSyntaxError):
        sh.parse(line)

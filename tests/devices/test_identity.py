"""One phone, one identity: the same serial and the same boot id, or two phones."""

from __future__ import annotations

from collections.abc import Callable

from devices.identity import IDENTITY_COMMAND, PhoneIdentity, read_identity, shared_serials
from sim.fleet import SimFleet


def test_the_same_serial_and_boot_is_one_phone_and_a_shared_serial_is_two() -> None:
    usb = PhoneIdentity("R5CT10ABCDE", "6fbd4e0e-3b1a-4c38-9a0e-0f7a2d5c1b11")
    wifi = PhoneIdentity("R5CT10ABCDE", "6fbd4e0e-3b1a-4c38-9a0e-0f7a2d5c1b11")
    other = PhoneIdentity("R5CT10ABCDE", "0b7c5a5e-3f59-4f8e-9b53-2f1d6f2a9c10")
    assert usb.same_phone(wifi) and not usb.shares_serial(wifi)
    assert not usb.same_phone(other) and usb.shares_serial(other)
    unread = PhoneIdentity("R5CT10ABCDE", "")  # no boot id: never called a duplicate
    assert not unread.same_phone(unread) and unread.shares_serial(usb)
    assert not PhoneIdentity().same_phone(PhoneIdentity())
    assert shared_serials(["0123456789ABCDEF", "R5CT", "0123456789ABCDEF"]) == [
        "0123456789ABCDEF"]


def test_the_identity_read_through_adb(sim_fleet: Callable[..., SimFleet]) -> None:
    fleet = sim_fleet(count=2, stand_in=True)
    got = [read_identity(fleet.device(s).shell(IDENTITY_COMMAND)) for s in fleet.serials]
    for serial, ident in zip(fleet.serials, got, strict=True):
        info = fleet.phone(serial).info
        assert ident == PhoneIdentity(info.serialno, info.boot_id, info.model)
        assert ident.model
    assert not got[0].same_phone(got[1]) and not got[0].shares_serial(got[1])
    # a shell that cannot read the file prints cat's error in its place
    missing = fleet.device(fleet.serials[0]).shell(
        IDENTITY_COMMAND.replace("boot_id", "boot_id_missing"))
    assert "No such file" in missing
    assert read_identity(missing) == PhoneIdentity(got[0].serialno, "", got[0].model)

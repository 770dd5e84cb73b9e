"""Which phone is behind an adb serial: one phone, one identity.

adb names a phone by its USB serial (``ro.serialno``) or by its network address, so one
phone on USB and on Wi-Fi is listed twice, and the agent must drive it once. But
``ro.serialno`` alone does not tell phones apart: many low-cost phones ship with the same
factory serial (``0123456789ABCDEF``, two of them side by side in ``adb devices``:
https://github.com/camalot/madb/issues/1, https://github.com/pbreault/adb-idea/issues/100;
``1234567890ABCDEF``: https://github.com/koush/vysor.io/issues/220; ``0000`` on car head
units: https://github.com/openstf/stf/issues/1273).

So two transports are one phone only when the phone says so twice: the same
``ro.serialno`` *and* the same kernel boot id, ``/proc/sys/kernel/random/boot_id`` (a random
UUID the kernel makes once per boot: the kernel's ``Documentation/admin-guide/sysctl/
kernel.rst``, "random"). Two phones never share a boot id; a phone keeps it until it
reboots, so both of its transports read the same one. A phone whose boot id cannot be read
is never called a duplicate: driving a phone twice shows at once, losing one is silent.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

import msgspec
import structlog

from devices.adb import AdbDevice, DeviceError

log = structlog.get_logger(__name__)

# One shell line for the facts, so both transports are asked the same way, at once (the
# model first: getprop never fails, and cat's error, if any, comes last).
IDENTITY_COMMAND = ("getprop ro.product.model; getprop ro.serialno; "
                    "cat /proc/sys/kernel/random/boot_id")

_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

SHARED_SERIAL_FIX = (
    "adb tells phones apart by serial, and these report the same one: connect each but one "
    "over Wi-Fi (`adb -t TRANSPORT_ID tcpip 5555`, then `adb connect PHONE_IP:5555`), which "
    "gives it its own serial, or give the phones unique serials (a vendor or custom build)")


class PhoneIdentity(msgspec.Struct, frozen=True):
    """What the phone itself says it is: ``ro.serialno`` and this boot's kernel boot id
    (which make it one phone), and its model (``ro.product.model``, shown to people)."""

    serialno: str = ""
    boot_id: str = ""  # "" when unreadable: then never the same phone as another
    model: str = ""

    def same_phone(self, other: PhoneIdentity) -> bool:
        """Both transports reach one phone: the same serial and the same boot."""
        return bool(self.serialno and self.boot_id and self.serialno == other.serialno
                    and self.boot_id == other.boot_id)

    def shares_serial(self, other: PhoneIdentity) -> bool:
        """Two phones that report one ``ro.serialno`` (a shared factory serial)."""
        return bool(self.serialno) and self.serialno == other.serialno \
            and not self.same_phone(other)


def read_identity(text: str) -> PhoneIdentity:
    """``IDENTITY_COMMAND``'s output: the model's line, the serial's, then the boot id's (a
    ``cat:`` error or nothing where the phone does not let the shell read it)."""
    lines = [line.strip() for line in text.replace("\r", "").split("\n")]
    model = lines[0] if lines else ""
    serialno = lines[1] if len(lines) > 1 else ""
    boot_id = next((line.lower() for line in lines[2:] if _BOOT_ID.match(line.lower())), "")
    return PhoneIdentity(serialno=serialno, boot_id=boot_id, model=model)


async def phone_identity(device: AdbDevice) -> PhoneIdentity:
    """The phone's identity through adb; empty where adb could not ask (never a duplicate).
    A boot id the shell may not read leaves a ``cat:`` error in its place: no boot id."""
    try:
        return read_identity((await device.shell_result(IDENTITY_COMMAND)).output)
    except DeviceError as exc:
        log.info("identity_unread", device=device.serial, error=str(exc))
        return PhoneIdentity()


def shared_serials(serials: Iterable[str]) -> list[str]:
    """The serials adb lists more than once (``adb devices`` shows two USB phones of one
    factory serial as two rows of it; only ``-t TRANSPORT_ID`` tells them apart)."""
    counts = Counter(serials)
    return sorted(s for s, n in counts.items() if n > 1)

"""The actuator actor: an operation (with its grounded point) becomes Device calls.

``Open app`` uses the package map when it knows the name (``monkey -p``); otherwise it goes
home, reads the launcher labels by OCR and taps the icon above the matching label, swiping
through launcher pages. ``Page up/down`` and ``Swipe`` are swipes in the middle of the
screen, ``Back`` and ``Exit`` key events. Sensitive operations are recognised here
(``is_sensitive``); the approval wait itself is the episode's, which owns the control inbox.

``ActuatorActor`` is one device's engine; ``ActuatorService`` is the host-level actor on
the bus: it answers each ``ActRequest`` (``devices/{serial}/requests/act_request``) with an
``ActionDone`` carrying the request id (``ok=False`` with the reason when the operation could
not be done). Its launcher fallback reads the screen like any other asker: a
``FrameRequest(purpose="read", ocr=True)`` to the capture service, whose ``Frame`` carries
the OCR lines (read under the perception engine's worker limit), so there is one capture
path and no OCR outside that limit.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio

from actors.rpc import (
    DeviceEntry,
    DeviceRegistry,
    RequestError,
    Requests,
    ServiceActor,
    new_request_id,
)
from devices.adb import KEY_BACK, KEY_ENTER, KEY_HOME, Device, DeviceError
from protocol.messages import ActionDone, ActRequest, Frame, FrameRequest, Msg
from protocol.operations import (
    Back,
    ClickIcon,
    ClickText,
    Enter,
    Exit,
    LongPress,
    LongPressPoint,
    OpenApp,
    Operation,
    PageDown,
    PageUp,
    Swipe,
    SwipePoints,
    TapPoint,
    TypeText,
    Wait,
    format_operation,
)
from runtime.actor import Publisher

# (text, box) pairs read on the current screen; the launcher fallback needs them.
ReadScreen = Callable[[], Awaitable[list[tuple[str, tuple[int, int, int, int]]]]]


class ActionFailed(RuntimeError):
    """The operation could not be performed (no such app, nothing to tap...)."""


@dataclass(frozen=True)
class ActResult:
    detail: str
    x: int | None = None
    y: int | None = None


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s.]", " ", text).split())


def is_sensitive(op: Operation, patterns: Sequence[str]) -> str | None:
    """The pattern an operation's text matches (case-insensitive), or None."""
    text = format_operation(op)
    for pat in patterns:
        try:
            if re.search(pat, text, re.IGNORECASE):
                return pat
        except re.error:
            if pat.lower() in text.lower():
                return pat
    return None


class ActuatorActor:
    name = "actuator"

    def __init__(
        self, device: Device, *, packages: Mapping[str, str] | None = None,
        wait_s: float = 2.0, launcher_pages: int = 4, timeout_s: float = 30.0,
    ) -> None:
        self.device = device
        self.packages = {_norm(k): v for k, v in (packages or {}).items()}
        self.wait_s = wait_s
        self.launcher_pages = launcher_pages
        self.timeout_s = timeout_s

    async def perform(
        self, op: Operation, *, point: tuple[int, int] | None, size: tuple[int, int],
        read_screen: ReadScreen | None = None,
    ) -> ActResult:
        """Do ``op``; ``point`` is the grounded target for click/long-press operations."""
        with anyio.fail_after(self.timeout_s):
            return await self._perform(op, point, size, read_screen)

    async def _perform(
        self, op: Operation, point: tuple[int, int] | None, size: tuple[int, int],
        read_screen: ReadScreen | None,
    ) -> ActResult:
        w, h = size
        d = self.device
        match op:
            case ClickText() | ClickIcon():
                if point is None:
                    raise ActionFailed("no grounded point to tap")
                await d.tap(*point)
                return ActResult(f"tap {point[0]},{point[1]}", *point)
            case LongPress():
                if point is None:
                    raise ActionFailed("no grounded point to press")
                await d.long_press(*point, 800)
                return ActResult(f"long press {point[0]},{point[1]}", *point)
            case TapPoint(x=x, y=y):  # the grounded (maybe snapped) point, else the model's
                px, py = point or (x, y)
                await d.tap(px, py)
                return ActResult(f"tap {px},{py}", px, py)
            case LongPressPoint(x=x, y=y):  # `input swipe x y x y 800`: a press in place
                px, py = point or (x, y)
                await d.long_press(px, py, 800)
                return ActResult(f"long press {px},{py}", px, py)
            case SwipePoints(x1=x1, y1=y1, x2=x2, y2=y2):
                await d.swipe(x1, y1, x2, y2, 300)
                return ActResult(f"swipe {x1},{y1} -> {x2},{y2}")
            case Enter():
                await d.key(KEY_ENTER)
                return ActResult("key ENTER")
            case TypeText(text=text, submit=submit):
                await d.type_text(text)
                if submit:
                    await d.key(KEY_ENTER)
                return ActResult(f"typed {len(text)} characters" + (", then ENTER" if submit else ""))
            case PageDown():  # see what is below: drag the content up
                await d.swipe(w // 2, int(h * 0.7), w // 2, int(h * 0.3), 300)
                return ActResult("swipe up (page down)")
            case PageUp():
                await d.swipe(w // 2, int(h * 0.3), w // 2, int(h * 0.7), 300)
                return ActResult("swipe down (page up)")
            case Swipe(direction=direction):
                x1, y1, x2, y2 = {
                    "left": (int(w * 0.8), h // 2, int(w * 0.2), h // 2),
                    "right": (int(w * 0.2), h // 2, int(w * 0.8), h // 2),
                    "up": (w // 2, int(h * 0.7), w // 2, int(h * 0.3)),
                    "down": (w // 2, int(h * 0.3), w // 2, int(h * 0.7)),
                }[direction]
                await d.swipe(x1, y1, x2, y2, 300)
                return ActResult(f"swipe {direction}")
            case Back():
                await d.key(KEY_BACK)
                return ActResult("key BACK")
            case Exit():
                await d.key(KEY_HOME)
                return ActResult("key HOME")
            case Wait():
                await anyio.sleep(self.wait_s)
                return ActResult(f"waited {self.wait_s:g}s")
            case OpenApp(name=name):
                return await self._open_app(name, size, read_screen)
        raise ActionFailed(f"{format_operation(op)} is not performed by the actuator")

    async def _open_app(
        self, name: str, size: tuple[int, int], read_screen: ReadScreen | None
    ) -> ActResult:
        pkg = self.packages.get(_norm(name))
        if pkg is not None:
            try:
                await self.device.start_app(pkg)
                return ActResult(f"started {pkg}")
            except DeviceError as exc:
                if read_screen is None:
                    raise ActionFailed(f"cannot start {pkg}: {exc}") from None
        if read_screen is None:
            raise ActionFailed(f"no package known for app {name!r} and no screen reader")
        return await self._open_from_launcher(name, size, read_screen)

    async def _open_from_launcher(
        self, name: str, size: tuple[int, int], read_screen: ReadScreen
    ) -> ActResult:
        w, h = size
        want = _norm(name)
        await self.device.key(KEY_HOME)
        await anyio.sleep(0.3)
        # The first page, then each further page; a HOME first resets to page one.
        for page in range(self.launcher_pages):
            t0 = time.perf_counter()
            lines = await read_screen()
            for text, (x0, y0, x1, y1) in lines:
                if _norm(text) == want:
                    lh = max(1, y1 - y0)
                    x, y = (x0 + x1) // 2, max(0, int(y0 - 2.2 * lh))
                    await self.device.tap(x, y)
                    return ActResult(
                        f"tapped the launcher icon of {text!r} on page {page + 1} "
                        f"({time.perf_counter() - t0:.2f}s to read)", x, y)
            await self.device.swipe(int(w * 0.8), h // 2, int(w * 0.2), h // 2, 300)
            await anyio.sleep(0.3)
        raise ActionFailed(
            f"no app labelled {name!r} on {self.launcher_pages} launcher pages")


class ActuatorService(ServiceActor):
    """Host-level: answers ``ActRequest`` with ``ActionDone`` from the device's engine."""

    name = "actuator"
    kinds = (ActRequest,)
    serve_timeout_s = 90.0

    def __init__(self, bus: Publisher, registry: DeviceRegistry, requests: Requests, *,
                 frame_timeout_s: float, concurrency: int | None = None) -> None:
        super().__init__(bus, registry, concurrency=concurrency)
        self.requests = requests  # the launcher fallback's frames come from the capture service
        self.frame_timeout_s = frame_timeout_s

    async def serve(self, entry: DeviceEntry, req: Msg) -> Msg:
        assert isinstance(req, ActRequest)
        op = req.operation
        point = (req.x, req.y) if req.x is not None and req.y is not None else None

        async def read_screen() -> list[tuple[str, tuple[int, int, int, int]]]:
            ask = FrameRequest(request_id=new_request_id(), purpose="read", ocr=True,
                               device=req.device, episode_id=req.episode_id, step=req.step,
                               correlation_id=req.correlation_id)
            got = await self.requests.call(ask, timeout_s=self.frame_timeout_s, expect=(Frame,))
            assert isinstance(got, Frame)
            return [(ln.text, (ln.box.left, ln.box.top, ln.box.right, ln.box.bottom))
                    for ln in got.lines]

        t0 = time.perf_counter()
        try:
            res = await entry.actuator.perform(op, point=point, size=(req.width, req.height),
                                               read_screen=read_screen)
        except (ActionFailed, DeviceError, RequestError) as exc:
            return ActionDone(operation=op, ok=False, detail=str(exc)[:2000],
                              duration_s=time.perf_counter() - t0,
                              x=point[0] if point else None, y=point[1] if point else None)
        x, y = (res.x, res.y) if res.x is not None and res.y is not None else (point or (None, None))
        return ActionDone(operation=op, ok=True, detail=res.detail[:2000],
                          duration_s=time.perf_counter() - t0, x=x, y=y)

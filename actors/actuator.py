"""Actuation: operations become ``Device`` calls, and the service that performs them.

``ActuatorEngine`` (one per phone) performs an operation at its grounded point. ``Open app``
resolves the name (``actors/app_names.py``) to an installed package (the configured map, the
labels learnt on this phone, or a package whose name says it) started with ``monkey -p``;
otherwise it reads the launcher labels by OCR, home page by page and then the app drawer,
taps the icon above the best-matching label and learns the package that opened. A name
found nowhere fails with the closest labels read. ``is_sensitive`` recognises operations
that need approval (the wait itself is the episode's).

``ActuatorService`` answers ``ActRequest`` with ``ActionDone`` and is its one producer: an
outcome the planner decided without the phone (target not found, not approved, an ``Ask``
answered) comes as an ``ActRequest`` with ``given`` and is recorded as it says, nothing
performed. The launcher fallback reads the screen through the capture service
(``FrameRequest(purpose="read", ocr=True)``), so there is one capture path.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from actors.app_names import best_label, closest, norm, package_words, packages_named
from actors.rpc import (
    Entries,
    Registered,
    RequestError,
    Requests,
    ServiceActor,
    new_request_id,
)
from devices.adb import KEY_BACK, KEY_ENTER, KEY_HOME, Device, DeviceError
from protocol.messages import ActionDone, ActRequest, Frame, FrameRequest, Msg
from protocol.operations import (
    Back,
    Clear,
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
from runtime.errors import MobagentError

# (text, box) pairs read on the current screen; the launcher fallback needs them.
Line = tuple[str, tuple[int, int, int, int]]
ReadScreen = Callable[[], Awaitable[list[Line]]]
LAUNCHER = "com.android.launcher3"


class ActionFailed(MobagentError, RuntimeError):
    """The operation could not be performed (no such app, nothing to tap...)."""


@dataclass(frozen=True)
class ActResult:
    detail: str
    x: int | None = None
    y: int | None = None


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


class ActuatorEngine:
    name = "actuator"

    def __init__(
        self, device: Device, *, packages: Mapping[str, str] | None = None,
        wait_s: float = 2.0, launcher_pages: int = 4, drawer_screens: int = 6,
        timeout_s: float = 30.0,
    ) -> None:
        self.device = device
        self.packages = {norm(k): v for k, v in (packages or {}).items()}
        self.wait_s = wait_s
        self.launcher_pages = launcher_pages
        self.drawer_screens = drawer_screens
        self.timeout_s = timeout_s
        self.learned: dict[str, str] = {}  # label -> package, from launcher taps that opened it
        self.labels: set[str] = set()  # every text read on the home screens and in the drawer
        self._installed_cache: list[str] | None = None

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
            case Clear():
                await d.clear_text()
                return ActResult("cleared the focused field")
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

    async def _installed(self) -> list[str]:
        """``pm list packages``, once per actuator (an install during a run is not seen)."""
        if self._installed_cache is None:
            try:
                self._installed_cache = await self.device.list_packages()
            except DeviceError:
                return []  # not fatal: the launcher is read instead
        return self._installed_cache

    async def _start(self, pkg: str) -> bool:
        try:
            await self.device.start_app(pkg)
            return True
        except DeviceError:  # not installed, or no launcher activity (a content provider)
            return False

    async def _open_app(
        self, name: str, size: tuple[int, int], read_screen: ReadScreen | None
    ) -> ActResult:
        want = norm(name)
        installed = await self._installed()
        known = self.learned.get(want) or self.packages.get(want)
        if known is not None and (not installed or known in installed) and await self._start(known):
            return ActResult(f"started {known}")
        for pkg in packages_named(name, installed):
            if await self._start(pkg):
                return ActResult(f"started {pkg} (its package name names {name!r})")
        if read_screen is None:
            raise ActionFailed(f"no installed package is named {name!r} and no screen reader "
                               "to read the launcher")
        return await self._open_from_launcher(name, size, read_screen)

    async def _tap_label(self, name: str, where: str, lines: Sequence[Line]) -> ActResult | None:
        self.labels.update(text for text, _ in lines)
        label = best_label(name, [text for text, _ in lines])
        if label is None:
            return None
        x0, y0, x1, y1 = next(box for text, box in lines if text == label)
        lh = max(1, y1 - y0)
        x, y = (x0 + x1) // 2, max(0, int(y0 - 2.2 * lh))  # the icon above its label
        await self.device.tap(x, y)
        await anyio.sleep(0.3)
        try:
            pkg = await self.device.current_app()
        except DeviceError:
            pkg = ""
        if pkg and pkg != LAUNCHER:  # learnt: next time the package starts directly
            self.learned[norm(name)] = self.learned[norm(label)] = pkg
        return ActResult(f"tapped the launcher icon labelled {label!r} {where}", x, y)

    async def _open_from_launcher(
        self, name: str, size: tuple[int, int], read_screen: ReadScreen
    ) -> ActResult:
        """The home screens page by page, then the app drawer (a swipe up) screen by screen."""
        w, h = size
        await self.device.key(KEY_HOME)
        await anyio.sleep(0.3)
        await self.device.key(KEY_HOME)  # HOME on the home screen: its first page
        await anyio.sleep(0.3)
        seen: set[frozenset[str]] = set()
        for page in range(self.launcher_pages):
            lines = await read_screen()
            texts = frozenset(t for t, _ in lines)
            if texts in seen:
                break  # the last page: swiping on changed nothing
            seen.add(texts)
            if (res := await self._tap_label(name, f"on home page {page + 1}", lines)) is not None:
                return res
            await self.device.swipe(int(w * 0.8), h // 2, int(w * 0.2), h // 2, 300)
            await anyio.sleep(0.3)
        # The app drawer holds every app: swipe up from the bottom of the home screen.
        await self.device.key(KEY_HOME)
        await anyio.sleep(0.3)
        await self.device.swipe(w // 2, int(h * 0.85), w // 2, int(h * 0.3), 300)
        await anyio.sleep(0.4)
        seen.clear()
        for screen in range(self.drawer_screens):
            lines = await read_screen()
            texts = frozenset(t for t, _ in lines)
            if texts in seen:
                break  # the end of the drawer
            seen.add(texts)
            if (res := await self._tap_label(name, f"in the app drawer (screen {screen + 1})",
                                             lines)) is not None:
                return res
            await self.device.swipe(w // 2, int(h * 0.75), w // 2, int(h * 0.35), 300)
            await anyio.sleep(0.3)
        await self.device.key(KEY_HOME)
        names = self.labels_of_apps() or [w for p in await self._installed()
                                          for w in package_words(p)]
        near = closest(name, names)
        raise ActionFailed(
            f"no app named {name!r} on the home screens or in the app drawer; the closest "
            f"installed apps: {', '.join(near) if near else '(none read)'}")

    def labels_of_apps(self) -> list[str]:
        """The texts read on launcher screens that look like app labels (not the clock)."""
        return [t for t in self.labels
                if 1 < len(t) <= 24 and not re.search(r"\d{1,2}[:°]|\bpage\b", t, re.I)]


class ActuatorEntry(Registered, Protocol):
    """What the actuator uses of a registered phone."""

    actuator: ActuatorEngine


class ActuatorService(ServiceActor[ActuatorEntry]):
    """Host-level: answers ``ActRequest`` with ``ActionDone`` from the device's engine."""

    name = "actuator"
    kinds = (ActRequest,)
    serve_timeout_s = 90.0

    def __init__(self, bus: Publisher, registry: Entries[ActuatorEntry], requests: Requests, *,
                 frame_timeout_s: float, concurrency: int | None = None) -> None:
        super().__init__(bus, registry, concurrency=concurrency)
        self.requests = requests  # the launcher fallback's frames come from the capture service
        self.frame_timeout_s = frame_timeout_s

    async def serve(self, entry: ActuatorEntry, req: Msg) -> Msg:
        assert isinstance(req, ActRequest)
        op = req.operation
        if req.given is not None:  # the planner decided it without the phone: record only
            done = req.given
            return ActionDone(operation=op, ok=done.ok, detail=done.detail[:2000],
                              duration_s=done.duration_s)
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
        # StreamedDevice says which way its last call went; plain adb has no other way
        path = str(getattr(entry.actuator.device, "path", "adb"))
        return ActionDone(operation=op, ok=True, detail=res.detail[:2000],
                          duration_s=time.perf_counter() - t0, x=x, y=y, path=path)

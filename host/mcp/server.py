"""The MCP tools and resources over a ``Link`` (the official SDK's ``MCPServer``).

Tools: ``list_phones``, ``run_instruction`` (one progress notification per planned step:
its thought and operation), ``follow_instruction`` (wait again for one that is still
running), ``cancel``, ``steer``, ``answer``, ``approve`` (the dashboard's controls, built
by ``host.dashboard.controls``), ``screenshot`` and ``recent_events``. The agent's ``Ask``
and a sensitive action's approval reach the person through MCP elicitation when the client
declared it; otherwise ``run_instruction`` returns ``waiting_for_answer`` /
``waiting_for_approval`` naming the tool that answers. A failure the caller can fix
(an unknown phone, a busy phone with a full queue, a broker that does not answer, a
timeout) is a tool error (``isError``) whose text says the fix; every wait has a deadline.

Resources: ``mobagent://phones/{serial}/status`` for each phone on the bus and, for each
episode this server ran to its end, ``mobagent://episodes/{episode_id}`` (the outcome) and
``mobagent://episodes/{episode_id}/report.html`` (its HTML report).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import structlog
from anyio.abc import TaskGroup
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import Resource as McpResource
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from host.dashboard.controls import ControlError, control_message
from host.host_runtime import instruction_problem
from host.mcp.link import Link, LinkError, Track
from protocol.messages import Answer, Approve, Cancel, Msg
from runtime import topics

log = structlog.get_logger(__name__)

INSTRUCTIONS = """\
Drives a fleet of Android phones: each phone runs a vision-LLM agent that looks at the
screen and acts. Call list_phones first. run_instruction gives one phone a task in plain
words (serial empty: any free phone) and returns the outcome; it reports each step as
progress. If the agent asks a question or needs an approval and your client cannot show
it, the call returns waiting_for_answer / waiting_for_approval: ask the person, call
answer / approve, then follow_instruction for the outcome."""


F = TypeVar("F", bound=BaseModel)  # an elicitation's form


class AnswerForm(BaseModel):
    answer: str = Field(description="Your answer to the phone agent's question")


class ApprovalForm(BaseModel):
    approve: bool = Field(description="Let the agent perform this action")
    note: str = Field(default="", description="Optional note for the agent")


def _phone(link: Link, serial: str) -> dict[str, Any]:
    phone = link.state.phones[serial]
    tile = phone.tile.as_json()
    return {
        "serial": serial, "model": tile.get("model", ""), "status": tile["status"],
        "detail": tile["detail"], "waiting_for": tile["waiting_for"],
        "question": tile["question"], "host": tile["host"],
        "instruction": tile["instruction"] if tile["status"] in ("busy", "waiting") else "",
        "episode_id": tile["episode_id"] if tile["status"] in ("busy", "waiting") else "",
        "step": tile["step"] if tile["status"] in ("busy", "waiting") else 0,
        "queued": len(link.state.queue_of(serial)), "last_outcome": tile["last_outcome"],
    }


def outcome(t: Track) -> dict[str, Any]:
    fin = t.finished
    assert fin is not None
    return {
        "instruction_id": t.instruction_id, "episode_id": t.episode_id, "serial": t.phone,
        "outcome": fin.status, "reason": fin.reason, "steps": fin.steps,
        "actions": t.actions, "step_log": [n.as_json() for n in t.notes],
        "tokens": t.tokens, "cost_usd": round(fin.cost_usd or t.cost_usd, 6),
        "report": t.report, "resource": f"mobagent://episodes/{t.episode_id}",
    }


def _refusal(t: Track, why: str) -> ToolError:
    serial = t.phone or "the fleet"
    if "queue is full" in why:
        fix = (f"wait for {serial} to finish (list_phones shows it), cancel its episode "
               f"(cancel serial={serial!r}), or send the instruction to another phone "
               "(leave serial empty for any free one)")
    elif "same phone as" in why:
        fix = "send it to the serial the message names"
    else:
        fix = "change the instruction as the reason says, or try another phone"
    return ToolError(f"refused: {why}. Fix: {fix}")


def _waiting(t: Track, what: str) -> dict[str, Any]:
    serial = t.phone
    base = {"instruction_id": t.instruction_id, "episode_id": t.episode_id, "serial": serial,
            "steps_so_far": [n.as_json() for n in t.notes]}
    if what == "question":
        return {**base, "outcome": "waiting_for_answer", "question": t.question,
                "next": (f"The phone's agent asks: {t.question!r}. Ask the person, then call "
                         f"answer(serial={serial!r}, text=...) and "
                         f"follow_instruction(instruction_id={t.instruction_id!r}) "
                         "for the outcome.")}
    return {**base, "outcome": "waiting_for_approval", "action": t.approval,
            "next": (f"The agent wants to perform a sensitive action: {t.approval}. Ask the "
                     f"person, then call approve(serial={serial!r}, approved=true or false) "
                     f"and follow_instruction(instruction_id={t.instruction_id!r}) "
                     "for the outcome.")}


def _can_elicit(ctx: Context) -> bool:
    try:
        caps = ctx.client_capabilities
    except ValueError:
        return False
    return caps is not None and caps.elicitation is not None


class Follower:
    """One tool call waiting on a ``Track``: progress per step, questions asked through
    elicitation (or handed back), the outcome, or the deadline."""

    def __init__(self, link: Link, t: Track, ctx: Context, timeout_s: float) -> None:
        self.link, self.t, self.ctx, self.timeout_s = link, t, ctx, timeout_s
        self.sent = 0
        self.elicit = _can_elicit(ctx)
        self.asked = t.question_no  # questions already handled (asked before we came)
        self.approval_asked = 0  # the step whose approval was asked
        self.fallback = ""  # "question" | "approval": the client could not be asked

    async def run(self) -> dict[str, Any]:
        deadline = anyio.current_time() + self.timeout_s
        result: dict[str, Any] | ToolError
        try:
            async with anyio.create_task_group() as tg:  # the elicitations run beside it
                try:
                    result = await self._wait(tg, deadline)
                except ToolError as exc:
                    result = exc
                tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # The client cancelled the call (or went away): the phone stops too.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.cancel_episode("the MCP client cancelled the request")
            raise
        if isinstance(result, ToolError):
            raise result
        return result

    async def _wait(self, tg: TaskGroup, deadline: float) -> dict[str, Any]:
        t = self.t
        while True:
            await self.link.track_frames(t)
            await self.progress()
            fin = t.finished
            why = t.refused or (fin.reason.removeprefix("rejected: ")
                                if fin is not None and fin.reason.startswith("rejected: ")
                                else "")
            if why:
                raise _refusal(t, why)
            if t.done:
                await self.link.finish_track(t)
                return outcome(t)
            if self.fallback:
                return _waiting(t, self.fallback)
            if t.question and t.question_no > self.asked:
                self.asked = t.question_no
                if not self.elicit:
                    return _waiting(t, "question")
                tg.start_soon(self.ask_question, t.question_no, t.question)
            if t.approval and t.approval_step != self.approval_asked:
                self.approval_asked = t.approval_step
                if not self.elicit:
                    return _waiting(t, "approval")
                tg.start_soon(self.ask_approval, t.approval_step, t.approval)
            changed = t.changed
            with anyio.move_on_after(deadline - anyio.current_time()):
                await changed.wait()
            if anyio.current_time() >= deadline and not t.done:
                raise ToolError(
                    f"timeout: no outcome for instruction {t.instruction_id} within "
                    f"{self.timeout_s:g}s; the episode is still running on "
                    f"{t.phone or 'the fleet'}. Fix: call follow_instruction("
                    f"instruction_id={t.instruction_id!r}) to keep waiting, or "
                    f"cancel(serial={t.phone!r}) to stop it")

    async def progress(self) -> None:
        notes = self.t.notes
        while self.sent < len(notes):
            n = notes[self.sent]
            self.sent += 1
            await self.ctx.report_progress(
                self.sent, None, f"step {n.step}: {n.operation} | {n.thought}"[:1000])

    async def cancel_episode(self, reason: str) -> None:
        t = self.t
        if t.done or not t.phone:
            return
        try:
            await self.link.publish(topics.device_control(t.phone), Cancel(
                reason=reason, device=t.phone, episode_id=t.episode_id,
                correlation_id=t.instruction_id))
        except LinkError as exc:
            log.warning("mcp_cancel_failed", error=str(exc))

    async def send(self, msg: Msg) -> None:
        """An answer on the phone's control topic; a broker gone meanwhile is logged (the
        agent then waits out its own timeout, and the outcome still comes)."""
        try:
            await self.link.publish(topics.device_control(self.t.phone), msg)
        except LinkError as exc:
            log.warning("mcp_answer_not_sent", error=str(exc))

    async def _elicit(self, still_asked: Callable[[], bool], kind: str, message: str,
                      form: type[F]) -> ElicitationResult[F] | None:
        """Ask the person at the client (MCP elicitation) while the agent still asks: None
        when it stopped asking meanwhile (answered elsewhere, timed out, finished), or when
        the client cannot elicit (then the tool's result hands ``kind`` back to it)."""
        t = self.t
        got: list[ElicitationResult[F]] = []
        async with anyio.create_task_group() as tg:
            async def obsolete() -> None:
                while not t.done and still_asked():
                    await t.changed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(obsolete)
            try:
                got.append(await self.ctx.elicit(message, form))
            except Exception as exc:  # the client refused the request: hand it back
                log.info("mcp_elicit_failed", error=str(exc))
                self.fallback = kind
                t.notify()
            tg.cancel_scope.cancel()
        return got[0] if got else None

    async def ask_question(self, number: int, question: str) -> None:
        t = self.t
        got = await self._elicit(lambda: t.question_no == number and bool(t.question),
                                 "question", f"The phone {t.phone} asks: {question}",
                                 AnswerForm)
        if got is None:
            return
        text = (got.data.answer if isinstance(got, AcceptedElicitation)
                else f"(the person {got.action}d to answer)")
        await self.send(Answer(text=text, device=t.phone, episode_id=t.episode_id,
                               correlation_id=t.instruction_id))

    async def ask_approval(self, step: int, action: str) -> None:
        t = self.t
        got = await self._elicit(
            lambda: t.approval_step == step and bool(t.approval), "approval",
            f"The phone {t.phone} wants to perform a sensitive action: {action}. Allow it?",
            ApprovalForm)
        if got is None:
            return
        ok = isinstance(got, AcceptedElicitation) and got.data.approve
        note = got.data.note if isinstance(got, AcceptedElicitation) else \
            f"the person {got.action}d"
        await self.send(Approve(approved=ok, note=note, step=step, device=t.phone,
                                episode_id=t.episode_id, correlation_id=t.instruction_id))


class FleetMcp(MCPServer[Any]):
    """``MCPServer`` whose resource list includes each phone and each finished episode."""

    link: Link

    async def list_resources(self) -> list[McpResource]:
        out = await super().list_resources()
        link = self.link
        for serial in link.phone_list():
            out.append(McpResource(
                uri=f"mobagent://phones/{serial}/status", name=f"phone {serial}",
                description=f"{serial}: status, detail and running instruction",
                mime_type="application/json"))
        for t in link.tracks.values():
            if t.done and t.episode_id:
                out.append(McpResource(
                    uri=f"mobagent://episodes/{t.episode_id}", name=f"episode {t.episode_id}",
                    description=f"{t.finished.status if t.finished else ''}: {t.text[:80]}",
                    mime_type="application/json"))
                if t.report:
                    out.append(McpResource(
                        uri=f"mobagent://episodes/{t.episode_id}/report.html",
                        name=f"report {t.episode_id}", mime_type="text/html",
                        description=f"the HTML report of episode {t.episode_id}"))
        return out


def _tool_error(exc: Exception) -> ToolError:
    return ToolError(str(exc))


async def check_phone(link: Link, serial: str) -> None:
    """A serial on the bus, or a ``ToolError`` naming the fix."""
    try:
        topics.check_name(serial)
    except topics.TopicError as exc:
        raise ToolError(f"bad serial: {exc}. Fix: use a serial from list_phones") from None
    try:
        await link.ready_bus()
    except LinkError as exc:
        raise _tool_error(exc) from None
    if not link.known(serial):
        known = ", ".join(link.phone_list()) or "none"
        raise ToolError(f"unknown phone {serial!r} (the phones on the bus: {known}). Fix: "
                        "call list_phones and use one of its serials, or leave serial "
                        "empty to use any free phone")


def build_server(link: Link) -> FleetMcp:
    app = FleetMcp("mobagent", instructions=INSTRUCTIONS, log_level="WARNING",
                   version="0.1.0")
    app.link = link
    _run_tools(app, link)
    _control_tools(app, link)
    _resources(app, link)
    return app


def _run_tools(app: FleetMcp, link: Link) -> None:
    settings = link.settings
    max_chars = link.cfg.limits.max_instruction_chars

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def list_phones() -> dict[str, Any]:
        """Every phone on the bus: serial, model, status (idle, busy, waiting, attention,
        offline) with its detail, and the instruction it is running."""
        try:
            await link.ready_bus()
        except LinkError as exc:
            raise _tool_error(exc) from None
        return {"phones": [_phone(link, s) for s in link.phone_list()],
                "broker": link.address.url}

    @app.tool()
    async def run_instruction(ctx: Context, instruction: str, serial: str | None = None,
                              timeout_s: float | None = None) -> dict[str, Any]:
        """Give a phone an instruction in plain words and wait for the outcome. serial
        empty: any free phone. Reports each step (thought and operation) as progress.
        Returns the outcome, the steps, tokens, cost and the episode report's path."""
        problem = instruction_problem(instruction, max_chars=max_chars)
        if problem is not None:
            raise ToolError(f"{problem}. Fix: say what the phone should do, in plain words")
        timeout = settings.default_timeout_s if timeout_s is None else timeout_s
        if not timeout > 0:
            raise ToolError("timeout_s must be positive. Fix: leave it out for "
                            f"{settings.default_timeout_s:g}s")
        serial = serial or None
        if serial is not None:
            await check_phone(link, serial)
            tile = link.state.phones[serial].tile
            if tile.status == "offline":
                raise ToolError(f"phone {serial} is offline. Fix: reconnect it (check "
                                "`adb devices`, `mobagent doctor`) or pick another phone")
            if tile.status == "attention":
                raise ToolError(f"phone {serial} needs attention: {tile.detail}. Fix: do "
                                "what it says (`mobagent doctor` checks it), or pick "
                                "another phone")
        else:
            try:
                await link.ready_bus()
            except LinkError as exc:
                raise _tool_error(exc) from None
            if not any(p.tile.status != "offline" for p in link.state.phones.values()):
                raise ToolError("no phone is online on the bus. Fix: start a host with "
                                "phones (`mobagent serve`, or `mobagent demo --keep` for "
                                "simulated ones)")
        try:
            t = await link.submit(instruction, serial)
        except LinkError as exc:
            raise _tool_error(exc) from None
        return await Follower(link, t, ctx, timeout).run()

    @app.tool()
    async def follow_instruction(ctx: Context, instruction_id: str,
                                 timeout_s: float | None = None) -> dict[str, Any]:
        """Wait again for an instruction run_instruction started (after answering its
        question, or after a timeout): progress per step, then the outcome."""
        t = link.tracks.get(instruction_id)
        if t is None:
            raise ToolError(f"no instruction {instruction_id!r} was sent by this server. "
                            "Fix: use the instruction_id a run_instruction result gave")
        timeout = settings.default_timeout_s if timeout_s is None else timeout_s
        return await Follower(link, t, ctx, timeout).run()


def _control_tools(app: FleetMcp, link: Link) -> None:
    settings = link.settings
    max_chars = link.cfg.limits.max_instruction_chars

    async def control(req: dict[str, Any]) -> dict[str, Any]:
        serial = req.get("serial") or ""
        await check_phone(link, serial)
        try:
            topic, msg = control_message(req, link.state, max_chars=max_chars)
        except ControlError as exc:
            raise ToolError(f"{exc}. Fix: list_phones shows what each phone is doing") from None
        try:
            await link.publish(topic, msg)
        except LinkError as exc:
            raise _tool_error(exc) from None
        return {"sent": req["type"], "serial": serial, "episode_id": msg.episode_id}

    @app.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def cancel(serial: str, reason: str = "") -> dict[str, Any]:
        """Stop the episode a phone is running."""
        return await control({"type": "cancel", "serial": serial,
                              "reason": reason or "cancelled from an MCP client"})

    @app.tool()
    async def steer(serial: str, text: str) -> dict[str, Any]:
        """Tell a phone's running agent something it should take into account."""
        return await control({"type": "steer", "serial": serial, "text": text})

    @app.tool()
    async def answer(serial: str, text: str) -> dict[str, Any]:
        """Answer the question a phone's agent asked."""
        return await control({"type": "answer", "serial": serial, "text": text})

    @app.tool()
    async def approve(serial: str, approved: bool, note: str = "") -> dict[str, Any]:
        """Allow (or refuse) the sensitive action a phone's agent is waiting on."""
        return await control({"type": "approve", "serial": serial, "approved": approved,
                              "note": note})

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def screenshot(serial: str) -> Image:
        """The phone's screen now, as an image (taken by its host)."""
        await check_phone(link, serial)
        try:
            frame = await link.screenshot(serial, settings.screenshot_timeout_s)
        except LinkError as exc:
            raise _tool_error(exc) from None
        return Image(data=frame.data, format=frame.format)

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def recent_events(serial: str, n: int = 20) -> dict[str, Any]:
        """The phone's last n events (plans, actions, verdicts, outcomes), oldest first."""
        await check_phone(link, serial)
        if n < 1:
            raise ToolError("n must be at least 1")
        events = list(link.recent.get(serial, ()))[-n:]
        return {"serial": serial, "events": events}


def _resources(app: FleetMcp, link: Link) -> None:
    @app.resource("mobagent://phones/{serial}/status", mime_type="application/json")
    def phone_status(serial: str) -> str:
        """A phone's status, detail and running instruction."""
        if not link.known(serial):
            raise ResourceNotFoundError(f"no phone {serial!r} on the bus")
        return json.dumps(_phone(link, serial))

    def finished(episode_id: str) -> Track:
        t = link.by_episode.get(episode_id)
        if t is None or not t.done:
            raise ResourceNotFoundError(f"no finished episode {episode_id!r} run by this server")
        return t

    @app.resource("mobagent://episodes/{episode_id}", mime_type="application/json")
    def episode(episode_id: str) -> str:
        """A finished episode's outcome, steps, tokens, cost and report path."""
        return json.dumps(outcome(finished(episode_id)))

    @app.resource("mobagent://episodes/{episode_id}/report.html", mime_type="text/html")
    def episode_report(episode_id: str) -> str:
        """A finished episode's HTML report."""
        t = finished(episode_id)
        if not t.report:
            raise ResourceNotFoundError(f"episode {episode_id!r} has no report")
        return Path(t.report).read_text(encoding="utf-8")

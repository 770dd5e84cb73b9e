"""A real loopback HTTP server speaking the OpenAI chat-completions API, answering from a script
(the tests' LLM server and the benchmarks' stand-in model; ``tests/fixtures/openai_server.py``
makes it a pytest fixture).

``POST /v1/chat/completions`` takes JSON and answers JSON with ``usage``, as the service does,
so the real ``openai`` client talks to it over a real socket. What it answers:

1. the next ``Behaviour`` queued with ``script(...)`` (a reply text, an error status, a delay,
   a hang, a malformed body), else
2. ``policy(request)`` when one is set (``bench/fleet.py`` uses a fixed delay this way), else
3. HTTP 400 "no scripted reply left", which the client does not retry, so a test that
   under-scripts fails fast and clearly.

Every request is recorded (headers, JSON body, decoded images) for assertions, unless
``keep_requests=False`` (a long benchmark: the policy sees each request, nothing is kept).
``with OpenAIServer() as srv: ... srv.base_url``.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image


@dataclass(frozen=True)
class Behaviour:
    """One scripted answer. ``text`` None with status 200 means a malformed/empty body."""

    text: str | None = "Observation: a screen.\nThought: done.\nAction: Stop"
    status: int = 200
    delay_s: float = 0.0
    hang: bool = False  # never answer (until the server stops)
    raw_body: bytes | None = None  # sent as is (e.g. not JSON)
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int | None = None  # None: a deterministic estimate from the request
    completion_tokens: int | None = None
    error_message: str = "scripted error"
    error_param: str | None = None  # the error's "param", as OpenAI names a refused one
    error_code: str | None = None  # the error's "code" (unsupported_parameter); None: the status
    cached_tokens: int = 0  # usage.prompt_tokens_details.cached_tokens
    # (function name, JSON arguments) answered as OpenAI ``tool_calls`` (text may be None)
    tool_calls: tuple[tuple[str, str], ...] = ()

    @classmethod
    def tool_call(cls, name: str, arguments: str, **kw: Any) -> Behaviour:
        return cls(text=None, tool_calls=((name, arguments),), **kw)

    @classmethod
    def reply(cls, text: str, **kw: Any) -> Behaviour:
        return cls(text=text, **kw)

    @classmethod
    def error(cls, status: int, message: str = "scripted error", **kw: Any) -> Behaviour:
        return cls(text=None, status=status, error_message=message, **kw)


@dataclass(frozen=True)
class SentImage:
    format: str  # as Pillow reads it: "JPEG", "PNG", ...
    size: tuple[int, int]
    mime: str  # from the data URL
    detail: str | None


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any] | None  # None when the body was not JSON
    received_at: float

    @property
    def model(self) -> str | None:
        return None if self.body is None else self.body.get("model")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [] if self.body is None else list(self.body.get("messages", []))

    def texts(self) -> list[str]:
        """Every text part of every message, in order."""
        out: list[str] = []
        for m in self.messages:
            content = m.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out += [p.get("text", "") for p in content if p.get("type") == "text"]
        return out

    def images(self) -> list[SentImage]:
        """Every image part, decoded from its data URL."""
        out: list[SentImage] = []
        for m in self.messages:
            content = m.get("content")
            if not isinstance(content, list):
                continue
            for p in content:
                if p.get("type") != "image_url":
                    continue
                url = p["image_url"]["url"]
                head, _, b64 = url.partition(",")
                mime = head.removeprefix("data:").split(";")[0]
                with Image.open(io.BytesIO(base64.b64decode(b64))) as img:
                    out.append(SentImage(str(img.format), img.size, mime, p["image_url"].get("detail")))
        return out


Policy = Callable[[RecordedRequest], Behaviour]


def estimate_prompt_tokens(body: dict[str, Any] | None) -> int:
    """A deterministic stand-in for a tokenizer: ~4 chars a token, 85 per image."""
    if body is None:
        return 0
    chars, images = 0, 0
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for p in content:
                if p.get("type") == "text":
                    chars += len(p.get("text", ""))
                elif p.get("type") == "image_url":
                    images += 1
    return chars // 4 + 85 * images + 1


def planner_reply(action: str, observation: str = "The screen.", thought: str = "Next step.") -> str:
    """A well-formed planner answer, for scripts: ``planner_reply("Click text (OK)")``."""
    return f"Observation: {observation}\nThought: {thought}\nAction: {action}"


def task_state(task: Any, phone: Any) -> tuple[bool, str]:
    """BENCHMARK-ONLY: what a stand-in model answers to the completion check, read from the
    task's own check on the simulated phone (``task.is_successful(phone)``) rather than
    assumed: (done, why not: the first milestone not reached). A phone that cannot be read
    (it was dropped) is not done."""
    try:
        if task.is_successful(phone):
            return True, "the task's own check holds on the phone"
        flags = [bool(m.check(phone)) for m in task.milestones()]
        names = [m.name for m in task.milestones()]
    except Exception as exc:  # a stand-in answers; it does not crash the server thread
        return False, f"the phone's state could not be read ({type(exc).__name__})"
    # Milestones are states passed through ("search box focused" holds no more once the
    # search ran): what is missing is the first one after the last that holds now.
    last = max((i for i, f in enumerate(flags) if f), default=-1)
    missing = [n for n, f in zip(names[last + 1:], flags[last + 1:], strict=True) if not f]
    return False, (f"not yet: {missing[0]}" if missing else "the task's own check fails")


def completion_reply(done: bool, reason: str) -> str:
    """The completion check's answer in the prompt's own format (``Complete:``/``Reason:``)."""
    return f"Complete: {'yes' if done else 'no'}\nReason: {' '.join(reason.split()) or '-'}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a fleet benchmark opens many connections at once


class OpenAIServer:
    def __init__(self, policy: Policy | None = None, host: str = "127.0.0.1", *,
                 keep_requests: bool = True) -> None:
        self.policy = policy
        self.keep_requests = keep_requests
        self.n_requests = 0
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._host = host
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.in_flight = 0
        self.peak_in_flight = 0

    # -- lifecycle
    def start(self) -> OpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                server._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                self._send(404, b'{"error": {"message": "not found"}}')

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = _Server((self._host, 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name="openai-test-server", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    # -- script
    def script(self, *behaviours: Behaviour | str) -> None:
        """Queue answers; a str is a 200 reply with that text."""
        with self._lock:
            for b in behaviours:
                self._queue.append(Behaviour.reply(b) if isinstance(b, str) else b)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- serving
    def _next(self, req: RecordedRequest) -> Behaviour | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.policy(req) if self.policy is not None else None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        req = RecordedRequest(
            h.path, {k.lower(): v for k, v in h.headers.items()}, body, time.monotonic()
        )
        with self._lock:
            self.n_requests += 1
            if self.keep_requests:
                self.requests.append(req)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            self._answer(h, req)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to answer
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, h: BaseHTTPRequestHandler, req: RecordedRequest) -> None:
        send = h._send  # type: ignore[attr-defined]
        if not req.path.rstrip("/").endswith("/chat/completions"):
            send(404, json.dumps({"error": {"message": f"no route {req.path}"}}).encode())
            return
        if req.body is None or not isinstance(req.body.get("messages"), list):
            send(400, json.dumps({"error": {"message": "body must be JSON with messages"}}).encode())
            return
        b = self._next(req)
        if b is None:
            msg = {"error": {"message": "openai test server: no scripted reply left",
                             "type": "invalid_request_error"}}
            send(400, json.dumps(msg).encode())
            return
        if b.hang:
            self._stopping.wait()
            return
        if b.delay_s > 0 and self._stopping.wait(b.delay_s):
            return
        if b.raw_body is not None:
            payload = b.raw_body
        elif b.status != 200:
            payload = json.dumps(
                {"error": {"message": b.error_message, "type": "scripted",
                           "code": b.error_code if b.error_code is not None else str(b.status),
                           "param": b.error_param}}
            ).encode()
        else:
            prompt = b.prompt_tokens if b.prompt_tokens is not None else estimate_prompt_tokens(req.body)
            completion = (
                b.completion_tokens if b.completion_tokens is not None
                else len(b.text or "") // 4 + 1
            )
            payload = json.dumps({
                "id": f"chatcmpl-{self.n_requests}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.model or "unknown",
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": b.text, **({"tool_calls": [
                        {"id": f"call_{k}", "type": "function",
                         "function": {"name": n, "arguments": a}}
                        for k, (n, a) in enumerate(b.tool_calls)
                    ]} if b.tool_calls else {})},
                    "finish_reason": "tool_calls" if b.tool_calls else "stop",
                }],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                    "prompt_tokens_details": {"cached_tokens": b.cached_tokens},
                },
            }).encode()
        h.send_response(b.status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        for k, v in b.headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)


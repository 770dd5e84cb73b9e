"""OpenTelemetry traces of the agent: a trace per episode, a span per step, and under each
step a span per request (capture, perception, action, reflection) and per LLM call.

``telemetry.otlp_endpoint`` (off by default) names an OTLP/HTTP traces endpoint (Jaeger,
an OpenTelemetry collector, Arize Phoenix, Langfuse: docs/dashboard.md). ``Tracing`` owns
its own ``TracerProvider`` (never the process-global one) with a batch processor, so a
slow collector never blocks a step; when off, its tracer is the API's no-op one and every
id is empty. The current span travels in a contextvar (the OTel API's), and ``span_ids()``
reads it, so every event the planner stamps carries the trace and span it belongs to.

LLM spans follow the GenAI semantic conventions (``gen_ai.*``) and OpenInference's
(``llm.*``, ``openinference.span.kind``), which Phoenix and Langfuse read. Attributes are
the model, token counts, cost, family and purpose: never a prompt, a reply, a key or a URL
with credentials.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any

import anyio
import msgspec
from msgspec import Meta
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from runtime.config import Section

TRACER_NAME = "mobagent"
# What each request is, as a span (the reply carries the same span's ids).
REQUEST_SPANS = {"frame_request": "capture", "ground_request": "perception",
                 "act_request": "action", "reflect_request": "reflection"}


class TelemetrySettings(Section):
    # An OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces; empty: no traces.
    otlp_endpoint: str = ""
    # Sent with every export (Langfuse: Authorization = "Basic ..."); secret-named keys such
    # as authorization are redacted from logs.
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    service_name: str = "mobagent"
    timeout_s: Annotated[float, Meta(gt=0)] = 10.0


def span_ids() -> dict[str, str]:
    """The current span's ``trace_id`` and ``span_id`` as hex (empty when none is recording)."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {"trace_id": "", "span_id": ""}
    return {"trace_id": trace.format_trace_id(ctx.trace_id),
            "span_id": trace.format_span_id(ctx.span_id)}


class Tracing:
    """The host's tracer; ``Tracing(TelemetrySettings())`` is off and costs nothing."""

    def __init__(self, settings: TelemetrySettings | None = None) -> None:
        self.settings = settings or TelemetrySettings()
        self._provider: Any = None
        self.tracer: trace.Tracer = trace.NoOpTracer()
        if self.settings.otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(resource=Resource.create(
                {"service.name": self.settings.service_name}))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
                endpoint=self.settings.otlp_endpoint, headers=dict(self.settings.headers),
                timeout=self.settings.timeout_s)))
            self._provider = provider
            self.tracer = provider.get_tracer(TRACER_NAME)

    @property
    def enabled(self) -> bool:
        return self._provider is not None

    def shutdown(self) -> None:
        """Export what is left and stop (blocking: call it off the event loop)."""
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None

    @contextmanager
    def span(self, name: str, attributes: dict[str, Any] | None = None,
             kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
        """A child of the current span (a new trace when there is none)."""
        with self.tracer.start_as_current_span(name, kind=kind, attributes=attributes,
                                               record_exception=True,
                                               set_status_on_exception=True) as span:
            yield span

    @contextmanager
    def episode(self, device: str, episode_id: str, instruction_id: str,
                task: str | None) -> Iterator[Span]:
        """The episode's root span: a trace of its own, whatever span is current."""
        attrs = {"mobagent.device": device, "mobagent.episode_id": episode_id,
                 "mobagent.instruction_id": instruction_id}
        if task:
            attrs["mobagent.task"] = task
        with self.tracer.start_as_current_span(
                "episode", context=trace.set_span_in_context(trace.INVALID_SPAN),
                attributes=attrs, record_exception=True, set_status_on_exception=True) as span:
            yield span

    @contextmanager
    def llm_call(self, *, model: str, purpose: str, family: str, prompt_tokens: int,
                 completion_tokens: int, cached_tokens: int, cost_usd: float,
                 latency_s: float, attempts: int = 1) -> Iterator[Span]:
        """A finished LLM call: a span that ended now and lasted ``latency_s``, current
        while the block publishes the call's usage event."""
        end = time.time_ns()
        span = self.tracer.start_span(
            f"chat {model}", kind=SpanKind.CLIENT, start_time=end - int(latency_s * 1e9),
            attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                "gen_ai.response.model": model, "gen_ai.usage.input_tokens": prompt_tokens,
                "gen_ai.usage.output_tokens": completion_tokens,
                "openinference.span.kind": "LLM", "llm.model_name": model,
                "llm.token_count.prompt": prompt_tokens,
                "llm.token_count.completion": completion_tokens,
                "llm.token_count.total": prompt_tokens + completion_tokens,
                "mobagent.llm.purpose": purpose, "mobagent.llm.family": family,
                "mobagent.llm.cost_usd": cost_usd, "mobagent.llm.cached_tokens": cached_tokens,
                "mobagent.llm.attempts": attempts,
            })
        with trace.use_span(span, end_on_exit=False):
            yield span
        span.end(end_time=end)

    @contextmanager
    def request(self, kind: str, attributes: dict[str, Any]) -> Iterator[Span]:
        """A request to a host service (capture, perception, action, reflection); only
        inside an episode's trace (the frames streamed between episodes make none)."""
        if not trace.get_current_span().is_recording():
            yield trace.INVALID_SPAN
            return
        with self.span(REQUEST_SPANS.get(kind, kind), attributes) as span:
            yield span


def set_outcome(span: Span, status: str, reason: str, steps: int) -> None:
    span.set_attribute("mobagent.status", status)
    span.set_attribute("mobagent.steps", steps)
    if status == "failed":
        span.set_status(Status(StatusCode.ERROR, reason[:200]))


@asynccontextmanager
async def traces_flushed(tracing: Tracing) -> AsyncIterator[Tracing]:
    """``tracing`` for the block; then what is left exported (off the loop, bounded)."""
    try:
        yield tracing
    finally:
        if tracing.enabled:
            with anyio.CancelScope(shield=True), anyio.move_on_after(
                    tracing.settings.timeout_s + 5):
                await anyio.to_thread.run_sync(tracing.shutdown, abandon_on_cancel=True)

"""models/llm/client.py with the real openai client against the real loopback server."""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
import pytest
import structlog

from models.llm import (
    ChatMessage,
    CostCap,
    ImageInput,
    LLMBadResponse,
    LLMClient,
    LLMConfigError,
    LLMCostCapReached,
    LLMInputError,
    LLMRequestError,
    LLMSettings,
    LLMTimeout,
    LLMUnavailable,
    ModelPrice,
    RateLimiter,
    Role,
    estimate_tokens,
    spending_cap,
)
from tests.fixtures.openai_server import Behaviour, OpenAIServer
from tests.llm.conftest import SECRET, png_screen

pytestmark = pytest.mark.anyio
Settings = Callable[..., LLMSettings]


def user(text: str, *images: bytes) -> list[ChatMessage]:
    return [ChatMessage("user", (text, *(ImageInput(i) for i in images)))]


async def test_reply_text_tokens_and_model_per_role(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script("first", "second", "third")
    async with LLMClient(settings_for()) as llm:
        replies = [await llm.chat(r, user(f"hi {r}")) for r in ("planner", "chooser", "reflector")]
    assert [r.text for r in replies] == ["first", "second", "third"]
    assert [q.model for q in openai_server.requests] == ["plan-m", "choose-m", "reflect-m"]
    assert [r.model for r in replies] == ["plan-m", "choose-m", "reflect-m"]
    assert all(r.attempts == 1 and r.prompt_tokens > 0 and r.completion_tokens > 0 for r in replies)
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    # A text-only message goes as a plain string: the form every server accepts.
    assert openai_server.requests[0].messages == [{"role": "user", "content": "hi planner"}]
    assert "detail" not in str(openai_server.requests[0].body)
    body = openai_server.requests[0].body or {}
    assert (body["max_tokens"], body["temperature"]) == (1024, 0.0)


async def test_optional_parameters_are_omitted(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script("ok")
    async with LLMClient(settings_for(max_tokens=None, temperature=None)) as llm:
        await llm.chat("planner", user("x"))
    assert set(openai_server.requests[0].body or {}) == {"model", "messages"}


async def test_images_are_sent_as_downscaled_jpeg(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script("ok", "ok")
    png = png_screen(1080, 2400)
    async with LLMClient(settings_for(max_image_side=400)) as llm:
        await llm.chat("planner", user("look", png))
    async with LLMClient(settings_for(max_image_side=400, detail="low")) as llm:
        await llm.chat("planner", user("look", png))
    plain, detailed = (r.images() for r in openai_server.requests)
    assert len(plain) == 1
    img = plain[0]
    assert (img.format, img.mime) == ("JPEG", "image/jpeg")
    assert max(img.size) == 400 and img.size[1] == 400
    assert abs(img.size[0] / img.size[1] - 1080 / 2400) < 0.01  # aspect ratio kept
    assert img.detail is None  # omitted unless configured (vLLM/Ollama)
    assert detailed[0].detail == "low"
    # Mixed content: text parts and image parts in order.
    content = openai_server.requests[0].messages[0]["content"]
    assert [p["type"] for p in content] == ["text", "image_url"]


async def test_small_jpeg_passes_through_and_bad_image_is_a_clear_error(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script("ok")
    async with LLMClient(settings_for(max_image_side=4000)) as llm:
        await llm.chat("planner", user("x", png_screen(300, 600)))
        assert openai_server.requests[0].images()[0].size == (300, 600)
        with pytest.raises(LLMInputError, match="does not decode"):
            await llm.chat("planner", user("x", b"\x89PNG definitely not an image"))
        with pytest.raises(LLMInputError):
            await llm.chat("planner", [])
    assert len(openai_server.requests) == 1  # nothing sent for the bad ones


async def test_429_and_500_then_success(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(Behaviour.error(429), Behaviour.error(500), Behaviour.error(502), "finally")
    async with LLMClient(settings_for()) as llm:
        reply = await llm.chat("planner", user("go"))
    assert reply.text == "finally"
    assert reply.attempts == 4
    assert len(openai_server.requests) == 4


async def test_retry_after_is_honoured(openai_server: OpenAIServer, settings_for: Settings) -> None:
    openai_server.script(Behaviour.error(429, headers={"Retry-After": "0.4"}), "ok")
    async with LLMClient(settings_for(backoff_max_s=2.0)) as llm:
        await llm.chat("planner", user("go"))
    first, second = openai_server.requests
    assert second.received_at - first.received_at >= 0.39


async def test_retries_are_capped_then_typed_error(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(*[Behaviour.error(503, "overloaded")] * 5)
    async with LLMClient(settings_for(max_retries=2)) as llm:
        with pytest.raises(LLMUnavailable, match="3 attempts.*503.*overloaded") as err:
            await llm.chat("planner", user("go"))
    assert err.value.attempts == 3 and err.value.last_status == 503
    assert len(openai_server.requests) == 3 and openai_server.pending == 2


async def test_client_errors_are_not_retried(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(Behaviour.error(400, "bad image"), Behaviour.error(401, "bad key"))
    async with LLMClient(settings_for()) as llm:
        with pytest.raises(LLMRequestError, match="HTTP 400: bad image") as e400:
            await llm.chat("planner", user("go"))
        with pytest.raises(LLMRequestError, match="OPENAI_API_KEY") as e401:
            await llm.chat("planner", user("go"))
    assert (e400.value.status, e401.value.status) == (400, 401)
    assert len(openai_server.requests) == 2


async def test_connection_errors_are_retried_then_unavailable(settings_for: Settings) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = settings_for(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
    async with LLMClient(settings) as llm:
        with pytest.raises(LLMUnavailable, match="connection") as err:
            await llm.chat("planner", user("go"))
    assert err.value.attempts == 3 and err.value.last_status is None


async def test_a_hang_past_the_timeout_is_a_clear_error(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(Behaviour(hang=True))
    t0 = time.monotonic()
    async with LLMClient(settings_for(timeout_s=0.5, retry_on_timeout=False)) as llm:
        with pytest.raises(LLMTimeout, match=r"no answer within 0.5 s"):
            await llm.chat("planner", user("go"))
    assert time.monotonic() - t0 < 4.0  # it did not wait for the (never-coming) answer
    assert len(openai_server.requests) == 1  # retry_on_timeout=False: not retried


async def test_timeouts_and_500s_are_retried_by_default(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(Behaviour(hang=True), Behaviour.error(500), Behaviour(hang=True),
                         "after the hang")
    async with LLMClient(settings_for(timeout_s=0.5, max_retries=None)) as llm:
        reply = await llm.chat("planner", user("go"))
    assert reply.text == "after the hang" and reply.attempts == 4


async def test_malformed_responses_are_bad_response_errors(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(
        Behaviour(text=None),  # content null
        Behaviour(raw_body=b'{"id": "x", "object": "chat.completion", "choices": []}'),
        Behaviour(raw_body=b"this is not json at all"),
    )
    async with LLMClient(settings_for()) as llm:
        with pytest.raises(LLMBadResponse, match="no text content"):
            await llm.chat("planner", user("go"))
        with pytest.raises(LLMBadResponse, match="no choices"):
            await llm.chat("planner", user("go"))
        with pytest.raises(LLMBadResponse):
            await llm.chat("planner", user("go"))


async def test_token_cost_and_latency_accounting(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(
        Behaviour.reply("priced", prompt_tokens=1200, completion_tokens=300, delay_s=0.2),
        Behaviour.reply("unpriced", prompt_tokens=10, completion_tokens=5),
    )
    prices = {"plan-m": ModelPrice(prompt_per_mtok=2.5, completion_per_mtok=10.0)}
    async with LLMClient(settings_for(prices=prices)) as llm:
        priced = await llm.chat("planner", user("go"))
        unpriced = await llm.chat("chooser", user("go"))
    assert (priced.prompt_tokens, priced.completion_tokens) == (1200, 300)
    assert priced.cost_usd == pytest.approx(1200 * 2.5 / 1e6 + 300 * 10.0 / 1e6)
    assert priced.latency_s >= 0.2 and priced.queued_s < priced.latency_s
    assert unpriced.cost_usd is None  # choose-m has no price: unknown, not free
    # The reply is a Struct the caller can publish as is.
    assert msgspec.json.decode(msgspec.json.encode(priced))["cost_usd"] == priced.cost_usd


async def test_a_call_past_the_cost_cap_is_not_sent(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    priced = dict(prompt_tokens=500, completion_tokens=500)  # $0.01 a call at $10/Mtok
    openai_server.script(*(Behaviour.reply(f"r{i}", **priced) for i in range(4)))
    prices = {"plan-m": ModelPrice(prompt_per_mtok=10.0, completion_per_mtok=10.0)}
    # "go" is ~5 prompt tokens (4 characters a token + 4 a message) + 1000 output at worst.
    worst = (5 + 1000) * 10.0 / 1e6
    async with LLMClient(settings_for(prices=prices, max_tokens=1000)) as llm:
        with spending_cap(CostCap(0.025)) as cap:
            assert cap is not None
            first = await llm.chat("planner", user("go"))
            second = await llm.chat("planner", user("go"))
            assert cap.spent_usd == pytest.approx(0.02)
            await llm.chat("chooser", user("go"))  # choose-m has no price: nothing to count
            with pytest.raises(LLMCostCapReached) as err:
                await llm.chat("planner", user("go"))  # 0.02 + worst > 0.025
            assert len(openai_server.requests) == 3  # the refused call was never sent
            assert cap.spent_usd == pytest.approx(0.02)
            assert [r.text for r in cap.answered] == ["r0", "r1", "r2"]
            cap.account((first, second))
            assert [r.text for r in cap.answered] == ["r2"]
        # Outside the block the cap is not in force: the same call goes out.
        assert (await llm.chat("planner", user("go"))).text == "r3"
    msg = str(err.value)
    assert msg.startswith("cost cap of $0.025 would be passed: the next planner call (plan-m)")
    assert f"up to ${worst:.4f} (~5 prompt + 1000 output tokens)" in msg
    assert "cost $0.0200 so far" in msg


async def test_the_rate_limiter_and_the_cost_cap_count_a_call_alike(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    """One token estimate for both budgets: the tokens the rate limiter admits for a call
    with images are the prompt and output tokens the cost cap prices for the same call."""
    admitted: list[int] = []

    class Counting(RateLimiter):
        def slot(self, max_wait_s: float | None = None, tokens: int = 0) -> Any:
            admitted.append(tokens)
            return super().slot(max_wait_s, tokens)

    s = settings_for(prices={"plan-m": ModelPrice(prompt_per_mtok=10.0, completion_per_mtok=10.0)},
                     max_tokens=100, tokens_per_minute=1_000_000)
    msgs = [ChatMessage.text("system", "You plan."),
            ChatMessage("user", ("Which one?", ImageInput(png_screen()), "or",
                                 ImageInput(png_screen(300, 200, seed=1))))]
    openai_server.script("ok")
    async with LLMClient(s, Counting.from_settings(s)) as llm:
        await llm.chat("planner", msgs)
        with spending_cap(CostCap(1e-9)), pytest.raises(LLMCostCapReached) as err:
            await llm.chat("planner", msgs)
    counted = re.search(r"~(\d+) prompt \+ (\d+) output tokens", str(err.value))
    assert counted is not None
    prompt, output = int(counted[1]), int(counted[2])
    assert admitted == [prompt + output]  # the refused call never took a slot
    # Images by their size as sent (512 px here: one tile each), not a flat count.
    assert prompt == estimate_tokens(msgs, max_image_side=512)
    assert prompt < 2 * 765


async def test_rate_limiter_bounds_concurrency_across_clients(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.policy = lambda req: Behaviour.reply("ok", delay_s=0.15)
    limiter = RateLimiter(max_concurrent=2, requests_per_minute=1000)
    settings = settings_for()
    # Two "devices", each with its own client, one host-wide limiter.
    async with LLMClient(settings, limiter) as a, LLMClient(settings, limiter) as b:
        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon((a if i % 2 else b).chat, "planner", user(f"call {i}"))
    assert len(openai_server.requests) == 8
    assert openai_server.peak_in_flight == 2
    assert limiter.peak_in_flight == 2 and limiter.in_flight == 0


async def test_rate_limiter_bounds_requests_per_window() -> None:
    limiter = RateLimiter(max_concurrent=10, requests_per_minute=3, window_s=0.4)
    starts: list[float] = []

    async def one() -> None:
        async with limiter.slot():
            starts.append(time.monotonic())

    async with anyio.create_task_group() as tg:
        for _ in range(7):
            tg.start_soon(one)
    starts.sort()
    # Any 4 consecutive starts span at least one window.
    assert all(starts[i + 3] - starts[i] >= 0.39 for i in range(len(starts) - 3))


async def test_waiting_for_a_slot_has_a_timeout() -> None:
    limiter = RateLimiter(max_concurrent=1, requests_per_minute=100)
    async with limiter.slot():
        with pytest.raises(LLMTimeout, match="rate-limit slot"):
            async with limiter.slot(max_wait_s=0.1):
                pass
    assert limiter.in_flight == 0
    async with limiter.slot(max_wait_s=0.1):  # the slot was not leaked
        pass


async def test_api_key_never_appears_in_logs_or_errors(
    openai_server: OpenAIServer,
    settings_for: Settings,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)  # openai, httpx2, httpcore2 and ours, all at DEBUG
    settings = settings_for(max_retries=1)
    # A server that echoes the key back in its error message.
    openai_server.script(
        Behaviour.error(500, f"internal: key {SECRET} rejected"),
        Behaviour.error(401, f"Incorrect API key provided: {SECRET}"),
        "fine",
    )
    errors: list[str] = []
    with structlog.testing.capture_logs() as events:
        async with LLMClient(settings) as llm:
            with pytest.raises(LLMRequestError) as err:
                await llm.chat("planner", user("go", png_screen(200, 300)))
            errors.append(str(err.value))
            await llm.chat("reflector", user("go"))
            errors += [repr(llm), repr(settings), str(settings)]
    out = capsys.readouterr()
    haystacks = [caplog.text, out.out, out.err, repr(events), *errors]
    assert all(SECRET not in h for h in haystacks)
    assert "<redacted>" in errors[0] and "<redacted>" in repr(settings)
    assert any(e.get("event") == "llm_retry" for e in events)  # logs were produced at all
    assert openai_server.requests[0].headers["authorization"].endswith(SECRET)  # but it was sent


async def test_key_from_env_and_missing_key_for_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert LLMSettings().resolve_api_key() == "sk-from-env"
    assert LLMSettings(api_key="sk-config").resolve_api_key() == "sk-config"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        LLMClient(LLMSettings())
    # Local servers (vLLM, Ollama) need no key.
    assert LLMSettings(base_url="http://127.0.0.1:8000/v1").resolve_api_key()


def test_settings_decode_from_config_and_reject_nonsense() -> None:
    raw = {
        "base_url": "http://gpu-box:8000/v1",
        "models": {"planner": "Qwen/Qwen2.5-VL-7B-Instruct"},
        "detail": "high",
        "prices": {"Qwen/Qwen2.5-VL-7B-Instruct": {"prompt_per_mtok": 0, "completion_per_mtok": 0}},
    }
    s = msgspec.convert(raw, LLMSettings)
    role: Role = "planner"
    assert s.model_for(role) == "Qwen/Qwen2.5-VL-7B-Instruct" and s.model_for("chooser") == "gpt-4o"
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"detail": "ultra"}, LLMSettings)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"base_ur": "typo"}, LLMSettings)
    with pytest.raises(ValueError, match="max_concurrent"):
        LLMSettings(max_concurrent=0)
    with pytest.raises(ValueError, match="base_url"):
        LLMSettings(base_url="ftp://x")


async def test_server_outside_pytest_with_a_policy(settings_for: Settings) -> None:
    # bench/fleet.py's use: a fixed delay for every request, no script.
    with OpenAIServer(policy=lambda req: Behaviour.reply(f"echo {req.model}", delay_s=0.05)) as srv:
        async with LLMClient(settings_for(base_url=srv.base_url)) as llm:
            reply = await llm.chat("reflector", user("x"))
        assert reply.text == "echo reflect-m" and reply.latency_s >= 0.05
        assert len(srv.requests) == 1


def test_settings_bounds_name_the_key() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"max_concurrent"):
        msgspec.convert({"max_concurrent": 0}, LLMSettings)
    with pytest.raises(msgspec.ValidationError, match=r"prompt_per_mtok"):
        msgspec.convert({"prices": {"m": {"prompt_per_mtok": -1, "completion_per_mtok": 0}}},
                        LLMSettings)

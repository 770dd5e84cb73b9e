"""Per-role settings, the retry budget, server wait hints, refused parameters and the token
limiter: models/llm/client.py with the real openai client against real loopback servers."""

from __future__ import annotations

import time
from collections.abc import Callable
from email.utils import formatdate

import anyio
import msgspec
import pytest

from models.llm import (
    ChatMessage,
    LLMClient,
    LLMRequestError,
    LLMSettings,
    LLMUnavailable,
    ModelPrice,
    RateLimiter,
    RoleModels,
    Roles,
    RoleSettings,
    is_reasoning_model,
    parse_duration_s,
    parse_retry_after_s,
)
from tests.fixtures.openai_server import Behaviour, OpenAIServer, RecordedRequest
from tests.llm.conftest import SECRET

pytestmark = pytest.mark.anyio
Settings = Callable[..., LLMSettings]


def user(text: str) -> list[ChatMessage]:
    return [ChatMessage.text("user", text)]


def test_wait_hints_parse() -> None:
    assert parse_duration_s("1s") == 1.0
    assert parse_duration_s("6m0s") == 360.0
    assert parse_duration_s("20ms") == pytest.approx(0.02)
    assert parse_duration_s("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration_s("0.5") == 0.5
    assert parse_duration_s("soon") is None and parse_duration_s("1s junk") is None
    now = time.time()
    date = formatdate(now + 30, usegmt=True)
    assert 28 <= (parse_retry_after_s(date, now=now) or 0) <= 30
    assert parse_retry_after_s(formatdate(now - 30, usegmt=True)) == 0.0  # already past
    assert parse_retry_after_s("7") == 7.0 and parse_retry_after_s("Tomorrow-ish") is None


def test_reasoning_models_by_name() -> None:
    for name in ("o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "openai/o3"):
        assert is_reasoning_model(name), name
    for name in ("gpt-4o", "gpt-4o-mini", "Qwen/Qwen2.5-VL-7B-Instruct", "ollama", "omni"):
        assert not is_reasoning_model(name), name


async def test_http_date_retry_after_is_honoured_past_the_backoff_cap(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    # Whole seconds only in an HTTP date: 2 s ahead is at least 1 s of waiting.
    openai_server.script(
        Behaviour.error(429, headers={"Retry-After": formatdate(time.time() + 2, usegmt=True)}),
        "ok",
    )
    async with LLMClient(settings_for(backoff_max_s=0.05, retry_budget_s=10)) as llm:
        reply = await llm.chat("planner", user("go"))
    first, second = openai_server.requests
    assert reply.text == "ok" and reply.attempts == 2
    assert second.received_at - first.received_at >= 0.95


async def test_ratelimit_reset_headers_are_honoured(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(
        Behaviour.error(429, headers={"x-ratelimit-remaining-requests": "5",
                                      "x-ratelimit-reset-requests": "20s",
                                      "x-ratelimit-remaining-tokens": "0",
                                      "x-ratelimit-reset-tokens": "600ms"}),
        "ok",
    )
    async with LLMClient(settings_for(backoff_max_s=0.01)) as llm:
        await llm.chat("planner", user("go"))
    first, second = openai_server.requests
    # The spent limit (tokens) says 0.6 s; the requests limit is not spent.
    assert 0.58 <= second.received_at - first.received_at < 5


async def test_reasoning_model_gets_max_completion_tokens_and_no_temperature(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script("ok", "ok")
    models = RoleModels(planner="o3-mini", chooser="gpt-4o", reflector="gpt-4o")
    async with LLMClient(settings_for(models=models, max_tokens=333)) as llm:
        await llm.chat("planner", user("go"))
        await llm.chat("chooser", user("go"))
    reasoning, plain = (r.body or {} for r in openai_server.requests)
    assert reasoning["max_completion_tokens"] == 333
    assert "max_tokens" not in reasoning and "temperature" not in reasoning
    assert plain["max_tokens"] == 333 and plain["temperature"] == 0.0


async def test_a_400_refusing_max_tokens_is_retried_once_without_it_and_remembered(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    # A reasoning model behind a name we do not know (a proxy's alias).
    refusal = ("Unsupported parameter: 'max_tokens' is not supported with this model. "
               "Use 'max_completion_tokens' instead.")
    openai_server.script(
        Behaviour.error(400, refusal, error_param="max_tokens"),
        Behaviour.error(400, "Unsupported value: 'temperature' does not support 0.0 with this"
                             " model. Only the default (1) value is supported."),
        "ok", "again",
    )
    models = RoleModels(planner="company-reasoner", chooser="x", reflector="y")
    async with LLMClient(settings_for(models=models, max_tokens=500)) as llm:
        assert (await llm.chat("planner", user("go"))).text == "ok"
        assert (await llm.chat("planner", user("go"))).text == "again"
    bodies = [r.body or {} for r in openai_server.requests]
    assert len(bodies) == 4
    assert bodies[0]["max_tokens"] == 500 and "temperature" in bodies[0]
    assert bodies[1]["max_completion_tokens"] == 500 and "max_tokens" not in bodies[1]
    assert "temperature" not in bodies[2] and "max_tokens" not in bodies[2]
    assert bodies[3] == {"model": "company-reasoner", "messages": bodies[3]["messages"],
                         "max_completion_tokens": 500}  # remembered: no 400 the next time


async def test_a_400_naming_a_parameter_in_its_structured_error_drops_that_one(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    # OpenAI's shape: error.param and error.code decide, whatever the message says.
    openai_server.script(
        Behaviour.error(400, "Only the default (1) value is supported.", error_param="temperature",
                        error_code="unsupported_value"),
        Behaviour.error(400, "Not for this model.", error_param="top_p",
                        error_code="unsupported_parameter"),
        "ok", "again",
    )
    tools = [{"type": "function", "function": {"name": "stop", "parameters": {}}}]
    options = {"top_p": 0.9, "tools": tools, "tool_choice": "required"}
    async with LLMClient(settings_for(max_tokens=200)) as llm:
        assert (await llm.chat("planner", user("go"), options=options)).text == "ok"
        assert (await llm.chat("planner", user("go"), options=options)).text == "again"
    bodies = [r.body or {} for r in openai_server.requests]
    assert len(bodies) == 4
    assert bodies[0]["temperature"] == 0.0 and bodies[0]["top_p"] == 0.9
    assert "temperature" not in bodies[1] and bodies[1]["top_p"] == 0.9
    # each retry keeps the family's options and the output limit; only the refused one goes
    for b in bodies[2:]:
        assert "temperature" not in b and "top_p" not in b
        assert b["tools"] == tools and b["tool_choice"] == "required" and b["max_tokens"] == 200


async def test_a_400_whose_param_is_not_droppable_fails_at_once(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    # The message mentions max_tokens and "unsupported", but the server named another param.
    openai_server.script(
        Behaviour.error(400, "Unsupported value: image inputs are not supported with max_tokens",
                        error_param="messages", error_code="unsupported_value"),
        Behaviour.error(400, "max_tokens is too large: 1000000. This model supports at most "
                             "16384 completion tokens", error_param="max_tokens",
                        error_code="integer_above_max_value"),
    )
    async with LLMClient(settings_for(max_tokens=1000000)) as llm:
        with pytest.raises(LLMRequestError) as refused:
            await llm.chat("planner", user("go"))
        with pytest.raises(LLMRequestError) as too_large:
            await llm.chat("planner", user("go"))
    assert len(openai_server.requests) == 2  # neither retried
    assert refused.value.status == 400
    assert "HTTP 400" in str(refused.value) and "(param messages, code unsupported_value)" in str(
        refused.value)
    assert "(param max_tokens, code integer_above_max_value)" in str(too_large.value)
    assert all((r.body or {})["max_tokens"] == 1000000 for r in openai_server.requests)


async def test_a_flat_vllm_error_refusing_by_text_is_retried_without_it(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    # vLLM's ErrorResponse: no "error" object, param null, a numeric code: the text decides.
    flat = {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
            "message": "Unrecognized request argument supplied: max_completion_tokens"}
    openai_server.script(Behaviour(text=None, status=400, raw_body=msgspec.json.encode(flat)),
                         "ok")
    models = RoleModels(planner="o3-mini", chooser="x", reflector="y")  # a reasoning name
    async with LLMClient(settings_for(models=models, max_tokens=300)) as llm:
        assert (await llm.chat("planner", user("go"))).text == "ok"
    first, second = (r.body or {} for r in openai_server.requests)
    assert first["max_completion_tokens"] == 300 and "max_tokens" not in first
    assert second["max_tokens"] == 300 and "max_completion_tokens" not in second


async def test_a_server_refusing_tool_choice_required_gets_the_call_without_it(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    # vLLM before tool_choice "required" (flat error, the text names it), then an
    # OpenAI-shaped refusal by error.param on another model; tools themselves are kept.
    flat = {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
            "message": "The tool_choice option required is not yet supported but on the "
                       "roadmap."}
    openai_server.script(
        Behaviour(text=None, status=400, raw_body=msgspec.json.encode(flat)),
        Behaviour.tool_call("stop", "{}"),
        Behaviour.tool_call("stop", "{}"),
        Behaviour.error(400, "This value is not supported for this model.",
                        error_param="tool_choice", error_code="unsupported_value"),
        Behaviour.tool_call("stop", "{}"),
    )
    tools = [{"type": "function", "function": {"name": "stop", "parameters": {}}}]
    options = {"tools": tools, "tool_choice": "required"}
    async with LLMClient(settings_for()) as llm:
        for _ in range(2):  # the second call is sent without it at once (remembered)
            reply = await llm.chat("planner", user("go"), options=options)
            assert reply.tool_calls == (("stop", "{}"),)
        reply = await llm.chat("chooser", user("go"), options=options)  # another model
        assert reply.tool_calls == (("stop", "{}"),)
    bodies = [r.body or {} for r in openai_server.requests]
    assert len(bodies) == 5
    assert [b.get("tool_choice") for b in bodies] == ["required", None, None, "required", None]
    assert all(b["tools"] == tools for b in bodies)


async def test_a_400_refusing_tools_themselves_is_not_dropped(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(Behaviour.error(400, "tools are not supported by this model",
                                         error_param="tools", error_code="unsupported_parameter"))
    tools = [{"type": "function", "function": {"name": "stop", "parameters": {}}}]
    async with LLMClient(settings_for()) as llm:
        with pytest.raises(LLMRequestError, match="param tools"):
            await llm.chat("planner", user("go"), options={"tools": tools,
                                                           "tool_choice": "required"})
    assert len(openai_server.requests) == 1


async def test_a_stream_of_429s_inside_the_budget_is_survived(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    until = time.monotonic() + 1.5

    def quota(req: RecordedRequest) -> Behaviour:
        if time.monotonic() < until:
            return Behaviour.error(429, "Rate limit reached for requests",
                                   headers={"Retry-After": "0.3"})
        return Behaviour.reply("through")

    openai_server.policy = quota
    async with LLMClient(settings_for(retry_budget_s=4.0, max_retries=None)) as llm:
        reply = await llm.chat("planner", user("go"))
    assert reply.text == "through" and reply.attempts >= 4


async def test_past_the_budget_the_error_names_the_endpoint_and_the_last_error(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.policy = lambda req: Behaviour.error(
        429, f"Rate limit reached for key {SECRET}", headers={"Retry-After": "0.2"})
    t0 = time.monotonic()
    async with LLMClient(settings_for(retry_budget_s=0.8, max_retries=None)) as llm:
        with pytest.raises(LLMUnavailable) as err:
            await llm.chat("planner", user("go"))
    spent = time.monotonic() - t0
    text = str(err.value)
    assert f"127.0.0.1:{openai_server.port}" in text and "HTTP 429" in text
    assert "Rate limit reached" in text and SECRET not in text and "<redacted>" in text
    assert err.value.last_status == 429 and err.value.attempts >= 3
    assert spent < 2.0  # within the budget (plus one attempt), not the 120 s default


async def test_a_server_wait_longer_than_the_budget_fails_at_once(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(Behaviour.error(429, headers={"Retry-After": "600"}))
    t0 = time.monotonic()
    async with LLMClient(settings_for(retry_budget_s=2.0, max_retries=None)) as llm:
        with pytest.raises(LLMUnavailable, match="retry budget 2 s"):
            await llm.chat("planner", user("go"))
    assert time.monotonic() - t0 < 1.5 and len(openai_server.requests) == 1


async def test_roles_go_to_their_own_servers_with_their_own_keys(
    settings_for: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_VLLM_KEY", "local-key-1234")
    with OpenAIServer() as hosted, OpenAIServer() as local:
        hosted.script("plan", "reflect")
        local.script("choose")
        roles = Roles(chooser=RoleSettings(base_url=local.base_url, api_key_env="LOCAL_VLLM_KEY",
                                           model="qwen-local", temperature="none",
                                           max_tokens=64, max_image_side=256, detail="high"))
        settings = settings_for(base_url=hosted.base_url, roles=roles)
        async with LLMClient(settings) as llm:
            assert len(llm._clients) == 2  # one openai client per (base_url, key)
            assert llm.limiter_for("chooser") is not llm.limiter_for("planner")
            assert llm.limiter_for("reflector") is llm.limiter
            texts = [(await llm.chat(r, user(r))).text
                     for r in ("planner", "chooser", "reflector")]
        assert texts == ["plan", "choose", "reflect"]
        assert [q.model for q in hosted.requests] == ["plan-m", "reflect-m"]
        (chosen,) = local.requests
        assert chosen.model == "qwen-local"
        assert chosen.headers["authorization"] == "Bearer local-key-1234"
        assert all(q.headers["authorization"] == f"Bearer {SECRET}" for q in hosted.requests)
        body = chosen.body or {}
        assert body["max_tokens"] == 64 and "temperature" not in body


def test_roles_decode_from_config_and_inherit() -> None:
    raw = {
        "base_url": "http://gpu-box:8000/v1",
        "temperature": 0.2,
        "roles": {
            "planner": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_KEY_2",
                        "model": "gpt-5", "max_tokens": 4000},
            "chooser": {"temperature": "none", "max_image_side": 512, "detail": "low"},
        },
    }
    s = msgspec.convert(raw, LLMSettings)
    planner, chooser, reflector = (s.role(r) for r in ("planner", "chooser", "reflector"))
    assert (planner.model, planner.token_param, planner.temperature) == (
        "gpt-5", "max_completion_tokens", None)
    assert planner.endpoint == "api.openai.com" and planner.api_key_env == "OPENAI_KEY_2"
    assert (chooser.base_url, chooser.temperature, chooser.max_image_side, chooser.detail) == (
        "http://gpu-box:8000/v1", None, 512, "low")
    assert (reflector.temperature, reflector.max_tokens, reflector.token_param) == (
        0.2, 1024, "max_tokens")
    assert reflector.endpoint == "gpu-box:8000"
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"roles": {"planner": {"modle": "typo"}}}, LLMSettings)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"roles": {"critic": {}}}, LLMSettings)
    with pytest.raises(ValueError, match="roles.chooser.base_url"):
        LLMSettings(roles=Roles(chooser=RoleSettings(base_url="gpu-box:8000")))


async def test_a_role_with_its_own_key_variable_never_gets_the_top_level_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    s = LLMSettings(api_key=SECRET, roles=Roles(
        chooser=RoleSettings(base_url="http://127.0.0.1:9/v1", api_key_env="NO_SUCH_KEY_VAR")))
    assert s.resolve_api_key("planner") == SECRET
    assert s.resolve_api_key("chooser") != SECRET  # the local server's placeholder


async def test_token_limiter_holds_requests_past_the_tokens_per_window() -> None:
    limiter = RateLimiter(max_concurrent=10, requests_per_minute=1000, tokens_per_minute=100,
                          window_s=0.5)
    starts: list[float] = []

    async def one(tokens: int, actual: int | None = None) -> None:
        async with limiter.slot(tokens=tokens) as correct:
            starts.append(time.monotonic())
            if actual is not None:
                correct(actual)

    await one(60, actual=10)  # estimated 60, the server counted 10
    await one(60)  # 70 in the window: fits
    t0 = time.monotonic()
    await one(60)  # 130 would not: waits for the first two to age out
    assert time.monotonic() - t0 >= 0.4
    await one(500)  # larger than the whole limit: goes alone into an emptied window
    assert starts[-1] - starts[-2] >= 0.45
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(one, 0)
    assert RateLimiter(1, 1).tokens_per_minute == 0  # off by default


async def test_cost_counts_cached_tokens_at_their_price(
    openai_server: OpenAIServer, settings_for: Settings
) -> None:
    openai_server.script(Behaviour.reply("x", prompt_tokens=1000, completion_tokens=100,
                                         cached_tokens=800))
    prices = {"plan-m": ModelPrice(prompt_per_mtok=2.0, completion_per_mtok=8.0,
                                   cached_per_mtok=0.5)}
    async with LLMClient(settings_for(prices=prices)) as llm:
        reply = await llm.chat("planner", user("go"))
    assert reply.cached_tokens == 800
    assert reply.cost_usd == pytest.approx((200 * 2.0 + 800 * 0.5 + 100 * 8.0) / 1e6)
    assert reply.endpoint == f"127.0.0.1:{openai_server.port}"
    assert LLMSettings().prices == {}  # no prices by default: unknown, not guessed


def test_watch_shows_the_cost_of_an_llm_call() -> None:
    from protocol.messages import LlmUsage
    from recording.events import human_line

    msg = LlmUsage(model="gpt-4o", prompt_tokens=1200, completion_tokens=80, latency_s=1.5,
                   purpose="plan", cost_usd=0.0038, cached_tokens=1024, device="p1", step=2)
    line = human_line("mobagent/v1/devices/p1/events/llm_usage", msg)
    assert "llm plan gpt-4o: 1200+80 tokens (1024 cached), 1.50s, $0.0038" in line
    old = msgspec.json.decode(b'{"kind": "llm_usage", "model": "m"}', type=LlmUsage)
    assert (old.cost_usd, old.cached_tokens) == (0.0, 0)  # older senders still decode

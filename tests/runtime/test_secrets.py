"""Secrets given in the config never appear in logs or events."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import structlog

from protocol.messages import Error
from recording.events import EventFile, event_json, human_line
from runtime.config import RuntimeConfig, Section, load_config, secret_values
from runtime.log import configure_logging
from tests.fixtures.mosquitto import MosquittoFactory

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "Pa55-w0rd-not-in-logs"
API_KEY = "sk-test-9f8e7d6c5b4a"


class LlmConfig(Section):
    api_key: str = ""
    max_tokens: int = 512


class AppConfig(RuntimeConfig):
    llm: LlmConfig = msgspec.field(default_factory=LlmConfig)


def test_logs_and_events_redact_configured_secrets(tmp_path: Path) -> None:
    cfg = load_config(None, AppConfig, env={"MOBAGENT_BUS__PASSWORD": PASSWORD,
                                            "MOBAGENT_LLM__API_KEY": API_KEY})
    assert secret_values(cfg) == {PASSWORD, API_KEY}
    out = io.StringIO()
    for fmt in ("json", "pretty"):
        log_cfg = msgspec.structs.replace(cfg.log, format=fmt, level="debug")
        configure_logging(log_cfg, secret_values(cfg), stream=out)
        log = structlog.get_logger("t")
        log.info("connecting", url=f"mqtt://agent:{PASSWORD}@broker:1883", password=PASSWORD)
        log.warning("llm_failed", error=f"401 for key {API_KEY}", headers={"Authorization": "Bearer x"},
                    config=msgspec.to_builtins(cfg), max_tokens=512)
        try:
            raise RuntimeError(f"auth failed with {PASSWORD}")
        except RuntimeError:
            log.exception("crash")
        logging.getLogger("aiomqtt").warning("login %s failed", PASSWORD)
    text = out.getvalue()
    assert "connecting" in text and "llm_failed" in text and "crash" in text and "login" in text
    assert PASSWORD not in text and API_KEY not in text and "Bearer x" not in text
    assert "***" in text and "512" in text  # max_tokens is not a secret

    err = Error(topic="t", reason="auth", detail=f"password {PASSWORD} rejected, key {API_KEY}")
    assert PASSWORD not in event_json("t", err) and API_KEY not in human_line("t", err)
    events = EventFile(tmp_path / "events.jsonl")
    events.open()
    events._write(event_json("t", err))
    events.close()
    assert "auth" in events.path.read_text() and PASSWORD not in events.path.read_text()


def test_serve_never_logs_the_broker_password(mosquitto_factory: MosquittoFactory,
                                              tmp_path: Path) -> None:
    broker = mosquitto_factory(users={"agent": PASSWORD}, acl="user agent\ntopic readwrite #\n")
    events_path = tmp_path / "events.jsonl"
    env = {**os.environ, "MOBAGENT_BUS__PASSWORD": PASSWORD, "MOBAGENT_BUS__USERNAME": "agent",
           "MOBAGENT_LOG__EVENTS_JSONL": str(events_path), "MOBAGENT_HOST__NAME": "secret-host",
           "MOBAGENT_LIMITS__MAX_INSTRUCTION_CHARS": "5"}
    cli = [sys.executable, "-m", "runtime.cli", "--broker", broker.url, "--log-level", "debug"]
    serve = subprocess.Popen([*cli, "serve", "--runtime-only"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    try:
        up = subprocess.run([*cli, "watch", "--count", "1", "--timeout", "20"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
        assert up.stdout.strip() == "status secret-host: online", up.stderr
        # A refused instruction whose text is the password: it comes back in an Error event.
        env_client = {**env, "MOBAGENT_LIMITS__MAX_INSTRUCTION_CHARS": "2000"}
        done = subprocess.run([*cli, "submit", "phone-1", f"log in with {PASSWORD}", "--timeout", "20",
                               "--json"], cwd=ROOT, env=env_client, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 1, done.stderr
        assert "instruction refused" in done.stdout
    finally:
        serve.terminate()
        output, _ = serve.communicate(timeout=20)
    logs = output.decode()
    assert "bus_connected" in logs and "instruction_refused" in logs
    assert PASSWORD not in logs and PASSWORD not in done.stderr
    events = events_path.read_text()
    assert "instruction" in events and "error" in events
    assert PASSWORD not in events

"""Configuration: msgspec Structs loaded from TOML, then env, then CLI overrides.

``load_config(path, schema)`` is generic: other packages compose a bigger root Struct
(subclass ``RuntimeConfig`` and add their sections) and pass it as ``schema``. Precedence,
lowest first: the Struct defaults, the TOML file, ``MOBAGENT_SECTION__KEY`` environment
variables, then ``section.key=value`` overrides (the CLI's ``--set``). An unknown key or a
wrong type is a ``ConfigError`` naming the key (``bus.port: expected int, got str``).

Secrets (fields named like password / api_key / token / secret) are collected by
``secret_values`` so logging can redact them; ``redacted`` gives a printable copy.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from runtime.errors import MobagentError

ENV_PREFIX = "MOBAGENT_"
ENV_SEP = "__"
# Whole trailing words, so ``max_tokens`` is not a secret but ``access_token`` is.
SECRET_KEY_RE = re.compile(
    r"(?:^|[_-])(?:password|passwd|api_?key|token|secret|credentials?|authorization)$", re.I
)
REDACTED = "***"

T = TypeVar("T", bound=msgspec.Struct)


class ConfigError(MobagentError, ValueError):
    """A configuration problem; the message names the key and the source."""


class Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base for config sections: unknown keys are errors, not silently ignored."""


# ---- the runtime's own sections ---------------------------------------------------------

Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]
Positive = Annotated[float, msgspec.Meta(gt=0)]


class TlsConfig(Section):
    enabled: bool = False
    ca_file: str = ""  # empty: the system's trust store
    cert_file: str = ""  # client certificate, for brokers that want one
    key_file: str = ""
    insecure: bool = False  # skip hostname verification (test brokers only)


class BusConfig(Section):
    # Empty: the embedded broker (see [broker]). Else mqtt://host:port or mqtts://host:port.
    url: str = ""
    username: str = ""
    password: str = ""
    client_id: str = ""  # empty: derived from the host name and the command
    keepalive_s: Annotated[int, msgspec.Meta(ge=5, le=65535)] = 30
    protocol: Literal["auto", "5", "3.1.1"] = "auto"
    persistent_session: bool = True
    session_expiry_s: Annotated[int, msgspec.Meta(ge=0)] = 3600
    connect_timeout_s: Positive = 10.0
    publish_timeout_s: Positive = 10.0
    reconnect_min_s: Positive = 0.2
    reconnect_max_s: Positive = 10.0
    max_inflight: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 20  # unacked QoS 1 publishes
    tls: TlsConfig = msgspec.field(default_factory=TlsConfig)


class BrokerConfig(Section):
    """The embedded broker, used when ``bus.url`` is empty."""

    host: str = "127.0.0.1"
    port: Port = 1883  # 0: any free port (in-process use only)


class LimitsConfig(Section):
    max_payload_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 8 * 1024 * 1024
    max_instruction_chars: Annotated[int, msgspec.Meta(ge=1)] = 2000
    handler_timeout_s: Positive = 120.0


class LogConfig(Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "pretty"] = "auto"  # auto: pretty on a TTY
    events_jsonl: str = ""  # empty: events are not written to a file


class HostConfig(Section):
    name: str = ""  # empty: the machine's host name


class RuntimeConfig(Section):
    host: HostConfig = msgspec.field(default_factory=HostConfig)
    bus: BusConfig = msgspec.field(default_factory=BusConfig)
    broker: BrokerConfig = msgspec.field(default_factory=BrokerConfig)
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    log: LogConfig = msgspec.field(default_factory=LogConfig)


# ---- loading ------------------------------------------------------------------------------


def load_config(
    path: str | Path | None,
    schema: type[T],
    *,
    env: Mapping[str, str] | None = None,
    overrides: Iterable[str] | Mapping[str, Any] = (),
    unknown_sections: Literal["error", "ignore"] = "error",
) -> T:
    """Build ``schema`` from defaults < TOML file < env < overrides; ``ConfigError`` if bad.

    ``unknown_sections="ignore"`` drops top-level sections the schema does not know (other
    packages' sections in a shared file); keys inside known sections are always checked.
    """
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    sources: dict[tuple[str, ...], str] = {}
    if path is not None:
        data = _read_toml(Path(path))
    for key, value in env.items():
        if not key.startswith(ENV_PREFIX) or ENV_SEP not in key:
            continue  # MOBAGENT_CONFIG and friends are not sections
        keypath = tuple(p.lower() for p in key[len(ENV_PREFIX):].split(ENV_SEP))
        _set(data, keypath, _coerce(schema, keypath, value, f"env {key}"), f"env {key}")
        sources[keypath] = f"env {key}"
    items = overrides.items() if isinstance(overrides, Mapping) else map(_split_override, overrides)
    for dotted, value in items:
        keypath = tuple(dotted.split("."))
        if isinstance(value, str):
            value = _coerce(schema, keypath, value, f"override {dotted}")
        _set(data, keypath, value, f"override {dotted}")
        sources[keypath] = f"override {dotted}"
    if unknown_sections == "ignore":
        known = {f.encode_name for f in msgspec.structs.fields(schema)}
        data = {k: v for k, v in data.items() if k in known}
    try:
        return msgspec.convert(data, schema, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(_explain(str(exc), sources, path)) from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def _split_override(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {item!r}: expected section.key=value")
    return key.strip(), value


def _set(data: dict[str, Any], keypath: tuple[str, ...], value: Any, source: str) -> None:
    if any(not p for p in keypath):
        raise ConfigError(f"{source}: empty key in {'.'.join(keypath)!r}")
    node = data
    for i, part in enumerate(keypath[:-1]):
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"{'.'.join(keypath[: i + 1])}: is a value, not a section ({source})")
        node = nxt
    node[keypath[-1]] = value


def _field_type(schema: type[msgspec.Struct], keypath: tuple[str, ...]) -> msgspec.inspect.Type | None:
    """The msgspec type of ``keypath`` in ``schema``; None when it does not exist."""
    t: msgspec.inspect.Type = msgspec.inspect.type_info(schema)
    for part in keypath:
        if not isinstance(t, msgspec.inspect.StructType):
            return None
        match = next((f for f in t.fields if f.encode_name == part), None)
        if match is None:
            return None
        t = match.type
    return t


def _coerce(schema: type[msgspec.Struct], keypath: tuple[str, ...], raw: str, source: str) -> Any:
    """Turn an env/CLI string into the type the schema wants at ``keypath``."""
    t = _field_type(schema, keypath)
    if t is None:
        return raw  # unknown key: the final convert names it
    if isinstance(t, msgspec.inspect.StrType):
        return raw
    if isinstance(t, msgspec.inspect.UnionType) and any(
        isinstance(x, msgspec.inspect.StrType) for x in t.types
    ):
        return raw
    if isinstance(t, msgspec.inspect.LiteralType) and all(isinstance(v, str) for v in t.values):
        return raw
    if isinstance(t, msgspec.inspect.BoolType):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        return raw  # the convert says "expected bool, got str"
    try:  # numbers, lists, tables: read the value as a TOML literal
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


_AT_RE = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN_RE = re.compile(r"Object contains unknown field `(?P<field>[^`]+)`")
_EXPECTED_RE = re.compile(r"Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`")


def _explain(msg: str, sources: dict[tuple[str, ...], str], path: str | Path | None) -> str:
    """``Expected `int`, got `str` - at `$.bus.port``` -> ``bus.port: expected int, got str``."""
    m = _AT_RE.match(msg)
    what = m.group("what") if m else msg
    key = (m.group("path") or "").lstrip(".") if m else ""
    key = re.sub(r"\[(\d+)\]", r".\1", key)
    unknown = _UNKNOWN_RE.search(what)
    if unknown:
        key = f"{key}.{unknown.group('field')}" if key else unknown.group("field")
        what = "unknown key"
    else:
        exp = _EXPECTED_RE.search(what)
        if exp:
            what = f"expected {exp.group('want')}, got {exp.group('got')}"
        elif what:
            what = (what[0].lower() + what[1:]).replace("`", "")
    source = sources.get(tuple(key.split(".")))
    if source is None:
        source = f"in {path}" if path is not None else ""
    return f"{key or '(root)'}: {what}" + (f" ({source})" if source else "")


# ---- secrets ----------------------------------------------------------------------------


def is_secret_key(name: str) -> bool:
    return bool(SECRET_KEY_RE.search(name))


def secret_values(cfg: msgspec.Struct) -> set[str]:
    """Every non-empty string value under a secret-looking key, anywhere in ``cfg``."""
    found: set[str] = set()

    def walk(node: Any, secret: bool) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, secret or is_secret_key(str(k)))
        elif isinstance(node, list):
            for v in node:
                walk(v, secret)
        elif secret and isinstance(node, str) and node:
            found.add(node)

    walk(msgspec.to_builtins(cfg), False)
    return found


def redacted(cfg: msgspec.Struct) -> dict[str, Any]:
    """A plain-dict copy of ``cfg`` with secret values replaced, safe to print or log."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (REDACTED if is_secret_key(str(k)) and v else walk(v)) for k, v in node.items()
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out = walk(msgspec.to_builtins(cfg))
    assert isinstance(out, dict)
    return out


def default_config_path(env: Mapping[str, str] | None = None) -> Path | None:
    """``$MOBAGENT_CONFIG`` if set; else ``configs/default.toml`` in a source checkout."""
    env = os.environ if env is None else env
    if env.get("MOBAGENT_CONFIG"):
        return Path(env["MOBAGENT_CONFIG"])
    here = Path(__file__).resolve().parents[1] / "configs" / "default.toml"
    return here if here.is_file() else None

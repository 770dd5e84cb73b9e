"""``mobagent perceive``: a perception worker serving the hosts on one broker.

Run it (one or several, on this machine or others) beside hosts started with
``mobagent serve --perception remote``: each worker loads the models of ``[perception]``
once, takes ``GroundRequest`` and ``ReadTextRequest`` from a shared subscription
(``$share/{group}/...``, so the workers of a group split the requests) and answers them on
the frame each request carries (``actors/perception_remote.py``). Its bus session is not
persistent: a worker that dies takes its subscription with it, and the hosts' re-sent
requests go to the others. On an MQTT 3.1.1 broker every worker gets every request (the
hosts keep the first answer), so run one there.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import uuid
from functools import partial
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from actors.config import AgentConfig
from actors.perception import PerceptionEngine, engine_for
from actors.perception_remote import DEFAULT_GROUP, PerceptionWorker
from models.llm import LLMClient, LLMConfigError
from protocol.messages import CODEC
from runtime import topics
from runtime.actor import run_actors
from runtime.broker import configured_address
from runtime.bus import Bus
from runtime.cli import EXIT_OK, EXIT_USAGE, prepare, run_until_signalled, whole_number
from runtime.config import ConfigError

log = structlog.get_logger(__name__)


def worker_bus(cfg: AgentConfig, name: str = "perceive") -> Bus:
    """The worker's connection: a fresh client id and no persistent session."""
    return Bus(cfg.bus, configured_address(cfg),
               client_id=f"{name}-{socket.gethostname()[:40]}-{uuid.uuid4().hex[:8]}",
               persistent=False, max_payload_bytes=cfg.limits.max_payload_bytes, codec=CODEC)


async def perceive(cfg: AgentConfig, *, group: str = DEFAULT_GROUP, concurrency: int = 8,
                   engine: PerceptionEngine | None = None,
                   task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Serve perception requests until cancelled; ``task_status.started`` once the
    subscriptions are acknowledged."""
    engine = engine or engine_for(cfg)
    async with worker_bus(cfg) as bus:
        worker = PerceptionWorker(bus, engine, group=group, concurrency=concurrency,
                                  cpu_threads=os.cpu_count() or 2)
        if bus.protocol != "5":
            log.warning("perceive_not_shared", protocol=bus.protocol,
                        hint="MQTT 3.1.1 has no shared subscriptions: every worker answers "
                             "every request; run one worker, or use an MQTT 5 broker")
        async with anyio.create_task_group() as tg:
            await tg.start(partial(run_actors, bus, [worker]))
            log.info("perceive_ready", broker=bus.address.url, group=group,
                     slots=cfg.agent.perception_workers)  # subscribed: requests reach it
            task_status.started()


def cmd_perceive(args: argparse.Namespace) -> int:
    cfg = prepare(args, AgentConfig)
    try:
        topics.check_name(args.group, "--group")
        # A worker that grounds with a model (perception.*_grounding) calls the grounder
        # role itself: the request carries the planner's thought.
        llm = LLMClient(cfg.llm) if cfg.perception.grounder_needed() else None
        engine = engine_for(cfg, llm)
    except (topics.TopicError, ConfigError, LLMConfigError) as exc:
        print(f"mobagent perceive: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run_until_signalled(lambda: perceive(cfg, group=args.group,
                                                concurrency=args.concurrency, engine=engine),
                               interrupted=EXIT_OK)


def register(sub: Any) -> None:
    """Entry point (group ``mobagent.commands``, name ``perceive``)."""
    p = sub.add_parser(
        "perceive", help="a perception worker for hosts run with `serve --perception remote`",
        description="Serve grounding and OCR requests of every host on the broker (bus.url) "
                    "from an MQTT 5 shared subscription: start several to split the load. "
                    "Configured by [perception] and agent.perception_workers (frames worked "
                    "on at once); stop with Ctrl-C.")
    p.add_argument("--group", default=DEFAULT_GROUP,
                   help=f"the share group: workers of one group split the requests "
                        f"(default {DEFAULT_GROUP})")
    p.add_argument("--concurrency", type=whole_number(1, 256, "--concurrency"), default=8,
                   help="requests accepted at once (they queue for the perception slots)")
    p.set_defaults(func=cmd_perceive)

"""A real mosquitto, on a free loopback port, with persistence on (tests and benchmarks).

``mosquitto`` gives an anonymous broker; ``mosquitto_factory(users=..., acl=..., tls=...)``
makes more: authenticated (password file via ``mosquitto_passwd``, ACL) and/or TLS (a
throwaway CA made with openssl; ``broker.ca_file``). Each
``MosquittoBroker`` can ``restart()`` on the same port: kill, then start again with the
same persistence directory, which is chowned to the ``mosquitto`` user because mosquitto
drops to it when started as root. Skips clearly when mosquitto is not installed.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

MOSQUITTO = shutil.which("mosquitto") or (
    "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
)
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd")
OPENSSL = shutil.which("openssl")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chown_to_mosquitto(*paths: Path) -> None:
    if os.geteuid() != 0:
        return  # not root: mosquitto runs as us and can already write there
    try:
        pw = pwd.getpwnam("mosquitto")
    except KeyError:
        return
    for p in paths:
        os.chown(p, pw.pw_uid, pw.pw_gid)


@dataclass
class MosquittoBroker:
    workdir: Path
    port: int
    users: Mapping[str, str] = field(default_factory=dict)
    acl: str = ""
    tls: bool = False
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        """The CA that signed the TLS listener's certificate (``tls=True`` only)."""
        return self.workdir / "tls" / "ca.crt"

    def _make_certificates(self) -> list[str]:
        """A throwaway CA and a server certificate for 127.0.0.1, made with openssl."""
        tls = self.workdir / "tls"
        if not (tls / "server.crt").exists():
            tls.mkdir(exist_ok=True)
            ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            (tls / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
            for cmd in (
                ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                 "-subj", "/CN=mobagent test CA"],
                ["req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
                ["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext"],
            ):
                subprocess.run([OPENSSL or "openssl", *cmd], cwd=tls, check=True, capture_output=True)
            _chown_to_mosquitto(tls, *(tls / n for n in ("ca.crt", "server.crt", "server.key")))
        return [f"cafile {tls / 'ca.crt'}", f"certfile {tls / 'server.crt'}",
                f"keyfile {tls / 'server.key'}"]

    @property
    def log_path(self) -> Path:
        return self.workdir / "mosquitto.log"

    def _write_config(self) -> Path:
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        _chown_to_mosquitto(self.workdir, data)
        lines = [
            f"listener {self.port} 127.0.0.1",
            f"allow_anonymous {'false' if self.users else 'true'}",
            "persistence true",
            f"persistence_location {data}/",
            "autosave_interval 60",
            "max_queued_messages 100000",
            "max_inflight_messages 100",
            "set_tcp_nodelay true",  # as configs/mosquitto/mosquitto.conf
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if self.tls:
            lines[1:1] = self._make_certificates()  # they belong to the listener above
        if self.users:
            assert MOSQUITTO_PASSWD, "mosquitto_passwd is needed for an authenticated broker"
            pwfile = self.workdir / "passwd"
            pwfile.unlink(missing_ok=True)
            for i, (user, password) in enumerate(self.users.items()):
                args = [MOSQUITTO_PASSWD, "-b"] + (["-c"] if i == 0 else [])
                subprocess.run([*args, str(pwfile), user, password], check=True, capture_output=True)
            pwfile.chmod(0o600)
            _chown_to_mosquitto(pwfile)
            lines.append(f"password_file {pwfile}")
        if self.acl:
            aclfile = self.workdir / "acl"
            aclfile.write_text(self.acl)
            aclfile.chmod(0o600)
            _chown_to_mosquitto(aclfile)
            lines.append(f"acl_file {aclfile}")
        conf = self.workdir / "mosquitto.conf"
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def start(self, timeout_s: float = 10.0) -> None:
        assert MOSQUITTO is not None
        assert self.proc is None or self.proc.poll() is not None, "already running"
        conf = self._write_config()
        with self.log_path.open("ab") as logf:
            self.proc = subprocess.Popen(
                [MOSQUITTO, "-c", str(conf)], stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"mosquitto did not listen on {self.port} within {timeout_s}s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM saves the persistence file first; SIGKILL does not."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def remove(self, sig: int = signal.SIGTERM) -> None:
        """Stop, then delete ``workdir`` (config, log, persistence): for a broker whose
        workdir was made for it (``tempfile.mkdtemp``), which would otherwise stay behind,
        owned by the ``mosquitto`` user."""
        self.stop(sig)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def restart(self, sig: int = signal.SIGTERM, down_s: float = 0.0) -> None:
        """Kill and start again on the same port with the same persistent state."""
        self.stop(sig)
        if down_s:
            time.sleep(down_s)
        self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

"""A Redis Sentinel group on loopback: one primary, its replicas and three sentinels.

Real ``redis-server`` and ``redis-sentinel`` processes on free ports, each in a folder of its
own (a sentinel rewrites its config file), stopped by pid. ``kill_primary`` SIGKILLs whichever
server is the primary now; ``wait_for_new_primary`` waits until the sentinels agree on another.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Any, cast

import redis

from harness.processes import Process, free_port, port_open, wait_until

SERVICE = "probboard"
DOWN_AFTER_MS = 1000  # how long a silent primary takes to be "subjectively down"
FAILOVER_TIMEOUT_MS = 5000


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed (apt-get install redis-server redis-sentinel)")
    return found


def _master_state(sentinel_port: int) -> dict[str, Any]:
    """What the sentinel on ``sentinel_port`` says about the service's primary."""
    client = redis.Redis(port=sentinel_port, socket_timeout=1)
    try:
        return cast(dict[str, Any], client.sentinel_master(SERVICE))
    finally:
        client.close()


class SentinelGroup:
    """A primary, ``replicas`` replicas and ``sentinels`` sentinels (quorum 2) on loopback."""

    def __init__(self, workdir: Path, replicas: int = 2, sentinels: int = 3) -> None:
        self.workdir = workdir
        self.server_ports = [free_port() for _ in range(1 + replicas)]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.servers: dict[int, Process] = {}
        self.sentinels: dict[int, Process] = {}

    @property
    def url(self) -> str:
        """``redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,.../probboard/0``."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def start(self) -> None:
        """Start every server (the first as primary) and sentinel; wait until all see it."""
        primary = self.server_ports[0]
        for port in self.server_ports:
            self._start_server(port, None if port == primary else primary)
        for port in self.sentinel_ports:
            self._start_sentinel(port, primary)
        ready = wait_until(lambda: self._sentinels_ready(primary), timeout=20, interval=0.2)
        if not ready:
            raise RuntimeError("the sentinels did not agree on the primary and its replicas")

    def _start_server(self, port: int, primary: int | None) -> None:
        folder = self.workdir / f"redis-{port}"
        folder.mkdir(parents=True, exist_ok=True)
        argv = [
            _binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(folder),
        ]  # fmt: skip
        if primary is not None:
            argv += ["--replicaof", "127.0.0.1", str(primary)]
        self.servers[port] = Process(argv, os.environ, folder / "redis.log")
        if not wait_until(lambda: port_open(port), timeout=10):
            raise RuntimeError(f"redis-server on {port} did not start")

    def _start_sentinel(self, port: int, primary: int) -> None:
        folder = self.workdir / f"sentinel-{port}"
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "sentinel.conf"
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        argv = [_binary("redis-sentinel"), str(config)]
        self.sentinels[port] = Process(argv, os.environ, folder / "sentinel.log")
        if not wait_until(lambda: port_open(port), timeout=10):
            raise RuntimeError(f"redis-sentinel on {port} did not start")

    def _sentinels_ready(self, primary: int) -> bool:
        wanted = len(self.server_ports) - 1
        for port in self.sentinel_ports:
            try:
                state = _master_state(port)
                others = int(state.get("num-other-sentinels", 0))
                replicas = int(state.get("num-slaves", 0))
            except (redis.RedisError, OSError):
                return False
            if int(state["port"]) != primary or replicas < wanted:
                return False
            if others < len(self.sentinel_ports) - 1:
                return False
        return True

    def primary_port(self) -> int | None:
        """The primary's port as the first sentinel that answers says, or None."""
        for port in self.sentinel_ports:
            with contextlib.suppress(redis.RedisError, OSError):
                return int(_master_state(port)["port"])
        return None

    def client(self, port: int | None = None) -> redis.Redis:
        """A plain client on ``port`` (the primary when not given)."""
        port = port or self.primary_port()
        if port is None:
            raise RuntimeError("no sentinel names a primary")
        return redis.Redis(port=port, socket_timeout=2)

    def kill_primary(self) -> int:
        """SIGKILL the primary server; its port."""
        port = self.primary_port()
        if port is None:
            raise RuntimeError("no sentinel names a primary")
        self.servers[port].signal(signal.SIGKILL)
        return port

    def wait_for_new_primary(self, old: int, timeout: float = 20.0) -> int:
        """Wait until the sentinels name a primary other than ``old`` that takes writes."""

        def promoted() -> bool:
            port = self.primary_port()
            if port is None or port == old:
                return False
            with contextlib.suppress(redis.RedisError, OSError):
                client = self.client(port)
                role = client.role()[0]
                client.close()
                return role in (b"master", "master")
            return False

        if not wait_until(promoted, timeout=timeout, interval=0.1):
            raise RuntimeError(f"no new primary within {timeout} s")
        port = self.primary_port()
        assert port is not None
        return port

    def stop(self) -> None:
        """Stop every process this group started."""
        for process in [*self.sentinels.values(), *self.servers.values()]:
            process.stop()
        self.sentinels.clear()
        self.servers.clear()

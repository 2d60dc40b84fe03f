"""Real server processes for tests and benchmarks: on free loopback ports, always stopped by pid."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.ports import free_port as free_port  # re-exported: callers import it here

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


# The API-key pepper of every service the tests start (the CLI's and gunicorn's alike).
TEST_PEPPER = "test-pepper-0123456789abcdef"


def wait_until(predicate: object, timeout: float = 15.0, interval: float = 0.05) -> bool:
    """Poll ``predicate()`` until it is truthy or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(interval)
    return bool(predicate())  # type: ignore[operator]


def on_cpus(argv: Sequence[str], cpus: str | None) -> list[str]:
    """``argv`` under ``taskset -c CPUS`` (its children inherit the set), or as it is."""
    if cpus is None:
        return list(argv)
    taskset = shutil.which("taskset")
    if taskset is None:
        raise RuntimeError("taskset is not installed (apt-get install util-linux)")
    return [taskset, "-c", cpus, *argv]


def port_open(port: int) -> bool:
    """True when something accepts connections on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Process:
    """A child process with its output in a log file; ``stop`` signals it by pid."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path = ROOT
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            self.argv, env=dict(env), cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.popen.pid

    def alive(self) -> bool:
        """True while the child runs."""
        return self.popen.poll() is None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the child if it still runs."""
        if self.alive():
            os.kill(self.popen.pid, signum)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.alive():
            os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        self._log.close()
        return self.popen.returncode

    def output(self) -> str:
        """Everything the child wrote so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")


class RedisServer:
    """A throwaway ``redis-server`` on a free port, restartable on the same port.

    ``cpus`` (a ``taskset -c`` list such as ``"1"``) pins the server to those CPUs.
    """

    def __init__(self, workdir: Path, cpus: str | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.binary = binary
        self.workdir = workdir
        self.cpus = cpus
        self.port = free_port()
        self.process: Process | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        argv = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
        ]  # fmt: skip
        self.process = Process(on_cpus(argv, self.cpus), os.environ, self.workdir / "redis.log")
        if not wait_until(lambda: port_open(self.port), timeout=10):
            raise RuntimeError(f"redis-server did not start:\n{self.process.output()}")

    def stop(self) -> None:
        """Stop the server (its data is gone: nothing is persisted)."""
        if self.process is not None:
            self.process.stop()
            self.process = None

    def restart(self, down_for: float = 0.0) -> None:
        """Stop, wait ``down_for`` seconds, start again on the same port."""
        self.stop()
        time.sleep(down_for)
        self.start()


def http_get(
    url: str, headers: Mapping[str, str] | None = None, timeout: float = 5.0, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    """A request with urllib; returns (status, headers, body) for errors as well."""
    request = urllib.request.Request(url, headers=dict(headers or {}), method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def service_env(**overrides: str) -> dict[str, str]:
    """The environment for a service process: the test's, plus ``overrides``.

    Both secrets are set, as every environment of the production shape must set them (the
    web service refuses to start on Redis or PostgreSQL without them): one pepper for the
    CLI that makes keys and the servers that check them.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "DATABASE_"))}
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "SECRET_KEY": "test-secret-of-the-suite",
        }
    )
    env["API_KEY_PEPPER"] = TEST_PEPPER
    # Tests poll the board far faster than a guest may; throttling tests set their own limit.
    env["GUEST_RATE_LIMIT"] = "100000 per minute"
    # Several refreshers run at once in tests: their metrics port only where a test asks.
    env["REFRESHER_METRICS_PORT"] = "0"
    env.update(overrides)
    return env


class Service:
    """gunicorn (gevent workers) and/or the refresher, started with the README's commands."""

    def __init__(self, workdir: Path, env: Mapping[str, str]) -> None:
        self.workdir = workdir
        self.env = dict(env)
        self.port = free_port()
        self.web: Process | None = None
        self.refresher: Process | None = None

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def start_web(self, workers: int = 2) -> None:
        """gunicorn -c gunicorn.conf.py -b 127.0.0.1:PORT wsgi:app, waiting for health."""
        env = dict(self.env, WEB_CONCURRENCY=str(workers))
        argv = [
            str(BIN / "gunicorn"), "-c", "gunicorn.conf.py",
            "-b", f"127.0.0.1:{self.port}", "wsgi:app",
        ]  # fmt: skip
        self.web = Process(argv, env, self.workdir / "gunicorn.log")
        if not wait_until(self._healthy, timeout=30):
            raise RuntimeError(f"gunicorn did not become healthy:\n{self.web.output()}")

    def kill_web(self) -> None:
        """SIGKILL gunicorn's master and its workers at once: the host is gone."""
        if self.web is None or not self.web.alive():
            return
        master = self.web.pid
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        os.kill(master, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        self.web.stop()

    def start_refresher(self) -> None:
        """``python -m app.refresher``: the refresher's own program, as its own process."""
        argv = [str(BIN / "python"), "-m", "app.refresher"]
        self.refresher = Process(argv, self.env, self.workdir / "refresher.log")

    def _healthy(self) -> bool:
        with contextlib.suppress(OSError):
            status, _, _ = http_get(self.base + "/api/health", timeout=1)
            return status == 200
        return False

    def get(
        self, path: str, headers: Mapping[str, str] | None = None, method: str = "GET"
    ) -> tuple[int, dict[str, str], bytes]:
        """A request to this service."""
        return http_get(self.base + path, headers=headers, method=method)

    def stop(self) -> None:
        """Stop whatever was started."""
        for process in (self.refresher, self.web):
            if process is not None:
                process.stop()


def flask_cli(env: Mapping[str, str], *args: str, timeout: float = 120) -> str:
    """``flask --app wsgi <args>`` as its own process (the documented command); its stdout."""
    done = subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", *args],
        env=dict(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout

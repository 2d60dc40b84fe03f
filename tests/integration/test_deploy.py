"""The VM deploy for real: deploy/remote.sh into a scratch prefix, processes started with the
exact commands of the unit files (``--no-systemd``), health and a board read from the
installed release; a second release switches; a broken one rolls back; units and the nginx
site pass their tools' checks where the tools are present."""

from __future__ import annotations

import http.client
import http.server
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.processes import ROOT, Process, RedisServer, free_port, http_get, port_open
from tests.support.contract import validated
from tests.support.lock import canonical, locked

# In a release's venv but not locked: the package itself and the venv's own installers.
UNLOCKED = {"probboard", "pip", "setuptools", "wheel"}
# Locked for development, never in a release.
DEV_TOOLS = {"pytest", "ruff", "mypy", "selenium", "schemathesis", "pip-audit", "hypothesis"}

REMOTE = ROOT / "deploy" / "remote.sh"


def build_release() -> Path:
    """A bundle built by the project's own build script."""
    out = subprocess.run(
        ["bash", str(ROOT / "deploy" / "build-release.sh")],
        cwd=ROOT, check=True, capture_output=True, text=True,
        env={**os.environ, "PYTHON": sys.executable},
    ).stdout.split()[-1]  # fmt: skip
    return ROOT / out


def renamed(bundle: Path, workdir: Path, version: str, break_it: bool = False) -> Path:
    """A copy of ``bundle`` as release ``version``; ``break_it`` makes its web fail to boot."""
    extract = workdir / f"x-{version}"
    with tarfile.open(bundle) as tar:
        tar.extractall(extract, filter="data")
    (original,) = list(extract.iterdir())
    target = extract / version
    original.rename(target)
    if break_it:
        # Migrations pass, but gunicorn cannot start: only the health gate can notice.
        with (target / "gunicorn.conf.py").open("a") as conf:
            conf.write('\nraise SystemExit("this release is broken")\n')
    out = workdir / f"probboard-{version}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(target, arcname=version)
    return out


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One real bundle for the module (removed afterwards)."""
    built = build_release()
    try:
        yield built
    finally:
        built.unlink(missing_ok=True)


class Vm:
    """A scratch prefix standing in for the VM."""

    def __init__(self, prefix: Path, redis_url: str) -> None:
        self.prefix = prefix
        self.port = free_port()
        self.defaults = prefix.parent / "defaults.env"
        self.defaults.write_text(
            f"REDIS_URL={redis_url}\n"
            f"DATABASE_URL=sqlite:///{prefix / 'probboard.sqlite3'}\n"
            f"HOST=127.0.0.1\nPORT={self.port}\n"
            "GUEST_RATE_LIMIT=100000 per minute\n"
        )

    def run(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        """remote.sh with this prefix, without systemd."""
        return subprocess.run(
            ["bash", str(REMOTE), *args, "--prefix", str(self.prefix), "--no-systemd"],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def install(self, bundle: Path) -> subprocess.CompletedProcess[str]:
        """The install step as the Makefile's deploy runs it on the VM."""
        return self.run(
            "install", str(bundle), "--env-defaults", str(self.defaults), "--health-timeout", "45"
        )

    @property
    def current(self) -> str:
        """The release ``current`` points at."""
        return os.readlink(self.prefix / "opt/probboard/current").split("/")[-1]

    @property
    def env_file(self) -> str:
        """The env file's text."""
        return (self.prefix / "etc/probboard/probboard.env").read_text()

    def pid(self, service: str) -> int:
        """The pid of a running service."""
        return int((self.prefix / f"run/probboard/{service}.pid").read_text())

    def cmdline(self, service: str) -> list[str]:
        """The running service's command line."""
        raw = Path(f"/proc/{self.pid(service)}/cmdline").read_bytes()
        return [part.decode() for part in raw.split(b"\0") if part]

    def board(self) -> dict[str, object]:
        """The board served by the installed release."""
        status, _, body = http_get(f"http://127.0.0.1:{self.port}/api/probboard/latest")
        assert status == 200
        return validated("board", body)


@pytest.fixture
def vm(tmp_path: Path, fresh_redis: RedisServer) -> Iterator[Vm]:
    """A fresh scratch VM; whatever it runs is stopped afterwards."""
    machine = Vm(tmp_path / "vm", fresh_redis.url)
    machine.prefix.mkdir()
    try:
        yield machine
    finally:
        machine.run("stop")


# Three real installs (a venv from the wheels each): about 100 s alone, three times that on a
# loaded 2-core machine, where the suite's 300 s would cut a deploy in the middle.
@pytest.mark.timeout(900)
def test_deploy_switch_and_rollback(vm: Vm, bundle: Path, tmp_path: Path) -> None:
    """Install, switch, refuse a broken release (exit 1, previous restored) and roll back."""
    # Defaults that give one secret: the env file is made with it and only the other is made.
    with vm.defaults.open("a") as defaults:
        defaults.write("SECRET_KEY=given-secret-of-this-vm-0123\n")
    first = renamed(bundle, tmp_path, "20260101000000-aaaaaaa")
    result = vm.install(first)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "healthy" in result.stdout
    assert vm.current == "20260101000000-aaaaaaa"
    board = vm.board()
    assert board["items"] and board["latencyLevel"] == "ok"
    # The processes run the exact commands of the unit files, on this prefix's paths.
    root = vm.prefix / "opt/probboard"
    web = vm.cmdline("probboard-web")
    assert web[-3:] == ["-c", f"{root}/current/gunicorn.conf.py", "wsgi:app"], web
    assert any(part.endswith("/current/venv/bin/gunicorn") for part in vm.cmdline("probboard-web"))
    refresher = vm.cmdline("probboard-refresher")
    assert refresher[-2:] == ["-m", "app.refresher"], refresher  # its own program
    assert refresher[0].endswith("/current/venv/bin/python"), refresher
    # The alerts program and its delivery workers (ALERTS_WORKERS, default 2), each its unit's.
    assert vm.cmdline("probboard-alerts")[-2:] == ["-m", "app.alerts"]
    for worker in ("probboard-alerts-worker@1", "probboard-alerts-worker@2"):
        assert vm.cmdline(worker)[-3:] == ["-m", "app.alerts", "worker"], worker
        assert vm.cmdline(worker)[0].endswith("/current/venv/bin/python"), worker
    assert not (vm.prefix / "run/probboard/probboard-alerts-worker@3.pid").exists()
    # The release's venv holds the lock's versions and nothing the lock does not name.
    frozen = subprocess.run(
        [str(vm.prefix / "opt/probboard/current/venv/bin/pip"), "freeze", "--all"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    pins = locked()
    versions = dict(line.split("==", 1) for line in frozen if "==" in line)
    extra = {
        name: version for name, version in versions.items()
        if pins.get(canonical(name)) != version and canonical(name) not in UNLOCKED
    }  # fmt: skip
    assert "limits" in {canonical(name) for name in versions}
    assert extra == {}, extra
    assert not DEV_TOOLS & {canonical(name) for name in versions}  # run-time wheels only
    env_before = vm.env_file
    assignments = [line.split("=", 1) for line in env_before.splitlines() if "=" in line]
    names = [name for name, _ in assignments]
    assert len(names) == len(set(names)), env_before  # one line per variable
    values = dict(assignments)
    assert values["SECRET_KEY"] == "given-secret-of-this-vm-0123"  # the defaults' own
    assert len(values["API_KEY_PEPPER"]) >= 32  # the one they lack, made once

    # One worker from now on: the second is stopped with the release it ran.
    second_worker = vm.pid("probboard-alerts-worker@2")
    with (vm.prefix / "etc/probboard/probboard.env").open("a") as env_file:
        env_file.write("ALERTS_WORKERS=1\n")
    env_before = vm.env_file
    second = renamed(bundle, tmp_path, "20260102000000-bbbbbbb")
    result = vm.install(second)
    assert result.returncode == 0, result.stdout + result.stderr
    assert vm.current == "20260102000000-bbbbbbb"
    assert vm.env_file == env_before  # secrets kept: never overwritten
    assert vm.board()["items"]
    assert vm.cmdline("probboard-alerts-worker@1")[-1] == "worker"
    assert not (vm.prefix / "run/probboard/probboard-alerts-worker@2.pid").exists()
    assert not Path(f"/proc/{second_worker}").exists()

    broken = renamed(bundle, tmp_path, "20260103000000-ccccccc", break_it=True)
    result = vm.install(broken)
    # remote.sh's die: exit 1 once the previous release is back, saying so last.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed its health gate" in result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "deploy: deploy of 20260103000000-ccccccc failed; 20260102000000-bbbbbbb restored"
    ), result.stderr
    assert vm.current == "20260102000000-bbbbbbb"  # switched back
    assert vm.board()["items"]

    result = vm.run("rollback", "--health-timeout", "45")
    assert result.returncode == 0, result.stdout + result.stderr
    assert vm.current == "20260101000000-aaaaaaa"
    assert vm.board()["items"]


def _substituted_units(tmp_path: Path) -> list[Path]:
    units = []
    for path in sorted((ROOT / "deploy").glob("probboard-*.service")):
        name, text = path.name, path.read_text()
        # Point at executables that exist here, so verify checks everything else.
        text = text.replace("/opt/probboard/current/venv/bin/gunicorn", shutil.which("true") or "")
        text = text.replace("/opt/probboard/current/venv/bin/python", shutil.which("true") or "")
        text = text.replace("User=probboard", "User=root").replace("Group=probboard", "Group=root")
        unit = tmp_path / name
        unit.write_text(text)
        units.append(unit)
    return units


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze absent")
def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """Every unit (web, refresher, alerts, the alerts workers' template) passes
    ``systemd-analyze verify``: exit 0 and no complaint about them."""
    result = subprocess.run(
        ["systemd-analyze", "verify", *map(str, _substituted_units(tmp_path))],
        capture_output=True, text=True,
    )  # fmt: skip
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        # (a bus that is not there is no complaint about the units; a setting it cannot parse is)
        if "probboard" in line and ("Failed to" not in line or "Failed to parse" in line)
    ]
    assert result.returncode == 0, result.stdout + result.stderr
    assert not problems, problems


@pytest.mark.parametrize("count", ["many", "33", "-1", "2.5"])
def test_a_bad_alerts_worker_count_stops_the_deploy_before_anything_is_installed(
    vm: Vm, count: str
) -> None:
    """ALERTS_WORKERS is a whole number from 0 to 32: anything else is named in one line,
    status 1, before a release is unpacked (no bundle is even looked at)."""
    with vm.defaults.open("a") as defaults:
        defaults.write(f"ALERTS_WORKERS={count}\n")
    result = vm.run("install", str(vm.prefix / "no-such-bundle.tar.gz"),
                    "--env-defaults", str(vm.defaults))  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"deploy: ALERTS_WORKERS={count} in {vm.prefix}/etc/probboard/probboard.env: give a "
        "whole number of alert delivery workers, 0 to 32"
    ]
    assert not (vm.prefix / "opt/probboard/releases").exists()


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx absent")
def test_nginx_site_passes_nginx_t(tmp_path: Path) -> None:
    """The nginx site passes ``nginx -t`` with a throwaway certificate."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    site = (ROOT / "deploy" / "nginx-probboard.conf").read_text()
    site = site.replace("/etc/ssl/certs/probboard.pem", str(cert))
    site = site.replace("/etc/ssl/private/probboard.key", str(key))
    (tmp_path / "site.conf").write_text(site)
    main = tmp_path / "nginx.conf"
    main.write_text(
        f"pid {tmp_path / 'nginx.pid'};\nerror_log {tmp_path / 'error.log'};\n"
        "events {}\n"
        f"http {{\n access_log off;\n include {tmp_path / 'site.conf'};\n}}\n"
    )
    result = subprocess.run(
        ["nginx", "-t", "-c", str(main), "-p", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr


def throwaway_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate and its key, for one day."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class _Upstream(http.server.BaseHTTPRequestHandler):
    """A web host stand-in: 200 to every GET (the app's own headers are not the point)."""

    def do_GET(self) -> None:
        """A small JSON 200."""
        body = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx absent")
def test_the_tls_site_sends_hsts_on_every_answer(tmp_path: Path) -> None:
    """The production site as it is, on a free port with a throwaway certificate: every answer
    over TLS carries ``Strict-Transport-Security`` (``always``: nginx's own 404 and 502 too);
    the plain-HTTP redirect does not (browsers ignore it there)."""
    cert, key = throwaway_certificate(tmp_path)
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    tls, plain, dead = free_port(), free_port(), free_port()
    site = (ROOT / "deploy" / "nginx-probboard.conf").read_text()
    site = site.replace("/etc/ssl/certs/probboard.pem", str(cert))
    site = site.replace("/etc/ssl/private/probboard.key", str(key))
    site = site.replace("server 127.0.0.1:8000", f"server 127.0.0.1:{upstream.server_port}")
    site = site.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{tls} ssl http2;")
    site = site.replace("listen 80;", f"listen 127.0.0.1:{plain};")
    site = site.replace("listen [::]:443 ssl http2;\n", "").replace("listen [::]:80;\n", "")
    # A second TLS server, the same site with its one host down: nginx answers 502 itself.
    down = site[site.index("server {\n    # ") :].replace(f"127.0.0.1:{tls}", f"127.0.0.1:{dead}")
    down = down.replace(
        "proxy_pass http://probboard;", f"proxy_pass http://127.0.0.1:{free_port()};"
    )
    (tmp_path / "site.conf").write_text(site + down)
    main = tmp_path / "nginx.conf"
    main.write_text(
        f"pid {tmp_path / 'nginx.pid'};\nerror_log {tmp_path / 'error.log'};\n"
        f"events {{}}\nhttp {{\n access_log off;\n include {tmp_path / 'site.conf'};\n}}\n"
    )
    # Own nginx: the production site rewritten for this test's ports and certificate.
    nginx = Process(["nginx", "-c", str(main), "-p", str(tmp_path), "-g", "daemon off;"],
                    {"PATH": "/usr/sbin:/usr/bin:/bin"}, tmp_path / "nginx.log")  # fmt: skip
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False  # the certificate names localhost; we dial 127.0.0.1

    def head(url: str) -> tuple[int, str | None]:
        """The status and the HSTS header of a GET of ``url`` (redirects not followed)."""
        connection: http.client.HTTPConnection
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(parts.netloc, context=context, timeout=10)
        else:
            connection = http.client.HTTPConnection(parts.netloc, timeout=10)
        connection.request("GET", parts.path)
        response = connection.getresponse()
        response.read()
        connection.close()
        return response.status, response.getheader("Strict-Transport-Security")

    try:
        for port in (tls, plain, dead):
            wait_for_port(port, nginx)
        hsts = "max-age=31536000"
        assert head(f"https://127.0.0.1:{tls}/api/health") == (200, hsts)
        assert head(f"https://127.0.0.1:{tls}/api/probboard/stream") == (200, hsts)
        assert head(f"https://127.0.0.1:{tls}/metrics") == (404, hsts)  # nginx's own
        assert head(f"https://127.0.0.1:{dead}/api/health") == (502, hsts)  # no host up
        assert head(f"http://127.0.0.1:{plain}/api/health") == (301, None)
    finally:
        nginx.stop()
        upstream.shutdown()
        upstream.server_close()


def wait_for_port(port: int, process: Process) -> None:
    """Until ``port`` accepts connections; fails with the process's output if it exits."""
    for _ in range(200):
        if port_open(port):
            return
        assert process.alive(), process.output()
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}: {process.output()}")


SSH = """#!/usr/bin/env bash
# ssh stand-in: runs the remote command here, with FAKE_HOST set to the host's name.
while [[ $# -gt 0 && "$1" == -* ]]; do case "$1" in -p|-i|-o) shift 2 ;; *) shift ;; esac; done
host=$1
shift
FAKE_HOST=${host#*@} exec bash -c "$*"
"""
SCP = """#!/usr/bin/env bash
# scp stand-in: copies the files into the directory after "host:".
files=()
while [[ $# -gt 0 ]]; do
  case "$1" in -P|-i|-o) shift 2 ;; -*) shift ;; *) files+=("$1"); shift ;; esac
done
target=${files[-1]}
unset 'files[-1]'
cp "${files[@]}" "${target#*:}"
"""


def shims(folder: Path) -> str:
    """A PATH whose ssh and scp run here (each "host" is a prefix under one folder)."""
    folder.mkdir()
    for name, text in (("ssh", SSH), ("scp", SCP)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


# Two real installs through `make deploy` (see test_deploy_switch_and_rollback's timeout).
@pytest.mark.timeout(900)
def test_make_deploy_to_two_hosts_in_turn_with_one_leading_refresher(
    tmp_path: Path, bundle: Path, fresh_redis: RedisServer
) -> None:
    """``make deploy HOSTS="vm1 vm2"``: both hosts live on shared secrets, one refresher
    leads; a release that fails vm1's gate stops the rollout before vm2."""
    vms = tmp_path / "vms"
    ports = {"vm1": free_port(), "vm2": free_port()}
    shared = (
        f"SECRET_KEY=shared-secret-key-0123\nAPI_KEY_PEPPER=shared-pepper-0123456789\n"
        f"REDIS_URL={fresh_redis.url}\n"
        f"DATABASE_URL=sqlite:///{tmp_path / 'shared.sqlite3'}\n"
        "HOST=127.0.0.1\nGUEST_RATE_LIMIT=100000 per minute\n"
    )
    shared_env = tmp_path / "shared.env"
    shared_env.write_text(shared + f"PORT={ports['vm1']}\n")
    # vm2 has run Probboard before: its env file (the same secrets, its own port) is kept.
    (vms / "vm2/etc/probboard").mkdir(parents=True)
    (vms / "vm2/etc/probboard/probboard.env").write_text(shared + f"PORT={ports['vm2']}\n")
    (vms / "vm1").mkdir()
    env = {
        **os.environ,
        "PATH": shims(tmp_path / "bin"),
        "REMOTE_ARGS": f"--prefix {vms}/$FAKE_HOST --no-systemd --health-timeout 45",
    }
    try:
        result = subprocess.run(
            # The module's bundle (built by the same script make deploy runs): one build less.
            # -o: never rebuild the venv under the tests running beside this one.
            ["make", "-o", ".venv/bin/activate", "deploy", "HOSTS=root@vm1 root@vm2",
             f"SHARED_ENV={shared_env}", f"BUNDLE={bundle}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert "every host is live: root@vm1 root@vm2" in result.stdout
        vm1_env = (vms / "vm1/etc/probboard/probboard.env").read_text()
        # The shared secrets, and no secret of vm1's own beside them.
        secrets = [line for line in vm1_env.splitlines() if line.startswith(("SECRET", "API"))]
        assert sorted(secrets) == [
            "API_KEY_PEPPER=shared-pepper-0123456789",
            "SECRET_KEY=shared-secret-key-0123",
        ], vm1_env
        for port in ports.values():
            status, _, body = http_get(f"http://127.0.0.1:{port}/api/probboard/latest")
            assert status == 200 and validated("board", body)["latencyLevel"] == "ok"
        refreshers = {
            name: int((vms / name / "run/probboard/probboard-refresher.pid").read_text())
            for name in ports
        }
        who = subprocess.run(
            [sys.executable, "-m", "app.refresher", "--who-leads"],
            cwd=ROOT, capture_output=True, text=True, timeout=30,
            env={**os.environ, "REDIS_URL": fresh_redis.url, "SECRET_KEY": "x"},
        )  # fmt: skip
        assert who.returncode == 0, who.stdout + who.stderr
        leaders = [name for name, pid in refreshers.items() if f":{pid} " in who.stdout]
        assert len(leaders) == 1, (who.stdout, refreshers)

        current = {name: os.readlink(vms / name / "opt/probboard/current") for name in ports}
        broken = renamed(bundle, tmp_path, "20990101000000-fffffff", break_it=True)
        result = subprocess.run(
            ["bash", str(ROOT / "deploy/ship-hosts.sh"), str(broken), "root@vm1", "root@vm2"],
            cwd=ROOT, env={**env, "SHARED_ENV": str(shared_env)},
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert result.returncode == 1, result.stdout + result.stderr
        assert "stopped at root@vm1" in result.stderr
        assert os.readlink(vms / "vm1/opt/probboard/current") == current["vm1"]  # restored
        assert os.readlink(vms / "vm2/opt/probboard/current") == current["vm2"]  # untouched
        assert not (vms / "vm2/opt/probboard/releases/20990101000000-fffffff").exists()
    finally:
        for name in ports:
            if (vms / name / "opt/probboard").exists():
                subprocess.run(
                    ["bash", str(REMOTE), "stop", "--prefix", str(vms / name), "--no-systemd"],
                    capture_output=True, timeout=120,
                )  # fmt: skip


@pytest.mark.parametrize(
    ("shared_env", "problem"),
    [
        (None, "2 hosts need SHARED_ENV"),
        ("HOST=127.0.0.1\n", "does not define SECRET_KEY"),
        ("SECRET_KEY=shared-secret-key-0123\nAPI_KEY_PEPPER=\n", "does not define API_KEY_PEPPER"),
        (
            "SECRET_KEY=shared-secret-key-0123\nAPI_KEY_PEPPER=''\n",
            "does not define API_KEY_PEPPER",
        ),
    ],
    ids=["no-shared-env", "no-secret-key", "empty-pepper", "quoted-empty-pepper"],
)
def test_several_hosts_are_refused_without_both_shared_secrets(
    tmp_path: Path, shared_env: str | None, problem: str
) -> None:
    """Each new host would otherwise make its own pepper (a different set of valid keys):
    one line, status 2, before any host is touched. A secret in the operator's own shell
    does not count: only what the hosts will read."""
    env = {**os.environ, "PATH": shims(tmp_path / "bin"), "SECRET_KEY": "from-my-shell-0123456",
           "API_KEY_PEPPER": "from-my-shell-0123456", "REMOTE_ARGS": "--no-systemd"}  # fmt: skip
    env.pop("SHARED_ENV", None)
    if shared_env is not None:
        (tmp_path / "shared.env").write_text(shared_env)
        env["SHARED_ENV"] = str(tmp_path / "shared.env")
    touched = tmp_path / "touched"
    # An ssh that leaves a mark: it must never run.
    (tmp_path / "bin/ssh").write_text(f"#!/usr/bin/env bash\ntouch {touched}\nexit 1\n")
    result = subprocess.run(
        ["bash", str(ROOT / "deploy/ship-hosts.sh"), str(tmp_path / "bundle.tar.gz"),
         "root@vm1", "root@vm2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("deploy: ") and problem in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not touched.exists()


# Two real installs (see test_deploy_switch_and_rollback's timeout).
@pytest.mark.timeout(900)
def test_the_old_hop_count_is_refused_beyond_loopback_and_rewritten_on_it(
    vm: Vm, bundle: Path, tmp_path: Path
) -> None:
    """An env file from before issue 46 says TRUSTED_PROXIES=N. With gunicorn on a non-loopback
    HOST (several hosts, nginx maybe elsewhere) it is kept and the release refuses it: the
    deploy stops at the migration, nothing switched, the line naming the variable. On a
    loopback HOST the deploy rewrites that line to the loopback networks (the hops kept) and
    the release goes live."""
    env_file = vm.prefix / "etc/probboard/probboard.env"
    env_file.parent.mkdir(parents=True)
    kept = vm.defaults.read_text() + (
        "SECRET_KEY=secret-of-this-vm-0123456789\nAPI_KEY_PEPPER=pepper-of-this-vm-0123456789\n"
        "# written before issue 46\n"
    )
    env_file.write_text(kept.replace("HOST=127.0.0.1", "HOST=0.0.0.0") + "TRUSTED_PROXIES=1\n")
    before = env_file.read_text()

    result = vm.install(renamed(bundle, tmp_path, "20260101000000-aaaaaaa"))
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "TRUSTED_PROXIES=1 (the old hop count) kept" in output
    assert "TRUSTED_PROXIES: the old hop count '1' trusts loopback only" in output
    assert "migrations of 20260101000000-aaaaaaa failed; still on nothing" in output
    assert env_file.read_text() == before
    assert not (vm.prefix / "opt/probboard/current").exists()

    env_file.write_text(kept + "TRUSTED_PROXIES=2\nLOG_FORMAT=json\n")
    result = vm.install(renamed(bundle, tmp_path, "20260102000000-bbbbbbb"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "deploy: rewrote TRUSTED_PROXIES=2 (the old hop count)" in result.stdout
    assert env_file.read_text() == kept + (
        "TRUSTED_PROXIES=127.0.0.1/32,::1/128\nTRUSTED_PROXY_HOPS=2\nLOG_FORMAT=json\n"
    )
    assert vm.current == "20260102000000-bbbbbbb"
    assert vm.board()["items"]
    log = (vm.prefix / "var/log/probboard/probboard-web.log").read_text()
    assert "old hop count" not in log  # the networks now: no warning

"""Starting and stopping as an operator does it (issue 34, point 5), each program a process.

A bad setting: one line on stderr naming the variable and what it allows, exit status 2, no
traceback, whichever way the service is started. Ctrl-C of ``make run`` (the embedded shape
and the production shape): every process of the group ends, and nothing prints a traceback.
The refresher's own stop (SIGTERM, SIGINT, in every state) is in the fault suite
(``tests/integration/faults/test_refresher_stop.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from app.bus.redis_bus import BOARD_KEY
from harness.processes import (
    BIN,
    ROOT,
    Process,
    RedisServer,
    free_port,
    http_get,
    service_env,
    wait_until,
)
from tests.conftest import TEST_PEPPER
from tests.support.process_group import process_group

BAD = "BTC,DOGE"
LINE = "probboard: SYMBOLS: unknown symbol 'DOGE' in 'BTC,DOGE' (known: BTC, ETH, SOL, XRP)"
# -o: make never rebuilds the venv here, even when setup.cfg is newer than it: a test must not
# install packages, nor pull the venv from under the tests running beside it (pytest-xdist).
MAKE_RUN = ["make", "--no-print-directory", "-o", ".venv/bin/activate", "run"]
CTRL_C_BOUND_S = 15.0  # gunicorn's quick stop and make's: generous, the point is "all gone"


def operator_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of an operator's shell: no make of ours around (a sub-make would
    print "Entering directory"), the accounts store and pepper in ``tmp_path``."""
    env = service_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'accounts.sqlite3'}",
        API_KEY_PEPPER=TEST_PEPPER,
        PORT=str(free_port()),
        **settings,
    )
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKE_TERMOUT", "MAKE_TERMERR"):
        env.pop(name, None)
    return env


ENTRY_POINTS = {
    "refresher": [str(BIN / "python"), "-m", "app.refresher"],
    "gunicorn": [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
    "flask run": [str(BIN / "flask"), "--app", "wsgi", "run", "--no-reload"],
    "flask db upgrade": [str(BIN / "flask"), "--app", "wsgi", "db", "upgrade"],
    "flask users": [str(BIN / "flask"), "--app", "wsgi", "users", "list"],
    "flask refresher": [str(BIN / "flask"), "--app", "wsgi", "refresher"],
    "config check": [str(BIN / "python"), "-m", "app.config"],
    "serve.sh": ["scripts/serve.sh"],
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_bad_setting_is_one_line_and_status_2(entry: str, tmp_path: Path) -> None:
    env = operator_env(tmp_path, SYMBOLS=BAD, REDIS_URL="redis://127.0.0.1:1/0")

    done = subprocess.run(
        ENTRY_POINTS[entry], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )

    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (2, [LINE], ""), done


@pytest.mark.parametrize("redis_url", ["memory://", "redis://127.0.0.1:1/0"])
def test_make_run_with_a_bad_setting_prints_one_line(redis_url: str, tmp_path: Path) -> None:
    """Both shapes of ``make run``: make's own one line carries ours (no traceback, no trailer)."""
    env = operator_env(tmp_path, SYMBOLS=BAD, REDIS_URL=redis_url)

    done = subprocess.run(
        MAKE_RUN,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 2, done
    assert len(lines) == 1 and LINE in lines[0], lines


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7"])
def test_make_run_refuses_a_public_host_for_the_development_server_in_one_line(
    host: str, tmp_path: Path
) -> None:
    """Issue 50, point 6: ``HOST=0.0.0.0 make run`` on memory:// is refused like every other
    bad setting: one line naming HOST, pointing at the production shape, status 2."""
    env = operator_env(tmp_path, HOST=host, REDIS_URL="memory://")
    done = subprocess.run(MAKE_RUN, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 2, done
    assert len(lines) == 1 and f"probboard: HOST: refusing {host} " in lines[0], lines
    assert "REDIS_URL=redis://" in lines[0], lines


def test_operator_commands_print_no_warning_when_nothing_is_wrong(tmp_path: Path) -> None:
    """Issue 50, point 6: the embedded shape without SECRET_KEY is a good configuration for
    an operator's command (it signs nothing): ``flask db upgrade`` then ``flask users list``
    say nothing of SECRET_KEY (the web service warns when it serves, not the CLI)."""
    env = operator_env(tmp_path, REDIS_URL="memory://")
    env.pop("SECRET_KEY", None)
    for entry in ("flask db upgrade", "flask users"):
        done = subprocess.run(
            ENTRY_POINTS[entry], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done
        assert "WARNING" not in done.stdout + done.stderr, done


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_symbols_is_refused_by_the_programs(value: str, tmp_path: Path) -> None:
    env = operator_env(tmp_path, SYMBOLS=value)

    done = subprocess.run(
        ENTRY_POINTS["config check"], env=env, cwd=ROOT, capture_output=True, text=True
    )

    assert done.returncode == 2, done
    assert done.stderr.startswith("probboard: SYMBOLS: expected comma-separated symbols"), done


# The programs that build the web app's settings: all of them but the refresher's own.
WEB_ENTRY_POINTS = [entry for entry in ENTRY_POINTS if entry != "refresher"]


@pytest.mark.parametrize("missing", ["API_KEY_PEPPER", "SECRET_KEY"])
@pytest.mark.parametrize("entry", [*WEB_ENTRY_POINTS, "make run"])
def test_the_production_shape_without_a_secret_is_one_line_and_status_2(
    entry: str, missing: str, tmp_path: Path
) -> None:
    """Issue 46: ``REDIS_URL=redis://...`` without ``API_KEY_PEPPER`` (or ``SECRET_KEY``):
    every way of starting the web service stops at once with one line naming it (no
    pepper of its own in ``instance/``, no key per process)."""
    env = operator_env(tmp_path, REDIS_URL="redis://127.0.0.1:1/0")
    del env[missing]
    argv = MAKE_RUN if entry == "make run" else ENTRY_POINTS[entry]

    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)

    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 2, done
    assert len(lines) == 1 and f"probboard: {missing}: " in lines[0], lines


def test_the_refresher_runs_without_the_web_secrets(
    tmp_path: Path, fresh_redis: RedisServer
) -> None:
    """The refresher hashes no key and signs nothing: it publishes without either secret."""
    env = operator_env(tmp_path, REDIS_URL=fresh_redis.url)
    del env["API_KEY_PEPPER"], env["SECRET_KEY"]
    # Own refresher: started without the web secrets, the subject.
    refresher = Process(ENTRY_POINTS["refresher"], env, tmp_path / "refresher.log")
    try:
        published = redis.Redis.from_url(fresh_redis.url)
        assert wait_until(lambda: published.get(BOARD_KEY) is not None, timeout=30), (
            refresher.output()
        )
        assert refresher.alive(), refresher.output()
    finally:
        refresher.stop()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _board_has_rows(base: str) -> bool:
    status, _, body = http_get(base + "/api/probboard/latest", timeout=2)
    return status == 200 and bool(json.loads(body)["items"])


def _serving(base: str) -> bool:
    try:
        return _board_has_rows(base)
    except OSError:
        return False


@pytest.mark.timeout(180)
@pytest.mark.parametrize("shape", ["embedded", "production", "production-term"])
def test_ctrl_c_of_make_run_ends_every_process_without_a_traceback(
    shape: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) of ``make run``:
    flask run with its refresher thread, or serve.sh's refresher, alerts program and worker
    and gunicorn's master and two workers, all end; nothing after the signal is a traceback.
    ``production-term``: a SIGTERM to serve.sh alone (a supervisor stopping it by its pid)
    ends them all too; gunicorn was once left serving."""
    redis_url = "memory://"
    if shape.startswith("production"):
        redis_url = request.getfixturevalue("fresh_redis").url
    env = operator_env(tmp_path, REDIS_URL=redis_url)
    base = f"http://127.0.0.1:{env['PORT']}"

    with process_group(MAKE_RUN, env, tmp_path / "make-run.log") as group:
        # A board with rows: the refresher runs (embedded: started by this first request).
        assert wait_until(lambda: _serving(base), timeout=90), group.output()
        running = len(group.members())
        assert running >= (2 if shape == "embedded" else 7), group.output()

        if shape == "production-term":
            [serve] = [pid for pid in group.members() if b"serve.sh" in _cmdline(pid)]
            group.interrupt(signal.SIGTERM, only=serve)
        else:
            group.interrupt()

        assert group.wait_all_gone(CTRL_C_BOUND_S) is not None, (group.members(), group.output())
        after = group.output_after_signal()
        assert "Traceback" not in after and "Exception ignored" not in after, after


@pytest.mark.timeout(180)
def test_ctrl_c_pressed_again_while_it_stops_ends_it_without_a_traceback(
    tmp_path: Path, fresh_redis: RedisServer
) -> None:
    """The production shape, Ctrl-C, then Ctrl-C again every 100 ms while anything is left
    (an impatient operator): every process ends and nothing after the first signal is a
    traceback. A gevent worker's interpreter shutdown once printed "Exception ignored in:
    threading ... SystemExit" when a quit signal came during it (gunicorn's handler exits)."""
    env = operator_env(tmp_path, REDIS_URL=fresh_redis.url)
    base = f"http://127.0.0.1:{env['PORT']}"
    with process_group(MAKE_RUN, env, tmp_path / "make-run.log") as group:
        assert wait_until(lambda: _serving(base), timeout=90), group.output()
        group.interrupt()
        for _ in range(20):
            time.sleep(0.1)
            for pid in group.members():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)
        assert group.wait_all_gone(CTRL_C_BOUND_S) is not None, (group.members(), group.output())
        after = group.output_after_signal()
        assert "Traceback" not in after and "Exception ignored" not in after, after


def test_gunicorn_without_its_config_file_stops_at_once(tmp_path: Path) -> None:
    """gunicorn run with another config file (so no check in the master): the first worker
    reports the line and gunicorn stops ("App failed to load"), instead of booting workers
    that exit, one after the other, for ever."""
    env = operator_env(tmp_path, SYMBOLS=BAD)
    plain = tmp_path / "plain.conf.py"
    plain.write_text("control_socket_disable = True\n")
    argv = [str(BIN / "gunicorn"), "-c", str(plain), "-b", f"127.0.0.1:{env['PORT']}", "wsgi:app"]

    with process_group(argv, env, tmp_path / "gunicorn.log") as group:
        group.popen.wait(60)

        output = group.output()
        assert group.returncode not in (None, 0), output
        assert output.count(LINE) == 1 and "Traceback" not in output, output

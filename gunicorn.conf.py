"""gunicorn settings: gevent workers sized for long-lived streams, all values from app.config.

Run with ``gunicorn -c gunicorn.conf.py wsgi:app`` (``-b HOST:PORT`` overrides the bind).
"""

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from app.config import ConfigError, load_web_settings, report_bad_setting

# The master reads this file before any worker loads the app: a bad setting ends gunicorn
# here, with one line and status 2, instead of its "Failed to read config file" traceback.
# A missing secret (API_KEY_PEPPER, SECRET_KEY outside the embedded shape) is one such setting.
try:
    _settings = load_web_settings()
except ConfigError as error:
    raise SystemExit(report_bad_setting(error)) from None

# Metrics in prometheus_client's multiprocess mode: each worker writes its values to files in
# this folder and GET /metrics merges them. Set before any worker imports prometheus_client.
# A reload (SIGHUP) reads this file again: the folder made the first time is still ours.
_METRICS_MADE = "PROBBOARD_METRICS_DIR_MADE"
_METRICS_GIVEN = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR")) and not os.environ.get(
    _METRICS_MADE
)
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="probboard-metrics-")
    os.environ[_METRICS_MADE] = "1"
_METRICS_DIR = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])

# gevent, with gunicorn's own error answers (400, 414, 431...) as ErrorResponse JSON.
worker_class = "app.gunicorn_worker.JsonErrorGeventWorker"
# On memory:// each worker would run its own refresher and hold its own board: one only.
workers = _settings.web_concurrency if _settings.uses_redis else 1
if not _settings.uses_redis and _settings.web_concurrency > 1:
    logging.getLogger("gunicorn.error").warning(
        "REDIS_URL is memory://: running 1 worker, not WEB_CONCURRENCY=%d",
        _settings.web_concurrency,
    )
# Each SSE client holds a connection for hours; a gevent worker serves thousands.
worker_connections = 20000
bind = [f"{_settings.host}:{_settings.port}"]
# Long enough for streams to say goodbye on SIGTERM, short enough for quick deploys.
graceful_timeout = 10
timeout = 30
keepalive = 5
# Never buffer the app in the master before fork: connections must open after fork.
preload_app = False
# The board and stream are served behind nginx in production. X-Forwarded-For and
# X-Forwarded-Proto are read by the app alone (app/forwarded.py, TRUSTED_PROXIES): gunicorn
# trusts no peer with them, so there is one trust boundary, not two that could disagree.
forwarded_allow_ips = ""


def on_starting(server: Any) -> None:
    """Before the first worker: start from empty metrics (a restart resets the counters)."""
    _METRICS_DIR.mkdir(parents=True, exist_ok=True)
    for stale in _METRICS_DIR.glob("*.db"):
        stale.unlink(missing_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    """A worker is gone: its gauges of live processes stop counting."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def on_exit(server: Any) -> None:
    """gunicorn stops: remove the metrics folder it made (one given by the operator stays)."""
    if not _METRICS_GIVEN:
        shutil.rmtree(_METRICS_DIR, ignore_errors=True)


def post_worker_init(worker: Any) -> None:
    """After fork: open this worker's board subscription before the first request."""
    import gc

    from app.services import start_worker

    start_worker(worker.wsgi, alive=lambda: bool(worker.alive))
    # The app's modules and objects live as long as the worker: keep the cyclic collector
    # from walking them again and again (it ran on every few thousand allocations).
    gc.freeze()


def worker_exit(server: Any, worker: Any) -> None:
    """Before a worker goes: write what it coalesced (key uses)."""
    import gc

    from app.services import stop_worker

    stop_worker(worker.wsgi)
    # Undo post_worker_init's gc.freeze(): frozen objects are left to the interpreter's
    # last teardown, after gevent's modules are gone, and a logging handler freed there
    # prints "Exception ignored ... TypeError" at every stop (gevent/gevent#2148's symptom).
    gc.unfreeze()


# gunicorn 24+ opens a control socket at a fixed path by default; two services on one
# machine (or a test run beside a deployment) would fight over it, and we do not use it.
control_socket_disable = True


def post_request(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    """After each request: let the worker's other connections have their turn.

    A keep-alive client whose next request is already waiting would otherwise be served
    again and again without a switch (nothing on a cached path blocks), while the other
    connections of the worker wait: fair turns keep tail latency close to the median.
    """
    import gevent

    gevent.sleep(0)

"""The web app: ``create_app`` builds the Flask app that gunicorn and ``flask run`` serve.

``create_app`` is the only way to build the application; it wires every subsystem in a
visible order and opens no connection (that happens lazily, after gunicorn forks).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from flask import Flask

from app import accounts, api, auth, errors, limits, logs, request_ids, stream
from app.config import load_settings
from app.extensions import SETTINGS_KEY, board_bus, init_db
from app.refresher import embedded

log = logging.getLogger(__name__)


def create_app(config: Mapping[str, object] | None = None) -> Flask:
    """Build the app from ``config`` (variable names as in the environment) or the environment.

    A test passes its whole configuration; the process environment is then not consulted,
    so a developer's own ``REDIS_URL`` cannot leak into a test.
    """
    environ = dict(os.environ) if config is None else {k: str(v) for k, v in config.items()}
    settings = load_settings(environ)

    app = Flask(__name__, instance_relative_config=True)
    # "//" in a path must not become an HTML redirect: every answer is an API answer.
    app.url_map.merge_slashes = False
    app.config.update(SECRET_KEY=settings.secret_key, MAX_CONTENT_LENGTH=64 * 1024)
    app.extensions[SETTINGS_KEY] = settings

    logs.configure_logging(settings)
    request_ids.init_app(app)
    errors.init_app(app)
    init_db(app, settings)
    board_bus.init_app(app)
    embedded.init_app(app)
    accounts.init_app(app)
    auth.init_app(app)
    stream.init_app(app)
    api.init_app(app)
    limits.init_app(app)  # after the blueprints it limits, after auth's identification

    if settings.secret_key_generated:
        log.warning("SECRET_KEY is not set: using a random one for this process only")
    return app

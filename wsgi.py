"""WSGI entry point for gunicorn (``wsgi:app``) and ``flask --app wsgi``.

Building the app does no I/O: connections open lazily in each worker after fork. A bad
setting ends the process with one line and status 2 (``app.config.report_bad_setting``):
flask's CLI and gunicorn would otherwise print the import's traceback.
"""

import sys

from app.config import ConfigError, report_bad_setting
from app.web import create_app

try:
    app = create_app()
except ConfigError as error:
    status = report_bad_setting(error)
    # In a gunicorn worker (gunicorn.conf.py checks in the master, so only under another
    # config file): gunicorn's own "the app failed to load" status stops the master, where
    # any other one would have it boot a worker after another, for ever.
    arbiter = sys.modules.get("gunicorn.arbiter")
    if arbiter is not None:
        status = arbiter.Arbiter.APP_LOAD_ERROR
    raise SystemExit(status) from None

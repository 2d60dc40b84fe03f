"""WSGI entry point for gunicorn (``wsgi:app``) and ``flask --app wsgi``.

Building the app does no I/O: connections open lazily in each worker after fork. A bad
setting ends the process with one line and status 2 (``app.config.report_bad_setting``):
flask's CLI and gunicorn would otherwise print the import's traceback.
"""

from app.config import ConfigError, report_bad_setting
from app.web import create_app

try:
    app = create_app()
except ConfigError as error:
    raise SystemExit(report_bad_setting(error)) from None

"""WSGI entry point for gunicorn (``wsgi:app``) and ``flask --app wsgi``.

Building the app does no I/O: connections open lazily in each worker after fork.
"""

from app.web import create_app

app = create_app()

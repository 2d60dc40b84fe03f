"""Probboard: a read-only board of 5-minute up/down probabilities next to Polymarket prices.

One package, three programs, each importing only what it needs (the root imports nothing):

- the web app: ``app.web.create_app`` (gunicorn: ``wsgi:app``; ``flask --app wsgi run``);
- the refresher: ``python -m app.refresher`` (settings, bus, source, model: no Flask);
- the operator CLI: ``flask --app wsgi users|keys|sessions|db ...``.
"""

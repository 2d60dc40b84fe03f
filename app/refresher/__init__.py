"""The refresher: builds the board from a source every tick and publishes it on the bus.

Its own program is ``python -m app.refresher`` (``__main__.py``): settings, bus, source and
model, no web framework. On ``memory://`` the web process runs it in a thread instead
(``app.embedded_refresher``, wired by ``app.web.create_app``); ``flask --app wsgi refresher``
is the web app's command (``app.commands.refresher``).
"""

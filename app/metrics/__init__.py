"""Prometheus metrics (prometheus_client): what operators watch.

- ``common.py``: series both processes have (Redis errors, Redis fallbacks, database errors).
- ``web.py``: the web process's series (requests, streams, board ages) and the WSGI layer
  that counts every request; gunicorn's workers share them in prometheus_client's
  multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set up by ``gunicorn.conf.py``).
- ``refresher.py``: the refresher's own series, served on its own port.
- ``exposition.py``: the text format for ``GET /metrics`` (every worker's values merged).

Label values are bounded: endpoints, statuses, plans, feeds, reasons; never a key, an address
or an id. Creating a series does no I/O; in multiprocess mode its file appears on first use.
"""

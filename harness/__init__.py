"""What the tests and the benchmarks start or stand in for: never installed with the app.

- ``processes``: our programs (gunicorn, the refresher, ``flask --app wsgi``) and a
  throwaway ``redis-server``, as child processes on free loopback ports, stopped by pid;
- ``databases``: a scratch PostgreSQL database of the caller's own, dropped at the end;
- ``accounts``: users, keys and sessions made with the documented CLI;
- ``fake_polymarket``: the Polymarket upstreams (HTTP and WebSocket) on loopback, a module
  per upstream;
- ``paths``, ``settlement_feed``: seeded spot paths with exact TWAPs for them to play (the
  Brownian one, and a stand-in that moves and arrives like the settlement feed);
- ``tapes``: synthetic tapes of a market on such a path, for backtests;
- ``proxy``: a pausable TCP proxy (a hung or refusing server).

Checks and readers that only the tests need (schema contracts, log capture, the strict SSE
client, request crowds, driving a source) stay in ``tests/support``.
"""

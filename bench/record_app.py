"""The service with its track record never cached: every ``/calibration`` request computes.

``bench.record`` serves this (``bench.record_app:app``) so that a client asking for the
record back to back keeps a computation running in the worker while wrk loads ``/latest``;
the baseline run (without the client) is served by the same app.
"""

from __future__ import annotations

import app.api.calibration as calibration_view
from wsgi import app

calibration_view.MAX_AGE_S = 0

__all__ = ["app"]

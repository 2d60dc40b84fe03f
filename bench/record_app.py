"""The service with its track record never cached: every ``/calibration`` request computes.

``bench.record`` serves this (``bench.record_app:app``) so that a client asking for the
record back to back keeps a computation running in the worker while wrk loads ``/latest``;
the baseline run (without the client) is served by the same app. With
``BENCH_RECORD_ON_HUB=1`` SQLite's query runs on the worker's hub as it did before
``app.calibration.native`` (for the comparison).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import app.api.calibration as calibration_view
from wsgi import app

calibration_view.MAX_AGE_S = 0


def _on_the_hub(job: Callable[[], Any]) -> Any:
    return job()


if os.environ.get("BENCH_RECORD_ON_HUB") == "1":
    setattr(calibration_view, "off_the_hub", _on_the_hub)  # noqa: B010 (not re-exported)

__all__ = ["app"]

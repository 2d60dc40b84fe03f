"""The HTTP endpoints: one blueprint per endpoint of the interface."""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register every endpoint's blueprint."""
    from app.api import (
        alerts,
        calibration,
        health,
        keys_verify,
        latest,
        metrics,
        openapi,
        page,
        stream,
        trail,
        windows,
    )

    app.register_blueprint(health.bp)
    app.register_blueprint(keys_verify.bp)
    app.register_blueprint(latest.bp)
    app.register_blueprint(stream.bp)
    app.register_blueprint(page.bp)
    app.register_blueprint(calibration.bp)
    app.register_blueprint(windows.bp)  # an extension: the record, downloadable
    app.register_blueprint(trail.bp)  # an extension: the page's window chart
    app.register_blueprint(metrics.bp)  # an extension: operators only
    app.register_blueprint(openapi.bp)  # an extension: the OpenAPI document
    app.register_blueprint(alerts.bp)  # an extension: a key holder's alerts (issue 51)

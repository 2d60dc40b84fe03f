"""Tests that run the service as real processes: gunicorn, the refresher, the CLI, a browser."""

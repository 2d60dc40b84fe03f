"""Tests that run in the pytest process: no gunicorn, refresher, CLI, deploy or browser process."""

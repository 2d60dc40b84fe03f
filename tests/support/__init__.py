"""Helpers only the tests need: contract checks, log capture, the strict SSE client, crowds.

What starts processes or fakes a server (shared with bench/) is in the top-level ``harness``.
"""

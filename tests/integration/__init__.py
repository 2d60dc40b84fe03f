"""Tests that run the service as real processes."""

"""Helpers the tests share: real servers started on free loopback ports, and contract checks."""

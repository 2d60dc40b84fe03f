"""The fault suite: real processes and real faults (paused proxies, stopped servers, bursts)."""

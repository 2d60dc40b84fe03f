"""The fault suite: real processes, real faults (paused proxies, stopped and killed servers, bursts)."""

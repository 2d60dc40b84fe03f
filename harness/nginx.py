"""nginx on loopback with the repository's site config (``deploy/nginx-probboard.conf``).

The same upstream block (keepalive, failover to the next host), headers and locations (the
stream's buffering off) as in production; plain HTTP on a free port instead of TLS on 443
(the test clients and load generators speak plain HTTP). ``upstream_ports`` become the
upstream's servers: one per web host.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from harness.processes import ROOT, Process, free_port, port_open

SITE = ROOT / "deploy" / "nginx-probboard.conf"


def site_for(upstream_ports: Sequence[int], port: int) -> str:
    """The repository's site with ``upstream_ports`` as its hosts, on plain HTTP ``port``."""
    site = SITE.read_text()
    found = re.search(r"^    server 127\.0\.0\.1:8000([^;\n]*);\n", site, flags=re.M)
    if found is None:
        raise RuntimeError(f"{SITE} has no 'server 127.0.0.1:8000' line in its upstream")
    options = found.group(1)  # the production line's failover options, for every host
    servers = "\n    ".join(f"server 127.0.0.1:{p}{options};" for p in upstream_ports)
    site = site.replace(found.group(0), "", 1)
    site = site.replace("upstream probboard {\n", f"upstream probboard {{\n    {servers}\n", 1)
    # Only the TLS server, on plain HTTP: drop the :80 redirect and the certificates.
    site = re.sub(r"server \{\s*listen 80;.*?\n\}\n", "", site, count=1, flags=re.S)
    site = re.sub(r"^[ \t]*listen (\[::\]:)?443 ssl http2;\n", "", site, flags=re.M)
    site = re.sub(r"^[ \t]*ssl_certificate(_key)?[ \t]+[^;\n]+;\n", "", site, flags=re.M)
    return site.replace("server_name _;", f"listen 127.0.0.1:{port};\n    server_name _;")


class Nginx:
    """nginx in front of the web hosts on ``upstream_ports``; stopped by its process id."""

    def __init__(self, workdir: Path, upstream_ports: Sequence[int], workers: int = 1) -> None:
        self.port = free_port()
        (workdir / "site.conf").write_text(site_for(upstream_ports, self.port))
        main = workdir / "nginx.conf"
        main.write_text(
            f"pid {workdir / 'nginx.pid'};\nerror_log {workdir / 'nginx-error.log'};\n"
            # One worker (the machine has two cores). It holds two descriptors per stream
            # (client and upstream): on a machine whose hard limit is 20,000 descriptors per
            # process, about 9,900 streams at most; `--nginx-workers 2` doubles that.
            f"worker_processes {workers};\n"
            "events { worker_connections 20000; }\n"
            f"http {{\n access_log off;\n include {workdir / 'site.conf'};\n}}\n"
        )
        self.process = Process(
            ["nginx", "-c", str(main), "-p", str(workdir), "-g", "daemon off;"],
            {"PATH": "/usr/sbin:/usr/bin:/bin"},
            workdir / "nginx.log",
        )
        deadline = time.monotonic() + 10
        while not port_open(self.port):
            if time.monotonic() > deadline or not self.process.alive():
                raise RuntimeError(f"nginx did not start:\n{self.process.output()}")
            time.sleep(0.05)

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop nginx (by its process id)."""
        self.process.stop()

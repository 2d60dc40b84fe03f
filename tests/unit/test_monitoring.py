"""The dashboard and the alert rules in ``deploy/monitoring/``: valid for Prometheus's own
tool (``promtool``), each alert firing when it should in promtool's rule tests, and every
series they read one that Probboard exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY

import app.metrics.common
import app.metrics.refresher
import app.metrics.web
from harness.processes import ROOT

MONITORING = ROOT / "deploy" / "monitoring"
ALERTS = MONITORING / "probboard-alerts.yml"
DASHBOARD = MONITORING / "probboard-dashboard.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool absent (apt-get install prometheus; .ci/run does)"
)
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def exported() -> set[str]:
    """Every series name the web process and the refresher export."""
    assert app.metrics.common and app.metrics.refresher and app.metrics.web  # registered
    names: set[str] = set()
    for family in REGISTRY.collect():
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def dashboard_expressions() -> list[str]:
    """Every query of every panel."""
    board = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def alert_expressions() -> list[str]:
    """Every alert's expression."""
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def promtool(*args: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess[str]:
    """Run promtool; its output."""
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


@needs_promtool
def test_the_alert_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", ALERTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 6 rules found" in result.stdout


@needs_promtool
def test_each_alert_fires_when_it_should_and_not_before() -> None:
    result = promtool("test", "rules", "probboard-alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(
        re.findall(r"alertname: (\w+)", (MONITORING / "probboard-alerts.test.yml").read_text())
    )
    rules = set(re.findall(r"alert: (\w+)", ALERTS.read_text()))
    assert tested == rules, rules - tested


@needs_promtool
def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    # promtool parses expressions in rule files: each query becomes a recording rule.
    rules = [
        {"record": f"probboard:panel_{i}", "expr": e} for i, e in enumerate(dashboard_expressions())
    ]
    (tmp_path / "panels.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "p", "rules": rules}]})
    )
    result = promtool("check", "rules", "panels.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_every_series_read_is_one_probboard_exports(source: str) -> None:
    expressions = alert_expressions() if source == "alerts" else dashboard_expressions()
    names = exported()
    read = {name for expr in expressions for name in re.findall(r"probboard_[a-z_]+", expr)}
    assert read, source
    assert read <= names, sorted(read - names)


def test_the_dashboard_has_the_on_call_panels() -> None:
    titles = [panel["title"] for panel in json.loads(DASHBOARD.read_text())["panels"]]
    for wanted in ("Board age", "Refresher leading", "Requests by status", "Open streams"):
        assert any(title.startswith(wanted) for title in titles), (wanted, titles)

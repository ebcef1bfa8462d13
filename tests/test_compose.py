"""compose.yaml as an operator starts it: the schema upgraded once before the bots, HTTP mode where
ports are mapped, and a healthcheck on /readyz for every bot."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[1] / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
BOTS = {
    name: service
    for name, service in SERVICES.items()
    if service.get("command", [None])[0] in ("serve", "worker")
}


def test_the_schema_is_upgraded_once_before_any_bot_starts():
    (upgrading,) = [
        name for name, service in SERVICES.items() if service.get("command", [])[:2] == ["db", "upgrade"]
    ]

    assert SERVICES[upgrading]["restart"] == "no"
    for service in BOTS.values():
        assert service["depends_on"] == {upgrading: {"condition": "service_completed_successfully"}}


def test_bots_that_map_ports_serve_http_and_every_bot_is_healthy_only_when_ready():
    assert len(BOTS) == 3
    for service in BOTS.values():
        if service.get("ports"):
            assert "--http" in service["command"]
        probe = " ".join(service["healthcheck"]["test"])
        port = (
            service["command"][service["command"].index("--port") + 1]
            if "--port" in service["command"]
            else "9464"
        )
        assert f"http://127.0.0.1:{port}/readyz" in probe

"""broker.example.yaml is valid and documents every field the runner knows."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from pgsql_broker.config import DatabaseConfig
from pgsql_broker.settings import BrokerSettings, LoggingSettings, load

EXAMPLE = Path(__file__).resolve().parents[2] / "broker.example.yaml"


def test_example_config_loads_and_covers_every_field():
    settings = load(EXAMPLE, env={})
    assert settings.databases[0].name == "db1"
    data = yaml.safe_load(EXAMPLE.read_text())
    assert set(data["broker"]) == {f.name for f in dataclasses.fields(BrokerSettings)}
    assert set(data["logging"]) == {f.name for f in dataclasses.fields(LoggingSettings)}
    assert set(data["databases"][0]) == {f.name for f in dataclasses.fields(DatabaseConfig)} - {"raw_dsn"}
    assert dataclasses.asdict(settings.broker) == dataclasses.asdict(BrokerSettings())  # the file shows the defaults

"""Configuration files (YAML or JSON) with the original broker's field names.

Only what the install command needs is read here: the ``databases`` list.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from psycopg.conninfo import make_conninfo


class ConfigError(Exception):
    """A configuration problem; the message names the file and the field."""


@dataclass(frozen=True)
class DatabaseConfig:
    name: str
    database: str
    user: str
    host: str = "localhost"
    port: int = 5432
    password: str | None = None
    sslmode: str = "disable"
    queue_count: int = 4
    tenant_id: str = "default"

    def dsn(self, user: str | None = None, password: str | None = None) -> str:
        return make_conninfo(host=self.host, port=self.port, dbname=self.database, user=user or self.user,
                             password=password if user else (password or self.password), sslmode=self.sslmode)


_REQUIRED = ("name", "database", "user")
_TYPES = {"name": str, "database": str, "user": str, "host": str, "port": int, "password": str, "sslmode": str,
          "queue_count": int, "tenant_id": str}
_IGNORED_HERE = {"max_open_conns", "max_idle_conns", "conn_max_lifetime", "conn_max_idle_time"}


def load_databases(path: str | Path) -> list[DatabaseConfig]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("databases"), list) or not data["databases"]:
        raise ConfigError(f"{path}: field 'databases' must be a non-empty list")
    result, names = [], set()
    for i, entry in enumerate(data["databases"]):
        where = f"{path}: databases[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a mapping")
        for key in _REQUIRED:
            if not entry.get(key):
                raise ConfigError(f"{where}.{key} is required")
        fields = {}
        for key, value in entry.items():
            if key in _IGNORED_HERE:
                continue
            if key not in _TYPES:
                raise ConfigError(f"{where}.{key} is not a known field")
            if value is not None and not isinstance(value, _TYPES[key]) or isinstance(value, bool):
                raise ConfigError(f"{where}.{key} must be {_TYPES[key].__name__}, got {value!r}")
            fields[key] = value
        if fields["name"] in names:
            raise ConfigError(f"{where}.name {fields['name']!r} is used twice")
        names.add(fields["name"])
        result.append(DatabaseConfig(**fields))
    return result

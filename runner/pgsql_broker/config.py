"""Database entries of configuration files (YAML or JSON), with the original broker's field names.

settings.py reads the whole file (broker and logging sections too); every command reads it
through settings.load, so that each checks a file as `start` does.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import yaml
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo


MAX_QUEUE = 1000  # queue numbers are 1..1000 (the extension checks it at enqueue)


class ConfigError(Exception):
    """A configuration problem; the message names the file and the field."""


def parse_duration(text: str) -> float:
    """'90s', '5m', '2h', '7d', '250ms' or a plain number of seconds -> seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip().lower()
    for unit in ("ms", "s", "m", "h", "d"):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return float(text[: -len(unit)]) * units[unit]
    if text.replace(".", "", 1).isdigit():
        return float(text)
    raise ValueError(text)


@dataclass(frozen=True)
class DatabaseConfig:
    name: str
    database: str
    user: str
    # None: what libpq does without them (PGHOST / PGPORT, else the local socket and 5432), as psql does; a TCP
    # default here made logins with local peer authentication fail with "no password supplied"
    host: str | None = None
    port: int | None = None
    password: str | None = None
    sslmode: str = "disable"
    queue_count: int = 4
    max_open_conns: int = 25
    conn_max_lifetime: str = "5m"
    conn_max_idle_time: str = "10m"
    console_dsn: str | None = None  # the console's login (reads jobs, acts); None: the runner's own
    raw_dsn: str | None = None  # when given as a connection string (--dsn)
    # autonomous jobs via 'login': per role, the libpq settings of a login as that role (AUTONOMOUS_LOGIN_KEYS)
    autonomous_logins: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    @classmethod
    def from_dsn(cls, dsn: str, index: int) -> "DatabaseConfig":
        params = conninfo_to_dict(dsn)
        # an empty conninfo (libpq's environment) is named after the database libpq will choose
        name = params.get("dbname") or (libpq_default("dbname") or libpq_default("user") if not params else None)
        return cls(name=name or f"db{index}", database=params.get("dbname") or "",
                   user=params.get("user") or "", raw_dsn=dsn)

    def dsn(self, user: str | None = None, password: str | None = None) -> str:
        if self.raw_dsn is not None:
            return make_conninfo(self.raw_dsn, **({"user": user, "password": password} if user else {}))
        return make_conninfo(host=self.host, port=self.port, dbname=self.database, user=user or self.user,
                             password=password if user else (password or self.password), sslmode=self.sslmode)


# for --help: which connection wins (connection_strings decides it)
DSN_FALLBACK = ("Without --dsn: PGBROKER_DSN (several separated by ';'), else libpq's own environment and "
                "defaults (PGHOST, PGPORT, PGDATABASE, PGUSER, PGSERVICE, ...; the local socket), as psql.")


def connection_strings(flag_dsns: list[str] | tuple[str, ...], env: Mapping[str, str],
                       file_has_databases: bool = False) -> tuple[list[str], str]:
    """The connection strings of the databases a command works on besides a config file's, and where they come
    from (for messages). Flags win over PGBROKER_DSN; with neither, and no config file naming databases, one empty
    conninfo: libpq then reads its own environment (PGHOST, PGDATABASE, PGSERVICE, ...) as psql does."""
    if flag_dsns:
        return list(flag_dsns), "command line: --dsn"
    env_dsns = [d.strip() for d in env.get("PGBROKER_DSN", "").split(";") if d.strip()]
    if env_dsns:
        return env_dsns, "environment: PGBROKER_DSN"
    if file_has_databases:
        return [], ""
    return [""], "libpq environment (PGHOST, PGDATABASE, ...)"


def libpq_default(keyword: str) -> str | None:
    """What libpq takes for `keyword` when a conninfo omits it: its environment variable, else its compiled
    default (None for dbname and host: the user's name, the local socket)."""
    for option in pq.Conninfo.get_defaults():
        if option.keyword.decode() == keyword:
            return option.val.decode() if option.val else None
    return None


_REQUIRED = ("name", "database", "user")
_TYPES = {"name": str, "database": str, "user": str, "host": str, "port": int, "password": str, "sslmode": str,
          "queue_count": int, "max_open_conns": int, "conn_max_lifetime": str, "conn_max_idle_time": str,
          "console_dsn": str, "autonomous_logins": dict}
# Fields of the original broker's configuration that would do nothing here: refused, with what to do instead.
REMOVED = {
    "tenant_id": "the runner serves every tenant of its databases (the SECURITY DEFINER runtime functions); a job's "
                 "tenant is chosen at enqueue (broker_set_tenant or p_tenant_id): delete it",
    "max_idle_conns": "worker connections are kept warm up to max_open_conns and closed after conn_max_idle_time "
                      "or worker_idle_timeout_sec, whichever is shorter: delete it",
}
# what a login for autonomous jobs may set: its credentials, never where it connects or as whom (the role's name)
AUTONOMOUS_LOGIN_KEYS = ("passfile", "service", "password", "sslcert", "sslkey", "sslrootcert", "sslpassword")
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def read_config_file(path: str | Path) -> dict:
    """The parsed YAML or JSON mapping of a config file; every problem is a ConfigError naming the file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file: create it (see broker.example.yaml) or, in a container, "
                          f"mount it there (-v ./broker.yaml:{path}:ro)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {_parse_error(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the file must hold a mapping with databases, broker and logging")
    return data


def _parse_error(exc: Exception) -> str:
    """A parser's error as one line: YAML's problem and where (its message spans lines, with a snippet)."""
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem and mark is not None:
        return f"{exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(exc).split())


def parse_databases(entries: object, where: str) -> list[DatabaseConfig]:
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{where}: field 'databases' must be a non-empty list")
    result, names = [], set()
    for i, entry in enumerate(entries):
        label = f"{where}: databases[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{label} must be a mapping")
        for key in _REQUIRED:
            if not entry.get(key):
                raise ConfigError(f"{label}.{key} is required")
        fields = {}
        for key, value in entry.items():
            if key in REMOVED:
                raise ConfigError(f"{label}.{key} is not a setting any more: {REMOVED[key]}")
            if key not in _TYPES:
                raise ConfigError(f"{label}.{key} is not a known field")
            if value is None:  # null: the default (host and port: libpq's)
                continue
            if not isinstance(value, _TYPES[key]) or isinstance(value, bool):
                raise ConfigError(f"{label}.{key} must be {_TYPES[key].__name__}, got {value!r}")
            fields[key] = value
        if fields.get("queue_count", 1) < 1:
            raise ConfigError(f"{label}.queue_count must be >= 1, got {fields['queue_count']!r}")
        if fields.get("queue_count", 1) > MAX_QUEUE:
            raise ConfigError(f"{label}.queue_count must be <= {MAX_QUEUE} (queue numbers are 1..{MAX_QUEUE}), "
                              f"got {fields['queue_count']!r}")
        if not 0 < fields.get("port", 5432) < 65536:
            raise ConfigError(f"{label}.port must be a TCP port, got {fields['port']!r}")
        for key in ("conn_max_lifetime", "conn_max_idle_time"):
            if key in fields:
                try:
                    parse_duration(fields[key])
                except ValueError:
                    raise ConfigError(f"{label}.{key} must be a duration like 90s, 5m or 1h, got {fields[key]!r}") from None
        if fields.get("max_open_conns", 25) < 2:
            raise ConfigError(f"{label}.max_open_conns must be at least 2 (the session connection and one worker "
                              f"connection), got {fields.get('max_open_conns')!r}")
        if fields.get("sslmode", "disable") not in _SSLMODES:
            raise ConfigError(f"{label}.sslmode must be one of {', '.join(_SSLMODES)}, got {fields['sslmode']!r}")
        if "autonomous_logins" in fields:
            fields["autonomous_logins"] = _autonomous_logins(fields["autonomous_logins"], f"{label}.autonomous_logins")
        if fields["name"] in names:
            raise ConfigError(f"{label}.name {fields['name']!r} is used twice")
        names.add(fields["name"])
        result.append(DatabaseConfig(**fields))
    return result


def _autonomous_logins(value: dict, label: str) -> tuple:
    """{role: {passfile: ..., service: ...}} -> ((role, ((key, value), ...)), ...), every problem a ConfigError."""
    result = []
    for role, login in value.items():
        if not isinstance(role, str) or not role or not isinstance(login, dict) or not login:
            raise ConfigError(f"{label}: each entry maps a role name to its login settings, "
                              f"e.g. etl: {{passfile: /etc/pgsql-broker/etl.pgpass}}; got {role!r}: {login!r}")
        for key, item in login.items():
            if key not in AUTONOMOUS_LOGIN_KEYS:
                raise ConfigError(f"{label}.{role}.{key} is not a login setting (one of {', '.join(AUTONOMOUS_LOGIN_KEYS)}; "
                                  f"the runner connects to the database's host, port and dbname as {role} itself)")
            if not isinstance(item, str) or not item:
                raise ConfigError(f"{label}.{role}.{key} must be a non-empty string, got {item!r}")
        result.append((role, tuple(sorted(login.items()))))
    return tuple(result)

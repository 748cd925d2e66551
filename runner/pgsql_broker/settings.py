"""Runner settings with the original broker's names and defaults.

Sources, later ones winning: the config file (YAML or JSON), environment
variables, command-line flags. Every error names the field and where it came from.

Environment variables: PGBROKER_<FIELD> for the ``broker`` section (for example
PGBROKER_LEASE_SECONDS, PGBROKER_METRICS_PORT), PGBROKER_LOG_LEVEL and
PGBROKER_LOG_FORMAT for ``logging``, PGBROKER_DSN (one or more libpq
connection strings separated by ';') for databases when no --dsn is given (with neither, and no
databases in the file, libpq's own environment: config.connection_strings), and PGBROKER_<FIELD> of the
per-database fields (PGBROKER_QUEUE_COUNT, PGBROKER_MAX_OPEN_CONNS, ...) for the databases
given as connection strings. Any other PGBROKER_* variable is refused (but PGBROKER_TEST_*, the test suite's). A connection string carries
host, port, database, user, password and sslmode itself.
"""
from __future__ import annotations

import dataclasses
import re
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict

from .config import (MAX_QUEUE, REMOVED, ConfigError, DatabaseConfig, connection_strings, parse_databases, parse_duration,
                     read_config_file)
from .observe import tracing
from .tasks.loading import check_spec


@dataclass
class BrokerSettings:
    name: str = "pgsql-broker"
    fetch_query_que_size: int = 100
    queue_timer_sec: float = 10
    queue_buffer_size: int = 50
    worker_idle_timeout_sec: float = 10
    notify_retry_seconds: float = 30
    enable_debug: bool = False
    lease_seconds: int = 60
    stale_job_recovery_sec: float = 30
    metrics_enabled: bool = True
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9469
    dashboard_public: bool = False
    console_token: str = field(default="", repr=False)  # no default token: without one the console is read-only
    queue_depth_poll_sec: float = 15
    shutdown_timeout_sec: float = 30
    allow_privileged_login: bool = False
    # workers per queue (each a connection while it has work), and per-queue overrides: "3=4,7=1"
    workers_per_queue: int = 2
    queue_workers: str = ""
    # queues whose jobs each run in a transaction of their own (known to be long): "5,6"
    one_job_per_transaction_queues: str = ""
    # a transaction of several jobs: no job waits for its commit much longer (broker_run_batch p_budget)
    batch_budget_ms: int = 200
    # worker and session connections of the runner to one server at most (0: half of what the server gives
    # logins without superuser; run/server_share.py)
    max_open_conns_total: int = 0
    # when the databases outnumber the session connections that cap allows, they take turns (run/rota.py):
    # a waiting database gets a visit about this often
    parked_visit_sec: float = 10
    # retention (run/retention.py): finished jobs older than the age of their final state are purged
    retention_enabled: bool = True
    retention_completed_after: str = "7d"
    retention_failed_after: str = "30d"
    retention_cancelled_after: str = "30d"
    retention_batch_size: int = 1000
    retention_interval_sec: float = 300
    # faults (run/connections.py, run/database.py): what notices a dead or stalled connection, each libpq
    # parameter unless a database's DSN sets its own; and how long a refusal is waited out
    tcp_keepalives_idle_sec: int = 10
    tcp_keepalives_interval_sec: int = 5
    tcp_keepalives_count: int = 3
    tcp_user_timeout_ms: int = 30000
    connect_timeout_sec: int = 10
    statement_deadline_sec: float = 30
    refusal_retry_sec: float = 0
    # traces (observe/tracing.py, the extra `otel`): a span per attempt, exported over OTLP/HTTP to
    # traces_endpoint (the OTLP base URL; empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT,
    # else http://localhost:4318)
    traces_enabled: bool = False
    traces_endpoint: str = ""
    traces_service_name: str = "pgsql-broker"
    # tasks (docs/tasks.md): a pgsql_broker.tasks.Worker ("module:attribute") run in the runner's process, logged
    # in with tasks_dsn (a broker_worker login; empty: the Worker's own dsn, else the one database's)
    tasks_app: str = ""
    tasks_dsn: str = field(default="", repr=False)


@dataclass
class LoggingSettings:
    level: str = "info"
    format: str = "json"


@dataclass
class Settings:
    databases: list[DatabaseConfig] = field(default_factory=list)
    broker: BrokerSettings = field(default_factory=BrokerSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)


_MINIMUM = {"fetch_query_que_size": 1, "queue_timer_sec": 0.05, "queue_buffer_size": 1, "worker_idle_timeout_sec": 0.1,
            "notify_retry_seconds": 0.1, "lease_seconds": 1, "stale_job_recovery_sec": 0.1, "metrics_port": 0,
            "queue_depth_poll_sec": 0.1, "shutdown_timeout_sec": 0, "workers_per_queue": 1, "batch_budget_ms": 10,
            "max_open_conns_total": 0, "parked_visit_sec": 0.5, "retention_batch_size": 1,
            "retention_interval_sec": 1, "tcp_keepalives_idle_sec": 1, "tcp_keepalives_interval_sec": 1,
            "tcp_keepalives_count": 1, "tcp_user_timeout_ms": 0, "connect_timeout_sec": 2, "statement_deadline_sec": 10,
            "refusal_retry_sec": 0}
_MAXIMUM = {"workers_per_queue": (64, "at most 64 workers per queue"),
            "batch_budget_ms": (600_000, "a budget is meant to be short: at most 600000 (10 minutes)")}
MIN_TOKEN_CHARS = 16  # the console token (broker.console_token)
_LEVELS = ("debug", "info", "warning", "error")
_BROKER_FIELDS = {f.name for f in dataclasses.fields(BrokerSettings)}
_FORMATS = ("json", "text")
_TEST_PREFIX = "PGBROKER_TEST_"  # the test suite's own variables (.ci/with-cluster), not settings


def _coerce(section: str, name: str, value: Any, kind: type, where: str) -> Any:
    label = f"{where}: {section}.{name}"
    if isinstance(value, str) and kind is not str:
        text = value.strip().lower()
        try:
            if kind is bool:
                if text not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                value = text in ("1", "true", "yes", "on")
            else:
                value = kind(text)
        except ValueError:
            raise ConfigError(f"{label} must be {kind.__name__}, got {value!r}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(f"{label} must be {kind.__name__}, got {value!r}")
    if name in _MINIMUM and value < _MINIMUM[name]:
        raise ConfigError(f"{label} must be >= {_MINIMUM[name]}, got {value!r}")
    if name in _MAXIMUM and value > _MAXIMUM[name][0]:
        raise ConfigError(f"{label} must be <= {_MAXIMUM[name][0]} ({_MAXIMUM[name][1]}), got {value!r}")
    if name == "queue_workers":
        parse_queue_workers(value, label)
    if name == "one_job_per_transaction_queues":
        parse_queue_list(value, label)
    if name == "tasks_app" and value:
        try:
            check_spec(value)
        except ValueError as exc:
            raise ConfigError(f"{label} {exc}") from None
    if name == "lease_seconds" and value > 3600:
        raise ConfigError(f"{label} must be <= 3600 (broker_get caps leases at an hour), got {value!r}")
    if name == "console_token" and value:
        console_users(value, label)
    if name.startswith("retention_") and name.endswith("_after") and value.strip().lower() != "never":
        try:
            parse_duration(value)
        except ValueError:
            raise ConfigError(f"{label} must be an age like 90m, 12h or 7d, or never, got {value!r}") from None
    if name == "retention_batch_size" and value > 100_000:
        raise ConfigError(f"{label} must be <= 100000 (one purge transaction each), got {value!r}")
    if name == "metrics_port" and value > 65535:
        raise ConfigError(f"{label} must be a TCP port (0-65535), got {value!r}")
    if section == "logging" and name == "level" and value.lower() not in _LEVELS:
        raise ConfigError(f"{label} must be one of {', '.join(_LEVELS)}, got {value!r}")
    if section == "logging" and name == "format" and value.lower() not in _FORMATS:
        raise ConfigError(f"{label} must be json or text, got {value!r}")
    return value.lower() if section == "logging" else value


_CONSOLE_USER = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")


def console_users(text: str, label: str = "broker.console_token") -> dict[str, str]:
    """The console's accounts: 'alice:TOKEN1,bob:TOKEN2' -> {TOKEN1: 'alice', TOKEN2: 'bob'}; a token alone is the
    account 'console'. Each token at least MIN_TOKEN_CHARS characters; a name 1 to 64 of A-Z a-z 0-9 . _ @ -. The
    name signs what its holder does in the console (the jobs' reasons)."""
    users: dict[str, str] = {}
    for item in text.split(","):
        name, sep, token = item.partition(":")
        if not sep:
            name, token = "console", item
        if not _CONSOLE_USER.match(name) or len(token) < MIN_TOKEN_CHARS or token != token.strip() or token in users:
            raise ConfigError(f"{label} must be at least {MIN_TOKEN_CHARS} characters without surrounding spaces, or "
                              f"NAME:TOKEN pairs separated by commas (names of A-Z a-z 0-9 . _ @ -, tokens each so and "
                              f"different) (for example: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')")
        users[token] = name
    return users


def _queue_number(text: str, label: str, example: str) -> int:
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_QUEUE:
        raise ConfigError(f"{label}: {text!r} is not a queue number (1-{MAX_QUEUE}); write it like {example!r}")
    return int(text)


def parse_queue_workers(text: str, label: str = "broker.queue_workers") -> dict[int, int]:
    """'3=4,7=1' -> {3: 4, 7: 1}: workers of those queues (overrides workers_per_queue)."""
    result: dict[int, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        queue, sep, count = item.partition("=")
        if not sep or not (count.strip().isascii() and count.strip().isdigit()) or not 1 <= int(count) <= 64:
            raise ConfigError(f"{label}: {item!r} must be QUEUE=WORKERS with 1-64 workers, like '3=4,7=1'")
        result[_queue_number(queue, label, "3=4,7=1")] = int(count)
    return result


def parse_queue_list(text: str, label: str = "broker.one_job_per_transaction_queues") -> set[int]:
    """'5,6' -> {5, 6}."""
    return {_queue_number(item, label, "5,6") for item in text.split(",") if item.strip()}


def _apply(target: Any, section: str, values: Mapping[str, Any], where: str) -> None:
    kinds = {f.name: f.type for f in dataclasses.fields(target)}
    types = {"str": str, "int": int, "float": float, "bool": bool}
    for name, value in values.items():
        if name not in kinds:
            raise ConfigError(f"{where}: {section}.{name} is not a known field")
        if value is None:
            continue
        setattr(target, name, _coerce(section, name, value, types[kinds[name]], where))


def _check_traces(broker: BrokerSettings) -> None:
    if broker.traces_endpoint and not re.match(r"^https?://[^/\s]+", broker.traces_endpoint):
        raise ConfigError(f"broker.traces_endpoint must be an http:// or https:// URL (the OTLP base URL, like "
                          f"http://collector:4318), got {broker.traces_endpoint!r}")
    if not broker.traces_service_name.strip():
        raise ConfigError("broker.traces_service_name must not be blank")
    if broker.traces_enabled and not tracing.installed():
        raise ConfigError(f"broker.traces_enabled is true but OpenTelemetry is not installed: {tracing.EXTRA}")


def load(config_path: str | Path | None = None, env: Mapping[str, str] | None = None,
         flags: Mapping[str, Any] | None = None, dsns: list[str] | None = None) -> Settings:
    """Build the settings: file, then environment, then flags (None values are 'not given')."""
    env = os.environ if env is None else env
    settings = Settings()
    if config_path:
        path = Path(config_path)
        data = read_config_file(path)
        unknown = set(data) - {"databases", "broker", "logging"}
        if unknown:
            raise ConfigError(f"{path}: {sorted(unknown)[0]} is not a known section")
        for section in ("broker", "logging"):
            if data.get(section) is not None:
                if not isinstance(data[section], dict):
                    raise ConfigError(f"{path}: {section} must be a mapping")
                _apply(getattr(settings, section), section, data[section], str(path))
        if data.get("databases") is not None:
            settings.databases = parse_databases(data["databases"], str(path))

    prefix = "PGBROKER_"
    broker_env = {f.name: env[prefix + f.name.upper()] for f in dataclasses.fields(BrokerSettings)
                  if prefix + f.name.upper() in env}
    _apply(settings.broker, "broker", broker_env, "environment (PGBROKER_*)")
    log_env = {k: env[prefix + "LOG_" + k.upper()] for k in ("level", "format") if prefix + "LOG_" + k.upper() in env}
    _apply(settings.logging, "logging", log_env, "environment (PGBROKER_LOG_*)")

    flags = dict(flags or {})
    _apply(settings.logging, "logging", {k: flags.pop(k, None) for k in ("level", "format")}, "command line")
    _apply(settings.broker, "broker", {k: flags.pop(k) for k in list(flags) if k in _BROKER_FIELDS}, "command line")

    db_fields = {"queue_count": int, "max_open_conns": int, "conn_max_lifetime": str, "conn_max_idle_time": str}
    db_values: dict[str, Any] = {}
    for name, kind in db_fields.items():
        for where, value in (("environment (PGBROKER_*)", env.get(prefix + name.upper())),
                             ("command line", flags.pop(name, None))):
            if value is not None:
                try:
                    db_values[name] = kind(value)
                except ValueError:
                    raise ConfigError(f"{where}: databases.{name} must be {kind.__name__}, got {value!r}") from None
    known = ({prefix + f.name.upper() for f in dataclasses.fields(BrokerSettings)} | {prefix + "DSN"}
             | {prefix + "LOG_LEVEL", prefix + "LOG_FORMAT"} | {prefix + name.upper() for name in db_fields})
    unknown = sorted(k for k in env if k.startswith(prefix) and k not in known and not k.startswith(_TEST_PREFIX))
    removed = [name for name in REMOVED if prefix + name.upper() in unknown]
    if removed:
        raise ConfigError(f"environment: {prefix + removed[0].upper()} is not a setting any more: {REMOVED[removed[0]]}")
    if unknown:
        raise ConfigError(f"environment: {unknown[0]} is not a known variable (PGBROKER_<setting>: see "
                          "`pgbroker-runner --help` and docs/runner.md)")
    chosen, where = connection_strings(dsns or [], env, file_has_databases=bool(settings.databases))
    for index, dsn in enumerate(chosen):
        try:
            db = DatabaseConfig.from_dsn(dsn, index)
        except psycopg.ProgrammingError as exc:  # its message quotes the keyword at fault, never the value
            raise ConfigError(f"{where}: not a valid connection string: {' '.join(str(exc).split())}") from None
        if db_values:  # checked like a config file entry (user and database come from the DSN or libpq)
            checked = parse_databases([{"name": db.name, "database": db.database or "-", "user": db.user or "-",
                                        **db_values}], "command line / environment")[0]
            db = dataclasses.replace(db, **{k: getattr(checked, k) for k in db_values})
        if db.name in {d.name for d in settings.databases}:  # same database name on another server
            params = conninfo_to_dict(dsn)
            db = dataclasses.replace(db, name=f"{db.name}@{params.get('host', '')}:{params.get('port', '')}")
        settings.databases.append(db)
    if flags:
        raise ConfigError(f"command line: {sorted(flags)[0]} is not a known setting")
    names = [db.name for db in settings.databases]
    if len(set(names)) != len(names):
        raise ConfigError(f"databases: name {next(n for n in names if names.count(n) > 1)!r} is used twice")
    budget_ms, lease_seconds = settings.broker.batch_budget_ms, settings.broker.lease_seconds
    if budget_ms * 2 >= lease_seconds * 1000:  # a claimed job waits in a worker up to twice the budget: unrenewed
        raise ConfigError(f"broker.batch_budget_ms must be below half of broker.lease_seconds ({lease_seconds} s), "
                          f"got {budget_ms}: jobs waiting in a worker's claim would outlive their lease and "
                          "lease recovery would fail them")
    _check_traces(settings.broker)
    total = settings.broker.max_open_conns_total
    if total == 1:
        raise ConfigError("broker.max_open_conns_total must be 0 (half of the server's) or at least 2 (a session connection and a "
                          "worker connection), got 1")
    return settings

"""Runner configuration: file < environment < flags, and every invalid field is named with its source."""
from __future__ import annotations

import subprocess
import sys

import pytest

from pgsql_broker.config import ConfigError
from pgsql_broker.settings import load

YAML = """
databases:
  - name: main
    host: db.internal
    port: 6432
    database: app
    user: broker_runtime
    password: secret
    queue_count: 3
    max_open_conns: 10
broker:
  name: from-file
  lease_seconds: 30
  queue_timer_sec: 5
  metrics_port: 9100
logging:
  level: warning
  format: text
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "broker.yaml"
    path.write_text(YAML)
    return path


def test_defaults_are_the_original_brokers():
    s = load(env={}, dsns=["dbname=x"])
    b = s.broker
    assert (b.name, b.fetch_query_que_size, b.queue_timer_sec, b.queue_buffer_size, b.worker_idle_timeout_sec,
            b.notify_retry_seconds, b.enable_debug, b.lease_seconds, b.stale_job_recovery_sec, b.metrics_enabled,
            b.metrics_host, b.metrics_port, b.queue_depth_poll_sec) == (
        "pgsql-broker", 100, 10, 50, 10, 30, False, 60, 30, True, "127.0.0.1", 9469, 15)  # loopback, not 0.0.0.0
    assert b.dashboard_public is False
    assert (s.logging.level, s.logging.format) == ("info", "json")
    assert s.databases[0].queue_count == 4


def test_file_then_environment_then_flags(config):
    s = load(config, env={})
    assert (s.broker.name, s.broker.lease_seconds, s.broker.queue_timer_sec, s.logging.level) == ("from-file", 30, 5, "warning")
    db = s.databases[0]
    assert (db.name, db.host, db.port, db.database, db.user, db.queue_count) == ("main", "db.internal", 6432, "app",
                                                                                "broker_runtime", 3)
    s = load(config, env={"PGBROKER_LEASE_SECONDS": "45", "PGBROKER_NAME": "from-env", "PGBROKER_LOG_LEVEL": "debug",
                          "PGBROKER_METRICS_ENABLED": "false"})
    assert (s.broker.name, s.broker.lease_seconds, s.broker.queue_timer_sec, s.logging.level,
            s.broker.metrics_enabled) == ("from-env", 45, 5, "debug", False)
    s = load(config, env={"PGBROKER_LEASE_SECONDS": "45"}, flags={"lease_seconds": 90, "queue_timer_sec": None,
                                                                  "level": "error"})
    assert (s.broker.lease_seconds, s.broker.queue_timer_sec, s.logging.level) == (90, 5, "error")


def test_dsns_from_flags_or_environment():
    s = load(env={"PGBROKER_DSN": "dbname=a host=h1; dbname=b host=h2"})
    assert [d.name for d in s.databases] == ["a", "b"]
    s = load(env={"PGBROKER_DSN": "dbname=a"}, dsns=["dbname=c", "dbname=c host=other"])
    assert [d.name for d in s.databases] == ["c", "c@other:"]


@pytest.mark.parametrize("text, message", [
    ("broker:\n  lease_seconds: soon\n", "broker.lease_seconds must be int, got 'soon'"),
    ("broker:\n  lease_seconds: 0\n", "broker.lease_seconds must be >= 1, got 0"),
    ("broker:\n  metrics_port: 70000\n", "broker.metrics_port must be a TCP port"),
    ("broker:\n  enable_debug: maybe\n", "broker.enable_debug must be bool, got 'maybe'"),
    ("broker:\n  colour: blue\n", "broker.colour is not a known field"),
    ("logging:\n  format: xml\n", "logging.format must be json or text, got 'xml'"),
    ("logging:\n  level: loud\n", "logging.level must be one of debug, info, warning, error, got 'loud'"),
    ("surprise: 1\n", "surprise is not a known section"),
    ("databases:\n  - name: a\n    database: d\n", "databases[0].user is required"),
    ("databases:\n  - {name: a, database: d, user: u, queue_count: 0}\n", "databases[0].queue_count must be >= 1"),
    ("databases:\n  - {name: a, database: d, user: u, sslmode: sometimes}\n", "databases[0].sslmode must be one of"),
    ("databases:\n  - {name: a, database: d, user: u, port: '5432'}\n", "databases[0].port must be int"),
    ("databases:\n  - {name: a, database: d, user: u}\n  - {name: a, database: e, user: u}\n",
     "databases[1].name 'a' is used twice"),
    ("databases: [\n", "not valid YAML"),
    ("databases:\n  - {name: a, database: d, user: u, conn_max_lifetime: forever}\n",
     "databases[0].conn_max_lifetime must be a duration like 90s, 5m or 1h, got 'forever'"),
    ("databases:\n  - {name: a, database: d, user: u, queue_count: 8, max_open_conns: 1}\n",
     "databases[0].max_open_conns must be at least 2 (the session connection and one worker connection), got 1"),
])
def test_every_invalid_field_is_named_with_its_file(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text + ("" if "databases" in text else "databases:\n  - {name: a, database: d, user: u}\n"))
    with pytest.raises(ConfigError) as err:
        load(path, env={})
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_environment_and_flag_errors_name_their_source():
    with pytest.raises(ConfigError, match=r"environment \(PGBROKER_\*\): broker.queue_timer_sec must be float"):
        load(env={"PGBROKER_QUEUE_TIMER_SEC": "often"}, dsns=["dbname=x"])



def test_without_dsn_pgbroker_dsn_then_libpq_environment():
    """--dsn wins over PGBROKER_DSN; with neither (and no file naming databases) one empty conninfo: libpq reads
    its own environment (PGHOST, PGDATABASE, ...)."""
    assert [d.raw_dsn for d in load(env={"PGBROKER_DSN": "dbname=a; dbname=b"}, dsns=["dbname=c"]).databases] == ["dbname=c"]
    assert [d.raw_dsn for d in load(env={"PGBROKER_DSN": "dbname=a; dbname=b"}).databases] == ["dbname=a", "dbname=b"]
    assert [d.raw_dsn for d in load(env={}).databases] == [""]


def test_cli_config_errors_exit_2_and_name_the_field(tmp_path):
    path = tmp_path / "broker.yaml"
    path.write_text("databases:\n  - {name: a, database: d, user: u}\nbroker:\n  lease_seconds: -1\n")
    result = subprocess.run([sys.executable, "-m", "pgsql_broker", "start", "--config", str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and f"{path}: broker.lease_seconds must be >= 1" in result.stderr
    result = subprocess.run([sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                             "--lease-seconds", "x"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--lease-seconds" in result.stderr


def test_database_fields_from_environment_and_flags_for_dsn_databases():
    s = load(env={"PGBROKER_DSN": "dbname=a", "PGBROKER_QUEUE_COUNT": "2", "PGBROKER_CONN_MAX_IDLE_TIME": "1m"},
             flags={"queue_count": 6, "conn_max_lifetime": "1h"})
    db = s.databases[0]
    assert (db.queue_count, db.conn_max_idle_time, db.conn_max_lifetime) == (6, "1m", "1h")
    with pytest.raises(ConfigError, match="command line / environment: databases\\[0\\].max_open_conns must be at least"):
        load(env={}, dsns=["dbname=a"], flags={"max_open_conns": 1})
    with pytest.raises(ConfigError, match=r"environment \(PGBROKER_\*\): databases.queue_count must be int"):
        load(env={"PGBROKER_QUEUE_COUNT": "many"}, dsns=["dbname=a"])


def test_workers_budget_and_connection_caps_are_validated_with_one_line_errors():
    s = load(env={"PGBROKER_WORKERS_PER_QUEUE": "3", "PGBROKER_QUEUE_WORKERS": "1=4, 7=1"}, dsns=["dbname=a"],
             flags={"one_job_per_transaction_queues": "5,6", "batch_budget_ms": 500, "max_open_conns_total": 2})
    assert (s.broker.workers_per_queue, s.broker.queue_workers, s.broker.one_job_per_transaction_queues,
            s.broker.batch_budget_ms, s.broker.max_open_conns_total) == (3, "1=4, 7=1", "5,6", 500, 2)
    bad = [({"queue_workers": "3=x"}, "broker.queue_workers: '3=x' must be QUEUE=WORKERS with 1-64 workers"),
           ({"queue_workers": "1001=2"}, "broker.queue_workers: '1001' is not a queue number (1-1000)"),
           ({"one_job_per_transaction_queues": "five"}, "'five' is not a queue number (1-1000)"),
           ({"workers_per_queue": 0}, "broker.workers_per_queue must be >= 1, got 0"),
           ({"workers_per_queue": 65}, "broker.workers_per_queue must be <= 64"),
           ({"batch_budget_ms": 5}, "broker.batch_budget_ms must be >= 10, got 5"),
           # a claimed job may wait in a worker for up to twice the budget: its lease must outlast that
           ({"batch_budget_ms": 30_000, "lease_seconds": 60}, "broker.batch_budget_ms must be below half of "
                                                              "broker.lease_seconds (60 s), got 30000"),
           ({"max_open_conns_total": 1}, "broker.max_open_conns_total must be 0 (half of the server's) or at least "
                                         "2 (a session connection and a worker connection), got 1"),
           ({"parked_visit_sec": 0.1}, "broker.parked_visit_sec must be >= 0.5, got 0.1")]
    for flags, message in bad:
        with pytest.raises(ConfigError) as err:
            load(env={}, dsns=["dbname=a", "dbname=b"], flags=flags)
        assert message in str(err.value) and "\n" not in str(err.value), (flags, str(err.value))
    # two databases and a cap of 2: they take turns on one session slot (run/rota.py), no error
    assert load(env={}, dsns=["dbname=a", "dbname=b"], flags={"max_open_conns_total": 2}).broker.max_open_conns_total == 2


def test_a_bad_worker_setting_is_a_usage_error_of_the_command(tmp_path):
    result = subprocess.run([sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                             "--dsn", "dbname=a", "--queue-workers", "1=0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "broker.queue_workers: '1=0' must be QUEUE=WORKERS" in result.stderr
    assert "Traceback" not in result.stderr

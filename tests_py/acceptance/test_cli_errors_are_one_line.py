"""Every CLI error is one line naming the flag or field, exit code 2 for usage and 1 for failure, never a
traceback; the runner ends (1, one line) on what no retry heals and keeps retrying what can heal."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from conftest import connect, dsn
from pgsql_broker.run.connect_errors import PERMANENT_TRIES
from runner_process import db_dsn
from tenant_logins import enqueue_as, tenant_logins

CLI = [sys.executable, "-m", "pgsql_broker"]
RUNNER = [sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()"]


def run(args: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=timeout)


def error_line(result: subprocess.CompletedProcess, code: int) -> str:
    """The one line of stderr that is the error (click adds its usage lines above a usage error)."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if code == 2:
        assert all(line.startswith(("Usage: ", "Try '", "Error: ")) for line in lines), result.stderr
        lines = [line for line in lines if line.startswith("Error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("command", [[*CLI, "status"], [*CLI, "install"], [*CLI, "start"], RUNNER],
                         ids=["status", "install", "start", "pgbroker-runner"])
def test_a_malformed_dsn_is_a_usage_error_naming_the_flag(command):
    line = error_line(run([*command, "--dsn", "dbname=x user"]), 2)
    assert "--dsn" in line and 'missing "=" after "user"' in line


def test_a_malformed_pgbroker_dsn_names_the_variable():
    line = error_line(run(RUNNER, env=os.environ | {"PGBROKER_DSN": "dbname=x user"}), 2)
    assert "PGBROKER_DSN" in line and "not a valid connection string" in line


def test_an_unknown_host_names_the_host_and_the_flag():
    line = error_line(run([*CLI, "status", "--dsn", "host=nohost.invalid dbname=x connect_timeout=5"]), 1)
    assert "nohost.invalid" in line and "--dsn" in line


def test_an_address_in_use_names_the_address_and_the_settings(db):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = error_line(run([*RUNNER, "--dsn", db_dsn(db), "--allow-privileged-login", "--metrics-host",
                               "127.0.0.1", "--metrics-port", str(port)], timeout=60), 1)
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--metrics-port" in line and "in use" in line


@pytest.mark.parametrize("command", [RUNNER, [*CLI, "status"], [*CLI, "install"]], ids=["pgbroker-runner", "status", "install"])
def test_a_config_file_that_is_not_yaml_is_one_line_naming_the_file_and_the_line(tmp_path, command):
    config = tmp_path / "broker.yaml"
    config.write_text("databases:\n  - name: a\n   database: a\n")  # one space short
    line = error_line(run([*command, "--config", str(config)]), 2)
    assert f"{config}: not valid YAML" in line and "line 3" in line


def test_unknown_pgbroker_variables_are_refused_like_unknown_yaml_keys():
    line = error_line(run(RUNNER, env=os.environ | {"PGBROKER_DSN": "dbname=x", "PGBROKER_LEASE_SECS": "3"}), 2)
    assert "PGBROKER_LEASE_SECS is not a known variable" in line


@pytest.mark.parametrize("where", ["yaml", "environment", "flag"])
@pytest.mark.parametrize("field", ["tenant_id", "max_idle_conns"])
def test_settings_that_did_nothing_are_refused_with_what_to_do(tmp_path, field, where):
    value = "acme" if field == "tenant_id" else "5"
    env, args = dict(os.environ), [*RUNNER]
    if where == "yaml":
        config = tmp_path / "broker.yaml"
        config.write_text(f"databases:\n  - name: a\n    database: a\n    user: u\n    {field}: {value}\n")
        args += ["--config", str(config)]
    elif where == "environment":
        env |= {"PGBROKER_DSN": "dbname=a", f"PGBROKER_{field.upper()}": value}
    else:
        args += ["--dsn", "dbname=a", f"--{field.replace('_', '-')}", value]
    line = error_line(run(args, env=env), 2)
    if where == "flag":
        assert f"No such option '--{field.replace('_', '-')}'" in line
    else:
        assert "is not a setting any more" in line and field in line.lower() and "delete it" in line
    help_text = run([*RUNNER, "--help"]).stdout
    assert "--tenant-id" not in help_text and "--max-idle-conns" not in help_text


def test_status_on_a_database_without_the_broker_says_to_install(empty_db):
    line = error_line(run([*CLI, "status", "--dsn", dsn(empty_db)]), 1)
    assert "pgsql_broker is not installed in this database: run pgsql-broker install" in line


def test_status_for_an_enqueue_login_shows_its_own_tenants(db):
    with tenant_logins(db, {"alice": "acme", "bob": "other"}) as names:
        enqueue_as(db, names["alice"], "acme", "alice's job", "SELECT 1")
        enqueue_as(db, names["bob"], "other", "bob's job", "SELECT 1")
        result = run([*CLI, "status", "--dsn", db_dsn(db, names["alice"])])
        assert result.returncode == 0, result.stderr
        assert "instances: not readable by this login" in result.stdout
        rows = [line.split() for line in result.stdout.splitlines() if line.strip()[:1].isdigit()]
        assert [(r[0], r[1], r[2]) for r in rows] == [("1", "acme", "1")], result.stdout  # queue 1, 1 ready
        runtime = run([*CLI, "status", "--dsn", db_dsn(db, names["runner"])])
        assert runtime.returncode == 0 and "acme" in runtime.stdout and "other" in runtime.stdout, runtime.stdout


def _runner(database_dsn: str, *extra: str) -> str:
    """The runner's last line, its error (the lines above are its log: each try a warning, no traceback)."""
    result = run([*RUNNER, "--dsn", database_dsn, "--no-metrics", "--log-format", "text", *extra], timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, (result.returncode, result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: database "), result.stderr
    return last


def test_the_runner_ends_on_a_missing_database_after_bounded_tries():
    line = _runner(db_dsn(f"missing_{uuid.uuid4().hex[:8]}"), "--allow-privileged-login")
    assert "does not exist" in line and "gave up after 3 tries" in line


def test_the_runner_ends_on_a_login_that_does_not_exist():
    line = _runner(db_dsn("postgres", f"nobody_{uuid.uuid4().hex[:8]}"))
    assert "role" in line and "does not exist" in line and "gave up after 3 tries" in line


def test_the_runner_ends_on_a_login_without_the_runtime_privileges(db):
    login = f"plain_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{login}" LOGIN')
    try:
        line = _runner(db_dsn(db, login))
        assert "permission denied" in line and "42501" in line and "gave up after 3 tries" in line
    finally:
        with connect("postgres") as admin:
            admin.execute(f'DROP ROLE "{login}"')


def test_the_runner_ends_on_a_runtime_role_that_may_not_log_in(db):
    """The old quick start's mistake: a broker_runtime member left NOLOGIN (as sql/roles.sql leaves the role)."""
    login = f"nologin_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{login}" NOLOGIN IN ROLE broker_runtime')
    try:
        line = _runner(db_dsn(db, login))
        assert f'role "{login}" is not permitted to log in' in line and "gave up after 3 tries" in line
    finally:
        with connect("postgres") as admin:
            admin.execute(f'DROP ROLE "{login}"')


def test_the_runner_keeps_retrying_a_refused_connection(tmp_path):
    """Connection refused can heal: the runner still tries, and connects once something listens on the port;
    a server that hangs up at once can heal too: the runner tries it more often than a permanent error."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "runner.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*RUNNER, "--dsn", f"host=127.0.0.1 port={port} dbname=x user=x", "--no-metrics",
                                 "--log-format", "text", "--notify-retry-seconds", "0.2"],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "database unavailable, retrying" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        with socket.socket() as listener:  # now the "server" is back
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen()
            listener.settimeout(60)
            for _ in range(2 * PERMANENT_TRIES + 1):  # a server that hangs up at once: more tries than a refusal
                # gets, even were each try two connections
                conn, _ = listener.accept()
                conn.close()
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_refusals_count_in_a_row_only_until_a_session_serves():
    """Real errors from the server: a missing database is permanent, a refused port is not; a session that
    got to serve (active or standby) starts the count again."""
    from pgsql_broker.run.connect_errors import PERMANENT_TRIES, PermanentCounter, PermanentError, is_permanent
    import psycopg

    def error_of(conninfo: str) -> psycopg.Error:
        with pytest.raises(psycopg.Error) as caught:
            psycopg.connect(conninfo, connect_timeout=5)
        return caught.value

    missing = error_of(db_dsn(f"missing_{uuid.uuid4().hex[:8]}"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    refused = error_of(f"host=127.0.0.1 port={port} dbname=x")
    assert is_permanent(missing) and not is_permanent(refused)
    counter = PermanentCounter("d")
    for _ in range(PERMANENT_TRIES - 1):
        assert counter.check(missing)
    assert counter.check(missing, "active")  # it had served since: a first refusal again
    assert not counter.check(refused)  # what can heal ends the streak too
    for _ in range(PERMANENT_TRIES - 1):
        counter.check(missing)
    with pytest.raises(PermanentError, match="gave up after 3 tries"):
        counter.check(missing)


def test_a_connection_cap_above_what_the_server_gives_is_refused_at_start(db):
    with connect("postgres") as conn:
        usable = conn.execute("SELECT current_setting('max_connections')::int "
                              "- current_setting('superuser_reserved_connections')::int "
                              "- coalesce(current_setting('reserved_connections', true), '0')::int").fetchone()[0]
    result = run([*RUNNER, "--dsn", db_dsn(db), "--allow-privileged-login", "--no-metrics", "--log-format", "text",
                  "--max-open-conns-total", str(usable + 1)])
    assert result.returncode == 1 and "Traceback" not in result.stderr, (result.returncode, result.stderr)
    line = result.stderr.strip().splitlines()[-1]  # (above it, its log)
    assert line.startswith(f"error: broker.max_open_conns_total (--max-open-conns-total, "
                           f"PGBROKER_MAX_OPEN_CONNS_TOTAL) is {usable + 1}"), result.stderr
    assert f"gives {usable} connections to logins without superuser" in line and f"give at most {usable}" in line

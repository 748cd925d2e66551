"""Where the command line connects without --dsn (issue 35): --dsn wins over PGBROKER_DSN, which wins over libpq's
own environment (PGHOST, PGDATABASE, ...); a config entry without a host uses libpq's default, the local socket,
not TCP (a login with peer authentication there got "no password supplied"); and `status --config` checks the
file as `start` does."""
from __future__ import annotations

import getpass
import os
import subprocess
import sys

from own_cluster import OwnCluster
from runner_process import free_port

CLI = [sys.executable, "-m", "pgsql_broker"]


def run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60)


def libpq_env(**more: str) -> dict:
    """The test cluster's PGHOST, PGPORT and PGUSER (.ci/with-cluster's), no PGBROKER_DSN, no PGDATABASE."""
    env = {k: v for k, v in os.environ.items() if k not in ("PGBROKER_DSN", "PGDATABASE")}
    return env | more


def test_status_and_jobs_with_only_pgdatabase_set(db):
    status = run(["status"], libpq_env(PGDATABASE=db))
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"database {db} on {os.environ['PGHOST']}\n"), status.stdout
    listed = run(["jobs", "list", "--json"], libpq_env(PGDATABASE=db))
    assert (listed.returncode, listed.stdout.strip()) == (0, "[]"), listed.stderr


def test_the_flag_wins_over_pgbroker_dsn_which_wins_over_libpq(db, empty_db):
    # PGDATABASE names a database without the broker: were it read, status would say so and exit 1
    via_variable = run(["status"], libpq_env(PGDATABASE=empty_db, PGBROKER_DSN=f"dbname={db}"))
    assert via_variable.returncode == 0 and via_variable.stdout.startswith(f"database {db} on "), via_variable.stderr
    via_flag = run(["status", "--dsn", f"dbname={db}"], libpq_env(PGBROKER_DSN=f"dbname={empty_db}"))
    assert via_flag.returncode == 0 and via_flag.stdout.startswith(f"database {db} on "), via_flag.stderr
    refused = run(["status"], libpq_env(PGDATABASE=empty_db))
    assert refused.returncode == 1 and "pgsql_broker is not installed" in refused.stderr
    for command in (["status"], ["install"], ["start"], ["jobs", "enqueue"]):
        assert "else libpq's own environment" in " ".join(run([*command, "--help"], libpq_env()).stdout.split())


def test_a_misspelt_setting_is_refused_by_status_as_by_start(db, tmp_path):
    config = tmp_path / "broker.yaml"
    config.write_text(f"databases:\n  - {{name: a, database: {db}, user: {os.environ['PGUSER']}, "
                      f"host: {os.environ['PGHOST']}, port: {os.environ['PGPORT']}}}\n"
                      "broker:\n  lease_second: 30\n")
    lines = {}
    for command in ("start", "status"):
        result = run([command, "--config", str(config)], libpq_env())
        assert result.returncode == 2 and "Traceback" not in result.stderr, (command, result.stderr)
        lines[command] = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert lines["status"] == lines["start"] == [f"Error: {config}: broker.lease_second is not a known field"]


def test_a_config_entry_without_host_uses_the_socket_with_peer_authentication(tmp_path):
    """Peer authentication on the socket (the OS user mapped to postgres), passwords over TCP: the entry names
    no host, so it must take the socket (PGHOST), as psql does, and need no password."""
    own = OwnCluster(max_connections=20, port=free_port(), tcp=True)
    try:
        own.authenticate("local all all peer map=os_user\nhost all all 127.0.0.1/32 scram-sha-256\n",
                         f"os_user {getpass.getuser()} postgres\n")
        config = tmp_path / "broker.yaml"
        config.write_text(f"databases:\n  - {{name: app, database: postgres, user: postgres, port: {own.port}}}\n")
        env = libpq_env(PGHOST=str(own.dir), PGPORT=str(own.port))
        result = run(["status", "--config", str(config)], env)
        # connected (peer): the database simply has no broker yet
        assert result.returncode == 1, result.stderr
        assert result.stderr.strip() == ("database app: error: pgsql_broker is not installed in this database: "
                                          "run pgsql-broker install --dsn ..."), result.stderr
    finally:
        own.stop()

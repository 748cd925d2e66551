"""The managed-PostgreSQL path on a server of its own, as a provider hands it over: no broker role exists yet and
every login but the superuser authenticates with a password (scram-sha-256). The owner (CREATEROLE, no superuser,
no BYPASSRLS) installs; with no superuser step at all, --with-roles --set-passwords creates every broker role
itself (none of them BYPASSRLS), and a runner logging in as broker_runtime with that password runs a job
enqueued as broker_enqueue with its own; a wrong password ends the runner in one line (docs/install.md, Managed
PostgreSQL)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from own_cluster import OwnCluster
from runner_process import free_port

CLI = [sys.executable, "-m", "pgsql_broker"]
RUNNER = [sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()"]
SECRETS = {"BROKER_ADMIN_PASSWORD": "adm-f-1", "BROKER_RUNTIME_PASSWORD": "run-f-2", "BROKER_ENQUEUE_PASSWORD": "enq-f-3"}


@pytest.fixture
def server():
    own = OwnCluster(max_connections=30, port=free_port())
    try:
        (own.dir / "data" / "pg_hba.conf").write_text("local all postgres trust\nlocal all all scram-sha-256\n")
        with own.connect() as admin:
            admin.execute("SELECT pg_reload_conf()")
            admin.execute("CREATE ROLE o LOGIN CREATEROLE PASSWORD 'owner-pw'")
            admin.execute("CREATE DATABASE d OWNER o")
        yield own
    finally:
        own.stop()


def _env() -> dict:
    """No PG* of the shared test cluster, and the owner's password for --with-roles."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"PG_PASS": "owner-pw"}


def _cli(own: OwnCluster, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    dsn = f"host={own.dir} port={own.port} dbname=d user=o password=owner-pw"
    return subprocess.run([*CLI, args[0], "--dsn", dsn, *args[1:]], capture_output=True, text=True,
                          env=_env() | (env or {}), stdin=subprocess.DEVNULL, timeout=180)


def _broker_roles(own: OwnCluster) -> list[tuple]:
    with own.connect() as admin:
        return admin.execute("SELECT rolname, rolcanlogin, rolsuper, rolbypassrls FROM pg_roles "
                             "WHERE rolname LIKE 'broker\\_%' ORDER BY 1").fetchall()


def _runner(own: OwnCluster, password: str, log: Path) -> subprocess.Popen:
    dsn = f"host={own.dir} port={own.port} dbname=d user=broker_runtime password={password}"
    with log.open("w") as out:
        return subprocess.Popen([*RUNNER, "--dsn", dsn, "--no-metrics", "--log-format", "text"], env=_env(),
                                stdout=out, stderr=subprocess.STDOUT)


def test_a_fresh_server_owner_installs_and_runs_a_job_with_password_logins(server, tmp_path):
    first = _cli(server, "install", "--no-extension")
    assert first.returncode == 0, (first.stdout, first.stderr)
    assert _broker_roles(server) == []  # the install itself needs no broker role

    result = _cli(server, "install", "--with-roles", "--admin-user", "o", "--set-passwords", env=SECRETS)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "no other database of this server uses them" in result.stdout
    assert "pg_signal_backend: not granted" in result.stdout
    assert _broker_roles(server) == [("broker_admin", True, False, False), ("broker_enqueue", True, False, False),
                                     ("broker_retention", False, False, False), ("broker_runtime", True, False, False),
                                     ("broker_worker", False, False, False)]   # (workers' logins: granted by the operator)
    with server.connect() as admin:
        assert admin.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = 'o'").fetchone() == (False, False)
    verify = _cli(server, "install", "--verify-only")
    assert verify.returncode == 0 and "OK: up to date" in verify.stdout, verify.stdout + verify.stderr

    with psycopg.connect(f"host={server.dir} port={server.port} dbname=d user=o password=owner-pw",
                         autocommit=True) as conn:
        conn.execute("CREATE TABLE public.hello (msg text)")
        conn.execute("GRANT INSERT, SELECT ON public.hello TO broker_enqueue")
    with psycopg.connect(f"host={server.dir} port={server.port} dbname=d user=broker_enqueue password=enq-f-3",
                         autocommit=True) as app:
        job = app.execute("SELECT job_id FROM broker.broker_add_job('hello', "
                          "$$INSERT INTO public.hello VALUES ('from a job')$$)").fetchone()[0]

    wrong = _runner(server, "not-the-password", tmp_path / "wrong.log")
    try:
        wrong.wait(120)
    finally:
        if wrong.poll() is None:
            wrong.kill()
            wrong.wait(10)
    out = (tmp_path / "wrong.log").read_text()
    last = out.strip().splitlines()[-1]
    assert wrong.returncode == 1 and "Traceback" not in out, out
    assert 'password authentication failed for user "broker_runtime"' in last and "gave up after 3 tries" in last, out

    log = tmp_path / "runner.log"
    runner = _runner(server, "run-f-2", log)
    try:
        deadline = time.monotonic() + 120
        with server.connect("d") as conn:
            while conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                               (job,)).fetchone() != (2,):
                assert runner.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            assert conn.execute("SELECT msg FROM public.hello").fetchall() == [("from a job",)]
    finally:
        runner.terminate()
        try:
            runner.wait(60)
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait(10)
    assert runner.returncode == 0, log.read_text()

"""The docker-compose stack played without containers: the exact commands, environment and config
files of the `migrate` and `broker` services (read from docker-compose.yml, .env.example,
broker.docker.example.yaml and the Dockerfile) run against the throwaway cluster."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from conftest import connect
from pgsql_broker.install.scripts import control_version
from runner_process import free_port

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_DSN = "host=postgres port=5432 dbname=broker"


def compose_env(values: dict, dotenv: dict) -> dict:
    """${VAR}, ${VAR:-default} and ${VAR:?message} as docker-compose expands them."""
    def one(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if dotenv.get(name):
            return dotenv[name]
        if op == ":?":
            raise AssertionError(f"{name} must be set: {arg}")
        return arg or ""
    return {k: re.sub(r"\$\{(\w+)(?:(:[?-])([^}]*))?\}", one, str(v)) for k, v in values.items()}


def image_entrypoint() -> list[str]:
    line = next(l for l in (ROOT / "Dockerfile").read_text().splitlines() if l.startswith("ENTRYPOINT"))
    return json.loads(line.split(None, 1)[1])


def test_migrate_then_broker_as_broker_runtime_processes_a_job(empty_db, tmp_path):
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    dotenv = dict(line.split("=", 1) for line in (ROOT / ".env.example").read_text().splitlines()
                  if line.strip() and not line.startswith("#"))
    here = f"host={os.environ['PGHOST']} port={os.environ['PGPORT']} dbname={empty_db}"
    assert image_entrypoint() == ["pgsql-broker"]
    cli = [sys.executable, "-m", "pgsql_broker"]  # what the image's entrypoint runs
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("PGUSER", "PGPASSWORD"))}

    # migrate: its command and environment, the database address swapped for the test cluster's
    migrate = compose["services"]["migrate"]
    assert CONTAINER_DSN in migrate["command"]
    command = [here if arg == CONTAINER_DSN else arg for arg in migrate["command"]]
    try:
        result = subprocess.run([*cli, *command], env=base_env | compose_env(migrate["environment"], dotenv),
                                capture_output=True, text=True, timeout=120)
        with connect(empty_db) as conn:  # the stack's runner purges on its retention policy
            assert conn.execute("SELECT pg_has_role('broker_runtime', 'broker_retention', 'MEMBER')").fetchone() == (True,)
    finally:  # (cluster-wide: the other tests' broker_runtime may not purge)
        with connect(empty_db) as conn:
            conn.execute("DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'broker_runtime') THEN "
                         "IF pg_has_role('broker_runtime', 'broker_retention', 'MEMBER') THEN "
                         "REVOKE broker_retention FROM broker_runtime; END IF; END IF; END $$")
    assert result.returncode == 0, result.stderr
    assert "installed as migrations" in result.stdout
    assert "LOGIN and new passwords for broker_admin, broker_enqueue, broker_runtime" in result.stdout
    assert "broker_retention granted to broker_runtime" in result.stdout
    with connect(empty_db) as conn:
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgsql_broker'").fetchone() == (0,)
        assert conn.execute("SELECT max(version) FROM broker.broker_schema_migrations").fetchone() == (control_version(),)
        assert conn.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = 'broker_runtime'").fetchone() == (True,)

    # broker: its command with the mounted config, that config pointed at the test cluster on loopback
    broker = compose["services"]["broker"]
    mount = next(v for v in broker["volumes"] if v.endswith(":ro"))
    source, target = mount.split(":")[:2]
    assert source == "./broker.docker.yaml" and target in broker["command"]
    config = yaml.safe_load((ROOT / "broker.docker.example.yaml").read_text())  # what users copy to ./broker.docker.yaml
    db = config["databases"][0]
    assert (db["user"], db["host"], db["database"]) == ("broker_runtime", "postgres", "broker")
    db.update(host=os.environ["PGHOST"], port=int(os.environ["PGPORT"]), database=empty_db)
    port = free_port()
    config["broker"].update(metrics_host="127.0.0.1", metrics_port=port)
    mounted = tmp_path / "broker.yaml"
    mounted.write_text(yaml.safe_dump(config))
    command = [str(mounted) if arg == target else arg for arg in broker["command"]]
    log = (tmp_path / "broker.log").open("w")
    assert "password" not in db  # passwords come only from .env
    broker_env = compose_env(broker["environment"], dotenv)
    assert broker_env == {"PGPASSWORD": dotenv["BROKER_RUNTIME_PASSWORD"]}
    proc = subprocess.Popen([*cli, *command], env=base_env | broker_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        with connect(empty_db) as conn:
            conn.execute("CREATE TABLE public.done (who text)")
            conn.execute("GRANT INSERT ON public.done TO broker_enqueue")
            conn.execute("GRANT USAGE ON SCHEMA public TO broker_enqueue")
            with conn.transaction():
                conn.execute("SET LOCAL ROLE broker_enqueue")
                job = conn.execute("SELECT job_id FROM broker.broker_add_job('hello', "
                                   "'INSERT INTO public.done VALUES (current_user)')").fetchone()[0]
            deadline = time.monotonic() + 30
            while conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s",
                               (job,)).fetchone()[0] < 2:
                assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "broker.log").read_text()
                time.sleep(0.1)
            assert conn.execute("SELECT complete_status FROM broker.broker_jobs WHERE job_id = %s", (job,)).fetchone() == (2,)
            assert conn.execute("SELECT who FROM public.done").fetchall() == [("broker_enqueue",)]
            users = {r[0] for r in conn.execute("SELECT usename FROM pg_stat_activity WHERE datname = current_database() "
                                                "AND application_name LIKE 'pgsql-broker:%'")}
            assert users == {"broker_runtime"}  # the runner connects as the least-privileged role
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200  # what the image's HEALTHCHECK asks
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        log.close()


def test_a_container_without_its_config_says_where_to_mount_it():
    result = subprocess.run([sys.executable, "-m", "pgsql_broker", "start", "--config", "/etc/pgsql-broker/broker.yaml"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "/etc/pgsql-broker/broker.yaml: no such file" in result.stderr and "mount it there" in result.stderr

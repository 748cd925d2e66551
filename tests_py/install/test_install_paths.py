"""pgsql-broker install: both paths give one catalog; idempotent; --verify-only changes nothing;
refuses to mix paths or downgrade; credentials resolve flag -> env -> TTY prompt -> error."""
from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path


from conftest import ROLES_SQL, connect, dsn
from pgsql_broker.install import catalog
from pgsql_broker.install import expected_catalog
from pgsql_broker.install.scripts import control_version, migration_chain

CLI = [sys.executable, "-m", "pgsql_broker"]
SECRETS = {"broker_admin": "adm-Secret-7f3a", "broker_runtime": "run-Secret-91bc", "broker_enqueue": "enq-Secret-c2d4"}


def run_cli(*args: str, env: dict | None = None, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, stdin=stdin, timeout=120)


def state_of(db: str) -> dict:
    """Everything a read-only command must leave as it was."""
    with connect(db) as conn:
        snap = catalog.snapshot(conn, privileges=True)
        snap["all relations"] = [r[0] for r in conn.execute(
            "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1")]
        snap["extensions"] = [r[0] for r in conn.execute("SELECT extname || extversion FROM pg_extension ORDER BY 1")]
        if conn.execute("SELECT to_regclass('broker.broker_schema_migrations') IS NOT NULL").fetchone()[0]:
            snap["migrations rows"] = [repr(r) for r in conn.execute(
                "SELECT version, install_path, checksum, applied_at FROM broker.broker_schema_migrations ORDER BY 1")]
    return snap


def test_both_install_paths_give_the_same_catalog(empty_db, template_db):
    assert run_cli("install", "--dsn", dsn(empty_db), "--no-extension").returncode == 0
    with connect(empty_db) as conn:
        conn.execute(ROLES_SQL)
        migrated = catalog.snapshot(conn, privileges=True)
    with connect(template_db) as conn:  # CREATE EXTENSION + roles.sql
        extension = catalog.snapshot(conn, privileges=True)
    assert catalog.differences(extension, migrated) == []
    assert all(migrated.values()), "every section of the catalog has entries to compare"


def test_the_packaged_catalog_matches_a_fresh_install(template_db):
    with connect(template_db) as conn:
        diff = catalog.differences(expected_catalog(), catalog.snapshot(conn))
    assert diff == [], "runner/pgsql_broker/catalog.json is stale: run `make catalog` and commit it"


def test_extension_path_is_idempotent_and_refuses_to_mix(empty_db):
    first = run_cli("install", "--dsn", dsn(empty_db))
    assert first.returncode == 0 and "created extension pgsql_broker" in first.stdout
    before = state_of(empty_db)
    again = run_cli("install", "--dsn", dsn(empty_db))
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert state_of(empty_db) == before
    mixed = run_cli("install", "--dsn", dsn(empty_db), "--no-extension")
    assert mixed.returncode == 1 and "refusing to mix" in mixed.stderr
    assert state_of(empty_db) == before


def test_migrations_path_is_idempotent_recorded_and_refuses_to_downgrade(empty_db):
    assert run_cli("install", "--dsn", dsn(empty_db), "--no-extension").returncode == 0
    with connect(empty_db) as conn:
        rows = conn.execute("SELECT version, install_path, length(checksum) FROM broker.broker_schema_migrations "
                            "ORDER BY string_to_array(version, '.')::int[]").fetchall()
        # one row per script of the chain: the oldest full script, then each upgrade (0.1.0, 0.2.0, 0.3.0, ...)
        assert rows == [(s.to_version, "migrations", 64) for s in migration_chain()]
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgsql_broker'").fetchone() == (0,)
    before = state_of(empty_db)
    again = run_cli("install", "--dsn", dsn(empty_db))  # no flag: follows the path already taken
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert state_of(empty_db) == before
    with connect(empty_db) as conn:
        conn.execute("UPDATE broker.broker_schema_migrations SET version = '9.0.0' WHERE version = %s", (control_version(),))
    newer = run_cli("install", "--dsn", dsn(empty_db))
    assert newer.returncode == 1 and "refusing to downgrade" in newer.stderr


def test_verify_only_reports_and_changes_nothing(empty_db):
    before = state_of(empty_db)
    empty = run_cli("install", "--verify-only", "--dsn", dsn(empty_db))
    assert empty.returncode == 1
    assert "installed version: none" in empty.stdout and "pending: pgsql_broker--0.1.0" in empty.stdout and "pending: pgsql_broker--0.1.0--0.2.0" in empty.stdout
    assert state_of(empty_db) == before  # not even the yoyo schema

    assert run_cli("install", "--dsn", dsn(empty_db), "--no-extension").returncode == 0
    current = state_of(empty_db)
    ok = run_cli("install", "--verify-only", "--dsn", dsn(empty_db))
    assert ok.returncode == 0 and "OK: up to date" in ok.stdout
    assert state_of(empty_db) == current

    with connect(empty_db) as conn:  # someone changed and dropped objects
        conn.execute("CREATE OR REPLACE FUNCTION broker.broker_current_tenant() RETURNS text LANGUAGE sql STABLE "
                     "SET search_path = pg_catalog, pg_temp AS $$ SELECT 'hacked' $$")
        conn.execute("DROP INDEX broker.broker_jobs_finished_idx")
    tampered = state_of(empty_db)
    bad = run_cli("install", "--verify-only", "--dsn", dsn(empty_db))
    assert bad.returncode == 1
    assert "functions: missing or changed: CREATE OR REPLACE FUNCTION broker.broker_current_tenant()" in bad.stdout
    assert "indexes: missing or changed: CREATE INDEX broker_jobs_finished_idx" in bad.stdout
    assert state_of(empty_db) == tampered


def test_verify_only_cannot_be_combined_with_roles(empty_db):
    result = run_cli("install", "--verify-only", "--with-roles", "--dsn", dsn(empty_db))
    assert result.returncode == 2 and "cannot be combined" in result.stderr


def _env_without_credentials() -> dict:
    return {k: v for k, v in os.environ.items()
            if k not in {"PGUSER", "PG_USER", "PGPASSWORD", "PG_PASS", "BROKER_ADMIN_PASSWORD",
                         "BROKER_RUNTIME_PASSWORD", "BROKER_ENQUEUE_PASSWORD"}}


def _dsn_without_user(db: str) -> str:
    return f"dbname={db} host={os.environ['PGHOST']} port={os.environ['PGPORT']}"


def test_no_tty_and_no_value_is_a_usage_error_and_creates_nothing(empty_db):
    before = state_of(empty_db)
    result = run_cli("install", "--with-roles", "--dsn", _dsn_without_user(empty_db), env=_env_without_credentials())
    assert result.returncode == 2
    assert "admin user is required: give --admin-user or $PGUSER or $PG_USER" in result.stderr
    assert state_of(empty_db) == before
    env = _env_without_credentials() | {"PG_USER": "postgres", "PG_PASS": "x"}
    partial = run_cli("install", "--with-roles", "--set-passwords", "--dsn", _dsn_without_user(empty_db), env=env)
    assert partial.returncode == 2 and "broker_admin password is required" in partial.stderr
    assert state_of(empty_db) == before


def drive_terminal(argv: list[str], answers: list[tuple[str, str]], env: dict) -> tuple[int, str]:
    """Run argv on a new pseudo-terminal (its controlling tty) and type each answer after its prompt."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execvpe(argv[0], argv, env)
    transcript = b""

    def read_some() -> bytes:
        ready, _, _ = select.select([fd], [], [], 30)
        assert ready, f"no output from the command; so far: {transcript!r}"
        try:
            return os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return b""

    for prompt, answer in answers:
        while prompt.encode() not in transcript:
            chunk = read_some()
            assert chunk, f"command ended before asking {prompt!r}: {transcript!r}"
            transcript += chunk
        transcript = transcript.replace(prompt.encode(), b"<asked>", 1)
        os.write(fd, answer.encode() + b"\n")
    while chunk := read_some():
        transcript += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), transcript.decode(errors="replace")


def _role_password(role: str) -> str | None:
    with connect("postgres") as conn:
        row = conn.execute("SELECT rolcanlogin, rolpassword FROM pg_authid WHERE rolname = %s", (role,)).fetchone()
    return row[1] if row and row[0] else None


def test_credentials_from_flags_env_and_prompt_never_leak(empty_db):
    server_log = Path(os.environ["PGBROKER_TEST_CLUSTER_DIR"]) / "server.log"
    env = _env_without_credentials() | {"PGOPTIONS": "-c log_statement=all"}
    # flags for the admin, environment variables (both spellings) for the rest
    env_flags = env | {"BROKER_ADMIN_PASSWORD": SECRETS["broker_admin"],
                       "BROKER_RUNTIME_PASSWORD": SECRETS["broker_runtime"],
                       "BROKER_ENQUEUE_PASSWORD": SECRETS["broker_enqueue"], "PG_PASS": "unused"}
    result = run_cli("install", "--with-roles", "--set-passwords", "--dsn", _dsn_without_user(empty_db),
                     "--admin-user", "postgres", env=env_flags)
    assert result.returncode == 0, result.stderr
    for role in SECRETS:
        assert (_role_password(role) or "").startswith("SCRAM-SHA-256$"), role
    with connect(empty_db) as conn:
        assert conn.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'broker'").fetchone() == (
            "broker_admin",)

    # the prompt step: a real terminal, nothing in flags or env, answered prompt by prompt
    answers = [("admin user:", "postgres"), ("admin password:", ""),
               ("broker_admin password:", SECRETS["broker_admin"]), ("broker_runtime password:", SECRETS["broker_runtime"]),
               ("broker_enqueue password:", SECRETS["broker_enqueue"])]
    code, transcript = drive_terminal([*CLI, "install", "--with-roles", "--set-passwords", "--dsn", _dsn_without_user(empty_db)],
                                      answers, env)
    assert code == 0, transcript
    assert "installed" in transcript or "nothing to do" in transcript

    for secret in SECRETS.values():
        for text in (result.stdout, result.stderr, transcript, server_log.read_text()):
            assert secret not in text


def test_install_from_a_config_file_and_config_errors_name_the_field(empty_db, tmp_path):
    config = tmp_path / "broker.yaml"
    config.write_text(f"""
databases:
  - name: main
    host: {os.environ['PGHOST']}
    port: {os.environ['PGPORT']}
    database: {empty_db}
    user: {os.environ['PGUSER']}
    queue_count: 2
broker:
  name: pgsql-broker
""")
    result = run_cli("install", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("main: created extension pgsql_broker")

    bad = tmp_path / "bad.yaml"
    bad.write_text("databases:\n  - name: main\n    database: x\n    user: u\n    port: '5432'\n")
    result = run_cli("install", "--config", str(bad))
    assert result.returncode == 2
    assert f"{bad}: databases[0].port must be int" in result.stderr
    missing = tmp_path / "missing.json"
    missing.write_text('{"databases": [{"name": "a", "user": "u"}]}')
    result = run_cli("install", "--config", str(missing))
    assert result.returncode == 2 and f"{missing}: databases[0].database is required" in result.stderr

"""Every frozen release upgrades, by either install path, to exactly what a fresh install gives and
keeps its jobs; upgraded from the newest release, it passes the whole pgTAP suite (marked whole_pgtap_suite:
minutes a path; `make test` runs it in the PostgreSQL 18 lane, beside the whole pytest suite on 15)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROLES_SQL, add_job, connect, dsn
from pgsql_broker.install import catalog
from pgsql_broker.install import install
from pgsql_broker.install.scripts import control_version, scripts, version_key

ROOT = Path(__file__).resolve().parents[2]
FROZEN = [s.to_version for s in scripts()
          if s.from_version is None and version_key(s.to_version) < version_key(control_version())]
JOBS = "SELECT job_id, job_name, complete_status, pending_deps, tenant_id, attempts FROM broker.broker_jobs ORDER BY job_id"


def test_there_is_a_frozen_release_to_upgrade_from():
    assert FROZEN, "no frozen release below the current version: the upgrade tests below would not run"


@pytest.mark.parametrize("no_extension", [False, True], ids=["extension", "migrations"])
@pytest.mark.parametrize("version", FROZEN)
def test_upgrade(version, no_extension, empty_db, template_db):
    quiet = lambda msg: None  # noqa: E731
    state = install(dsn(empty_db), no_extension=no_extension, target=version, log=quiet)
    assert state.version == version and state.path == ("migrations" if no_extension else "extension")
    with connect(empty_db) as conn:
        conn.execute("CREATE TABLE public.out (v text)")
        first = add_job(conn, "first", "INSERT INTO public.out VALUES ('first')")
        add_job(conn, "second", "INSERT INTO public.out VALUES ('second')", depends_on_job_ids=[first])
        add_job(conn, "broken", "SELECT 1/0", job_queue=2, max_attempts=3)
        conn.execute("SELECT broker.broker_run(job_id) FROM broker.broker_get(2)")
        with conn.transaction():
            conn.execute("SELECT broker.broker_set_tenant('acme')")
            add_job(conn, "acme", "SELECT 1")
        jobs_before = conn.execute(JOBS).fetchall()

    state = install(dsn(empty_db), no_extension=no_extension, log=quiet)
    assert state.version == control_version()
    with connect(empty_db) as conn:
        conn.execute(ROLES_SQL)
        upgraded = catalog.snapshot(conn, privileges=True)
        assert conn.execute(JOBS).fetchall() == jobs_before
    with connect(template_db) as conn:
        fresh = catalog.snapshot(conn, privileges=True)
    assert catalog.differences(fresh, upgraded) == []

    with connect(empty_db) as conn:  # the upgraded broker still runs the old jobs
        ran = conn.execute("SELECT g.job_name FROM broker.broker_get(1, NULL, 60, 10) g, "
                           "LATERAL broker.broker_run(g.job_id, g.lease_token) r ORDER BY 1").fetchall()
        assert ran == [("acme",), ("first",)]


@pytest.mark.parametrize("version", FROZEN)
def test_verify_only_flags_an_outdated_database_and_changes_nothing(version, empty_db):
    install(dsn(empty_db), no_extension=True, target=version, log=lambda msg: None)
    with connect(empty_db) as conn:
        before = catalog.snapshot(conn, privileges=True), conn.execute(
            "SELECT version, checksum, applied_at FROM broker.broker_schema_migrations ORDER BY 1").fetchall()
    result = subprocess.run([sys.executable, "-m", "pgsql_broker", "install", "--verify-only", "--dsn", dsn(empty_db)],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert f"installed version: {version} (via migrations)" in result.stdout
    assert f"pending: pgsql_broker--{version}--" in result.stdout
    with connect(empty_db) as conn:
        after = catalog.snapshot(conn, privileges=True), conn.execute(
            "SELECT version, checksum, applied_at FROM broker.broker_schema_migrations ORDER BY 1").fetchall()
    assert after == before


@pytest.mark.whole_pgtap_suite
@pytest.mark.parametrize("no_extension", [False, True], ids=["extension", "migrations"])
def test_upgraded_from_the_newest_release_the_broker_passes_the_whole_pgtap_suite(no_extension, empty_db):
    """An older release upgrades through the newest one's upgrade, to the catalog test_upgrade checks: the whole
    suite runs once per path, after the upgrade from the newest release."""
    quiet = lambda msg: None  # noqa: E731
    install(dsn(empty_db), no_extension=no_extension, target=FROZEN[-1], log=quiet)
    state = install(dsn(empty_db), no_extension=no_extension, log=quiet)
    assert state.version == control_version()
    with connect(empty_db) as conn:
        conn.execute(ROLES_SQL)
        conn.execute("CREATE EXTENSION pgtap")
    prove = subprocess.run(["pg_prove", "-d", empty_db, *sorted(str(p) for p in (ROOT / "tests_sql").rglob("*.sql"))],
                           capture_output=True, text=True, cwd=ROOT)
    assert prove.returncode == 0, prove.stdout[-3000:] + prove.stderr[-2000:]
    assert "All tests successful" in prove.stdout

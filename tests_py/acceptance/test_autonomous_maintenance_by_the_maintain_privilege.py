"""Autonomous maintenance of tables its role does not own, on each PostgreSQL version: since 17, the MAINTAIN
privilege on a table (GRANT MAINTAIN ON t TO maint) or membership in pg_maintain lets the job's role VACUUM and
REINDEX it, with nothing of the broker changed (the runner runs the statement as the role, which PostgreSQL
checks); before 17 there is neither (the GRANT is a syntax error, pg_maintain does not exist) and only the owner
may: REINDEX fails the job with 42501, its message PostgreSQL's own, and VACUUM completes having done nothing
(PostgreSQL's warning) (docs/install.md, "PostgreSQL versions")."""
from __future__ import annotations

import psycopg
import pytest

from autonomous_setup import add_job, autonomous_roles, outcome
from conftest import connect
from test_autonomous_jobs_run_outside_transactions import wait_until

COMPLETED, FAILED = 2, 3


def test_maintain_or_pg_maintain_lets_a_role_that_does_not_own_a_table_reindex_and_vacuum_it(db, tmp_path, start):
    with autonomous_roles(db, tmp_path) as a, connect(db) as owner:
        version = owner.execute("SELECT current_setting('server_version_num')::int").fetchone()[0]
        for table in ("granted", "by_role", "refused"):  # the test's superuser owns them, maint and etl do not
            owner.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY) WITH (autovacuum_enabled = false)")
            owner.execute(f"INSERT INTO {table} SELECT generate_series(1, 1000)")
        nodes = dict(owner.execute("SELECT relname, relfilenode FROM pg_class WHERE relname LIKE '%_pkey'").fetchall())
        if version >= 170000:
            owner.execute(f'GRANT MAINTAIN ON granted TO "{a.maint}"')
            owner.execute(f'GRANT pg_maintain TO "{a.etl}"')
        else:
            with pytest.raises(psycopg.errors.SyntaxError):
                owner.execute(f'GRANT MAINTAIN ON granted TO "{a.maint}"')
            with pytest.raises(psycopg.errors.UndefinedObject):
                owner.execute(f'GRANT pg_maintain TO "{a.etl}"')
        with a.as_role(a.maint) as conn:
            jobs = {"reindex granted": add_job(conn, "r1", "REINDEX TABLE CONCURRENTLY granted", max_attempts=1),
                    "vacuum granted": add_job(conn, "v1", "VACUUM (ANALYZE) granted", max_attempts=1),
                    "reindex refused": add_job(conn, "r2", "REINDEX TABLE CONCURRENTLY refused", max_attempts=1)}
        with a.as_role(a.etl) as conn:
            jobs["reindex by_role"] = add_job(conn, "r3", "REINDEX TABLE CONCURRENTLY by_role", max_attempts=1)
        runner = start(extra=("--config", str(a.config), "--workers-per-queue", "1"), user=a.runner)
        wait_until(lambda: all(outcome(db, j)[0] in (COMPLETED, FAILED) for j in jobs.values()), 120,
                   "the four autonomous jobs", runner)

        got = {name: outcome(db, job) for name, job in jobs.items()}
        allowed = COMPLETED if version >= 170000 else FAILED
        assert got["reindex refused"][0] == FAILED and got["reindex refused"][2] == "42501", got
        assert "must be owner of table refused" in got["reindex refused"][3] or "permission denied" in got[
            "reindex refused"][3], got
        for name in ("reindex granted", "reindex by_role"):
            assert got[name][0] == allowed, got
            if allowed == FAILED:
                assert got[name][2] == "42501", got
        with connect(db) as conn:
            after = dict(conn.execute("SELECT relname, relfilenode FROM pg_class WHERE relname LIKE '%_pkey'").fetchall())
            assert after["refused_pkey"] == nodes["refused_pkey"]
            assert (after["granted_pkey"] != nodes["granted_pkey"]) == (version >= 170000)
            assert (after["by_role_pkey"] != nodes["by_role_pkey"]) == (version >= 170000)
            # VACUUM of a table its role may not maintain completes with PostgreSQL's warning, having done nothing
            assert got["vacuum granted"][0] == COMPLETED, got
            if version < 170000:
                conn.execute("SELECT pg_stat_clear_snapshot()")
                assert conn.execute("SELECT vacuum_count, analyze_count FROM pg_stat_user_tables "
                                    "WHERE relname = 'granted'").fetchone() == (0, 0)
            else:
                wait_until(lambda: conn.execute("SELECT pg_stat_clear_snapshot(); SELECT 1").fetchone() and conn.execute(
                    "SELECT vacuum_count > 0 AND analyze_count > 0 FROM pg_stat_user_tables WHERE relname = 'granted'"
                ).fetchone()[0], 30, "the vacuum's statistics")

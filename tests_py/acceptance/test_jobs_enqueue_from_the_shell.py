"""pgsql-broker jobs enqueue (issue 35): a job from the shell through broker_add_job, with its options by name,
the SQL from an argument or standard input; prints the job id and whether it is new; a bad input is one line and
a non-zero exit code (2: a value the server refused as invalid, 1: any other refusal)."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

from conftest import connect
from runner_process import db_dsn


def enqueue(db: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pgsql_broker", "jobs", "enqueue", "--dsn", db_dsn(db), *args],
                          capture_output=True, text=True, input=stdin, timeout=60)


def one_error_line(result: subprocess.CompletedProcess, code: int) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_options_reach_broker_add_job_by_name(db):
    first = enqueue(db, "--name", "extract", "--group", "etl", "--tenant", "acme", "SELECT 1")
    assert first.returncode == 0, first.stderr
    first_id = int(first.stdout.split()[1])
    assert first.stdout == f"job {first_id} enqueued\n"
    second = enqueue(db, "-", "--name", "load", "--queue", "2", "--priority", "5", "--max-attempts", "3",
                     "--depends-on", str(first_id), "--depends-on-group", "etl", "--run-after", "2030-01-02 03:04+00",
                     "--timeout", "10 minutes", "--language", "plpgsql", "--search-path", "public",
                     "--concurrency-key", "crm-api", "--tenant", "acme", "--json", stdin="BEGIN PERFORM 1; END")
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout)
    assert result["is_new"] is True
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set_tenant('acme')")
        row = conn.execute("""SELECT job_name, execute_str, job_queue, job_priority, max_attempts, job_group,
                                     run_after = '2030-01-02 03:04+00', job_timeout, job_language, job_search_path,
                                     concurrency_key, tenant_id
                                FROM broker.broker_jobs WHERE job_id = %s""", (result["job_id"],)).fetchone()
        assert row == ("load", "BEGIN PERFORM 1; END", 2, 5, 3, "load", True, timedelta(minutes=10),
                       "plpgsql", "public", "crm-api", "acme")
        waits = conn.execute("""SELECT depends_on_job_id, depends_on_group FROM broker.broker_job_dependency
                                 WHERE job_id = %s ORDER BY 1 NULLS LAST""", (result["job_id"],)).fetchall()
        assert waits == [(first_id, None), (None, "etl")]


def test_an_idempotency_key_returns_the_unfinished_job(db):
    args = ("--name", "nightly", "--idempotency-key", "nightly-2030-01-02", "SELECT 1")
    made = json.loads(enqueue(db, *args, "--json").stdout)
    again = enqueue(db, *args)
    assert again.returncode == 0 and made["is_new"] is True
    assert again.stdout == (f"job {made['job_id']}: an unfinished job with this idempotency key exists; "
                            "not enqueued again\n")


def test_bad_input_is_one_line_and_a_non_zero_exit(db):
    assert "p_job_queue" in one_error_line(enqueue(db, "--name", "x", "--queue", "0", "SELECT 1"), 2)
    assert "SQLSTATE 22007" in one_error_line(enqueue(db, "--name", "x", "--run-after", "soonish", "SELECT 1"), 2)
    assert "SQLSTATE 22023" in one_error_line(enqueue(db, "--name", "x", "-", stdin="   "), 2)
    assert "SQLSTATE 23503" in one_error_line(enqueue(db, "--name", "x", "--depends-on", "424242", "SELECT 1"), 1)
    assert "SQLSTATE 42704" in one_error_line(enqueue(db, "--name", "x", "--run-as", "no_such_role", "SELECT 1"), 1)
    missing = enqueue(db, "SELECT 1")
    assert missing.returncode == 2 and "Missing option '--name'" in missing.stderr
    with connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM broker.broker_jobs").fetchone()[0] == 0


def test_a_task_is_enqueued_from_the_shell_with_its_arguments_and_options(db):
    run = lambda *args, stdin=None: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "pgsql_broker", "jobs", "enqueue-task", "--dsn", db_dsn(db), *args],
        capture_output=True, text=True, input=stdin, timeout=60)
    first = enqueue(db, "--name", "extract", "--tenant", "acme", "SELECT 1")
    extract = int(first.stdout.split()[1])
    made = run("send_email", '{"to": "ada@example.com"}', "--depends-on", str(extract), "--max-attempts", "3",
               "--tenant", "acme", "--json")
    assert made.returncode == 0, made.stderr
    task = json.loads(made.stdout)["job_id"]
    with connect(db) as conn:
        row = conn.execute("SELECT job_language, job_name, execute_str::jsonb, max_attempts, tenant_id, pending_deps "
                           "FROM broker.broker_jobs WHERE job_id = %s", (task,)).fetchone()
    assert row == ("task", "send_email", {"to": "ada@example.com"}, 3, "acme", 1)   # (it waits on the extract)
    piped = run("resize", "-", stdin='[1, 2]')
    assert piped.returncode == 0 and piped.stdout.startswith("task ") and piped.stdout.endswith(" enqueued\n"), piped.stderr
    bad = run("resize", "{not json")
    assert bad.returncode == 2 and "not JSON" in bad.stderr and "Traceback" not in bad.stderr

"""Stopping is not failing: SIGTERM/SIGINT to a real runner hands back the jobs it claimed but had not started,
lets running jobs finish until --shutdown-timeout-sec, then interrupts them, and a second signal interrupts at
once. Afterwards every job is pending or completed (none failed or cancelled, max_attempts 1), the stop consumed
no attempt, and after a restart each job's effects are applied exactly once. The log names what happened to
each job. An idle runner exits at once; Broker.stop() stops as a signal does, and the interrupt metric counts."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid

import pytest

from conftest import add_job, connect, dsn
from job_checks import wait_until

# A job that sleeps 20 s until the test opens its gate (a row in table gate), then returns at once: the same job,
# unchanged, runs long before the stop and short after the restart.
GATED = "INSERT INTO effects VALUES (%s); SELECT pg_sleep(CASE WHEN EXISTS (SELECT FROM gate) THEN 0 ELSE 20 END)"


def setup(db: str) -> None:
    with connect(db) as conn:
        conn.execute("CREATE TABLE effects (job text NOT NULL)")
        conn.execute("CREATE TABLE gate ()")


@pytest.fixture
def runtime_login(db):
    """A login that is only a member of broker_runtime, as the runner should run (it ends sessions of its own
    login only, and broker_interrupt_jobs is granted to broker_runtime)."""
    name = f"runner_{uuid.uuid4().hex[:8]}"
    with connect("postgres") as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE broker_runtime')
    yield name
    with connect(db) as owner:
        owner.execute(f'DROP OWNED BY "{name}"')
    with connect("postgres") as admin:
        admin.execute(f'DROP ROLE "{name}"')


def jobs(db: str) -> dict[str, tuple]:
    with connect(db) as conn:
        return {name: (status, attempts, interruptions) for name, status, attempts, interruptions in conn.execute(
            "SELECT job_name, complete_status, attempts, interruptions FROM broker.broker_jobs")}


def effects(db: str) -> list[str]:
    with connect(db) as conn:
        return sorted(r[0] for r in conn.execute("SELECT job FROM effects"))


def log_lines(runner) -> list[dict]:
    return [json.loads(line) for line in runner.log().splitlines() if line.startswith("{")]


def said(runner, msg_start: str) -> set[int]:
    """The job ids of the log lines whose message starts with msg_start."""
    return {e["job_id"] for e in log_lines(runner) if e["msg"].startswith(msg_start) and "job_id" in e}


def running(runner, job_id: int, activity: str | None = None) -> bool:
    """The runner shows job_id running (`activity`: "executing", in a transaction of its own, or "waiting", in a
    transaction with others, which the batch budget may still end and hand back)."""
    return any(j["job_id"] == job_id and activity in (None, j["activity"])
               for d in runner.state()["databases"] for j in d["running"])


def assert_stopped_cleanly(db: str, names: list[str]) -> None:
    """Every job pending or completed; a pending one has no attempt counted, a completed one its one attempt."""
    state = jobs(db)
    assert sorted(state) == sorted(names)
    for name, (status, attempts, _) in state.items():
        assert (status, attempts) in ((0, 0), (2, 1)), (name, state[name])


def restart_and_finish(db: str, start, names: list[str]) -> None:
    with connect(db) as conn:
        conn.execute("INSERT INTO gate DEFAULT VALUES")
    runner = start(db, name="after")
    wait_until(lambda: all(s[0] == 2 for s in jobs(db).values()), 60, "every job to complete after the restart")
    runner.signal(signal.SIGTERM)
    assert runner.wait(30) == 0
    assert all(attempts == 1 for _, attempts, _ in jobs(db).values()), jobs(db)


def test_a_job_running_past_the_deadline_is_interrupted_not_failed(db, start, runtime_login):
    setup(db)
    with connect(db) as conn:
        victim = add_job(conn, "deploy-victim", GATED % "'deploy-victim'")  # max_attempts 1
        add_job(conn, "after-victim", "INSERT INTO effects VALUES ('after-victim')", depends_on_job_ids=[victim])
    runner = start(db, extra=("--shutdown-timeout-sec", "2"), user=runtime_login)
    runner.wait_for(lambda r: running(r, victim), what="the job to start")
    runner.signal(signal.SIGTERM)
    assert runner.wait(30) == 0

    assert jobs(db) == {"deploy-victim": (0, 0, 1), "after-victim": (0, 0, 0)}  # not failed, dependent not cancelled
    assert effects(db) == []  # its transaction rolled back
    assert said(runner, "job interrupted") == {victim}
    assert not [e for e in log_lines(runner) if "leases will recover" in e["msg"]]

    restart_and_finish(db, start, ["deploy-victim", "after-victim"])
    assert effects(db) == ["after-victim", "deploy-victim"]
    assert jobs(db)["deploy-victim"] == (2, 1, 1)  # the interruption stays visible
    shown = subprocess.run([sys.executable, "-m", "pgsql_broker", "jobs", "show", str(victim), "--dsn", dsn(db)],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "1/1 (interrupted 1)" in shown.stdout, (shown.stderr, shown.stdout)


def test_claimed_jobs_that_have_not_started_are_handed_back(db, start):
    setup(db)
    names = [f"short {i:02d}" for i in range(30)]
    with connect(db) as conn:  # with a timeout, each job is a transaction of its own
        ids = {add_job(conn, n, f"INSERT INTO effects VALUES ('{n}'); SELECT pg_sleep(0.5)", timeout="5 minutes"): n
               for n in names}
    # A budget far above the 15 s the 30 jobs take keeps them in one worker's claim, one transaction after the
    # other, until the stop. Under the default budget each job would outlast it in a transaction with others
    # behind it and be handed back then ("claimed with a job that runs alone"): a stop that came a little late
    # would find nothing claimed to hand back.
    runner = start(db, extra=("--batch-budget-ms", "120000", "--lease-seconds", "300", "--shutdown-timeout-sec", "20"))
    wait_until(lambda: len(effects(db)) >= 2, 30, "two jobs to complete")
    runner.signal(signal.SIGTERM)
    assert runner.wait(30) == 0

    assert_stopped_cleanly(db, names)
    state = jobs(db)
    pending = {job_id for job_id, n in ids.items() if state[n][0] == 0}
    assert pending, "the claimed jobs were run during the stop instead of being handed back"
    assert said(runner, "job released (stopping)") == pending  # each one named in the log
    assert not said(runner, "job released (claimed with")  # handed back by the stop, not before it
    assert effects(db) == sorted(n for n in names if state[n][0] == 2)  # exactly the completed ones ran

    restart_and_finish(db, start, names)
    assert effects(db) == names  # each exactly once


def test_a_second_signal_interrupts_at_once_with_the_same_guarantee(db, start):
    setup(db)
    with connect(db) as conn:  # no timeouts: claimed together, the long one first (the budget hands the rest back)
        long_job = add_job(conn, "long", GATED % "'long'")
        rest = [add_job(conn, f"then {i}", f"INSERT INTO effects VALUES ('then {i}')") for i in range(5)]
    runner = start(db, extra=("--shutdown-timeout-sec", "600"))
    # first in a transaction with the rest, until the budget ends it (it is handed back if the stop comes then),
    # then alone: the stop must find it running there
    runner.wait_for(lambda r: running(r, long_job, "executing"), what="the long job to run alone")
    runner.signal(signal.SIGTERM)
    runner.wait_for(lambda r: any(e["msg"].startswith("signal received") for e in log_lines(r)), what="the stop")
    assert runner.get("/healthz")[0] == 503  # stopping: an orchestrator sees it (docs/operations.md)
    runner.signal(signal.SIGINT)
    assert runner.wait(30) == 0  # far less than the 600 s deadline

    names = {long_job: "long", **{job_id: f"then {i}" for i, job_id in enumerate(rest)}}
    interrupted, released = said(runner, "job interrupted"), said(runner, "job released")
    state = jobs(db)
    completed = {job_id for job_id, name in names.items() if state[name][0] == 2}
    assert long_job in interrupted and interrupted | released | completed == set(names)
    assert not interrupted & (released | completed)
    assert not [e for e in log_lines(runner) if e["msg"].startswith("job not released")]  # none went astray
    for job_id, name in names.items():  # completed once, or pending with no attempt counted (interruptions apart)
        expected = (2, 1, 0) if job_id in completed else (0, 0, 1 if job_id in interrupted else 0)
        assert state[name] == expected, (name, state[name])
    assert effects(db) == sorted(names[j] for j in completed)

    restart_and_finish(db, start, list(names.values()))
    assert effects(db) == sorted(names.values())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_idle_runner_exits_at_once(db, start, sig):
    # (the workers' poll an hour: a runner that waited for it to stop would outlast any machine's delay below)
    runner = start(db, extra=("--queue-timer-sec", "3600"))
    runner.wait_for(lambda r: r.role(db) == "active", what="active")
    runner.signal(sig)
    assert runner.wait(60) == 0  # a test timeout, not a measurement


def _claim_and_run_in_thread(db: str, sql: str):
    """A session that claims a job and runs it in a thread; returns (job_id, token, pid, thread, outcome)."""
    import threading
    admin = connect(db)
    job = add_job(admin, "edge", sql)
    worker = connect(db, autocommit=False)
    pid = worker.info.backend_pid
    token = worker.execute("SELECT lease_token FROM broker.broker_get(1)").fetchone()[0]
    worker.commit()
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["status"] = worker.execute("SELECT complete_status FROM broker.broker_run(%s, %s)",
                                               (job, token)).fetchone()[0]
            worker.commit()
        except Exception as exc:  # the terminated session
            outcome["error"] = exc
    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event = 'PgSleep'",
                                     (pid,)).fetchone()[0] == 1, 10, "the job to execute")
    return job, token, pid, thread, outcome


def test_a_run_that_commits_while_the_interrupt_waits_keeps_its_result(db):
    setup(db)
    job, token, _, thread, outcome = _claim_and_run_in_thread(db, "INSERT INTO effects VALUES ('edge'); "
                                                                  "SELECT pg_sleep(1)")
    with connect(db) as stopper:  # waits for the executing session's row lock, then finds the run finished
        assert stopper.execute("SELECT * FROM broker.broker_interrupt_jobs(ARRAY[%s], ARRAY[%s])",
                               (job, token)).fetchall() == []
    thread.join(10)
    assert outcome == {"status": 2}
    assert jobs(db) == {"edge": (2, 1, 0)} and effects(db) == ["edge"]


def test_a_terminated_run_is_recorded_as_interrupted_on_another_connection(db):
    setup(db)
    job, token, pid, thread, outcome = _claim_and_run_in_thread(db, "INSERT INTO effects VALUES ('edge'); "
                                                                    "SELECT pg_sleep(30)")
    with connect(db) as stopper:
        assert stopper.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,)).fetchone() == (True,)  # (waits)
        assert stopper.execute("SELECT * FROM broker.broker_interrupt_jobs(ARRAY[%s], ARRAY[%s])",
                               (job, token)).fetchall() == [(job,)]
    thread.join(10)
    assert "error" in outcome
    assert jobs(db) == {"edge": (0, 0, 1)} and effects(db) == []  # pending, attempt not counted, nothing applied


def test_broker_stop_interrupts_past_the_deadline_and_counts_it(db):
    """Broker.stop() (the runner as a library) stops as a signal does, and broker_jobs_interrupted_total counts
    the run it ended."""
    import asyncio
    import threading

    from prometheus_client import generate_latest

    from pgsql_broker import Broker, load_settings
    from runner_process import db_dsn
    setup(db)
    with connect(db) as conn:
        victim = add_job(conn, "library victim", GATED % "'library victim'", job_queue=2)
    broker = Broker(load_settings(env={}, dsns=[db_dsn(db)], flags={
        "metrics_enabled": False, "shutdown_timeout_sec": 0.5, "allow_privileged_login": True}))
    thread = threading.Thread(target=lambda: asyncio.run(broker.run()), daemon=True)
    thread.start()
    with connect(db) as conn:  # (read from the database: the broker's own state belongs to its thread)
        wait_until(lambda: conn.execute("SELECT activity FROM broker.broker_job_activity() WHERE job_id = %s",
                                        (victim,)).fetchall() == [("executing",)], 60, "the job to run")
    broker.stop()
    thread.join(60)
    assert not thread.is_alive()
    assert jobs(db) == {"library victim": (0, 0, 1)} and effects(db) == []
    metrics = generate_latest(broker.metrics.registry).decode()
    assert f'broker_jobs_interrupted_total{{database="{db}",queue="2"}} 1.0' in metrics, metrics

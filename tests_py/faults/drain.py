"""What the fault tests share: a cluster of their own on 127.0.0.1 (it is restarted, and its pg_hba.conf
changed), the runner's login (only a member of broker_runtime, so that REVOKE takes its rights), a drain of
jobs whose effects would collide if any ran twice, and the checks that no fault cost a job.

Every job has max_attempts 1 (the default): one attempt charged by a fault fails it. Job n inserts n into a
table with a UNIQUE constraint (a second run would fail), and every fourth job depends on the one before,
so a failed job would also cancel its dependent."""
from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import psycopg
import pytest

from conftest import add_job
from own_cluster import OwnCluster
from runner_process import free_port

DB = "d00"  # the database OwnCluster.databases_with_broker makes first
STATUS = {0: "pending", 1: "running", 2: "completed", 3: "failed", 4: "cancelled"}


@pytest.fixture
def tcp_cluster():
    """A cluster of the test's own, listening on 127.0.0.1 (and its socket) at a free port, with the broker
    installed in database DB; stopped and deleted after the test."""
    cluster = OwnCluster(max_connections=100, port=free_port(), tcp=True)
    try:
        cluster.databases_with_broker(1)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def runner_login(tcp_cluster) -> str:
    """A LOGIN role that is only a member of broker_runtime, as DESIGN.md §7 wants the runner's login."""
    name = f"runner_{uuid.uuid4().hex[:8]}"
    with tcp_cluster.connect() as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE broker_runtime')
    return name


def enqueue_drain(cluster: OwnCluster, count: int, sleep: float = 0.02, first: int = 0) -> list[int]:
    """`count` jobs (max_attempts 1), job n (from `first`) inserting n into effects and sleeping `sleep`
    seconds, so that a drain lasts while faults hit it; every fourth one depends on the one before. One
    transaction."""
    with cluster.connect(DB) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.effects (n integer NOT NULL UNIQUE)")
        ids: list[int] = []
        with conn.transaction():
            for n in range(first, first + count):
                after = [ids[-1]] if n % 4 == 3 and ids else None
                ids.append(add_job(conn, f"job {n}", f"INSERT INTO public.effects VALUES ({n}); "
                                                     f"SELECT pg_sleep({sleep})", depends_on_job_ids=after))
    return ids


def query(cluster: OwnCluster, sql: str):
    """The first row of `sql` on a fresh connection, or None while the server is down or restarting."""
    try:
        with psycopg.connect(cluster.dsn(DB), autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql).fetchone()
    except psycopg.OperationalError:
        return None


def effects(cluster: OwnCluster) -> int | None:
    row = query(cluster, "SELECT count(*) FROM public.effects")
    return None if row is None else row[0]


def statuses(cluster: OwnCluster) -> Counter:
    with cluster.connect(DB) as conn:
        return Counter({STATUS[s]: n for s, n in conn.execute(
            "SELECT complete_status, count(*) FROM broker.broker_jobs GROUP BY 1")})


def wait(predicate, timeout: float, what: str, *runners) -> None:
    """Poll predicate until true; on timeout, or when one of `runners` exits, fail with `what` and the runners'
    last log lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except OSError:  # a runner's HTTP not up yet
            pass
        for runner in runners:
            if runner.proc.poll() is not None:
                raise AssertionError(f"runner exited ({runner.proc.returncode}) waiting for {what}:\n"
                                     f"{runner.log()[-4000:]}")
        time.sleep(0.1)
    tails = "\n".join(f"--- {r.log_path.name}:\n{r.log()[-3000:]}" for r in runners)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{tails}")


def progress(cluster: OwnCluster, jobs: int, timeout: float, what: str, *runners) -> None:
    """Wait until `jobs` more jobs have run than now (the runner is working again), with pending ones left
    for the next fault."""
    start = None
    while start is None:
        start = effects(cluster)
        time.sleep(0.1)
    wait(lambda: (effects(cluster) or 0) >= start + jobs, timeout, f"{jobs} more jobs to run ({what})", *runners)
    left = statuses(cluster)["pending"]
    assert left > 0, f"the drain ended before {what}: make it longer (more jobs, or longer ones)"


def drained(cluster: OwnCluster) -> bool:
    row = query(cluster, "SELECT count(*) FROM broker.broker_jobs WHERE complete_status IN (0, 1)")
    return row is not None and row[0] == 0


def assert_every_job_completed_once(cluster: OwnCluster, count: int, timeout: float, *runners) -> None:
    """Wait (bounded) until no job is pending or running, then: all completed, none failed or cancelled, and
    each ran exactly once (the UNIQUE effects would fail a second run)."""
    try:
        wait(lambda: drained(cluster), timeout, "the drain to finish", *runners)
    except AssertionError as exc:
        raise AssertionError(f"jobs by status: {dict(statuses(cluster))}\n{exc}") from None
    by_status = statuses(cluster)
    assert by_status == Counter(completed=count), (
        f"a fault cost jobs: {dict(by_status)}; first failures: {failures(cluster)}")
    assert effects(cluster) == count


def failures(cluster: OwnCluster, limit: int = 5) -> list[tuple]:
    """The first jobs failed or cancelled, each with its attempt history (outcome, start, end)."""
    with cluster.connect(DB) as conn:
        return conn.execute(
            "SELECT j.job_name, j.complete_status, j.attempts, j.last_error_message, "
            "       (SELECT array_agg(a.outcome || ' ' || a.started_at::time || '-' || a.finished_at::time "
            "                         ORDER BY a.started_at) "
            "          FROM broker.broker_job_attempts AS a WHERE a.job_id = j.job_id), "
            "       (SELECT count(*) FROM public.effects AS e WHERE e.n::text = split_part(j.job_name, ' ', 2)) AS effect, "
            "       j.run_alone, j.interruptions, j.started_at::time, j.finished_at::time "
            "  FROM broker.broker_jobs AS j WHERE j.complete_status IN (3, 4) ORDER BY j.job_id LIMIT %s",
            (limit,)).fetchall()


def log_lines(runner) -> list[dict]:
    """The runner's JSON log lines."""
    return [json.loads(line) for line in runner.log().splitlines() if line.startswith("{")]


def warnings_saying(runner, text: str) -> list[dict]:
    """The runner's warnings whose message or fields contain `text`."""
    return [e for e in log_lines(runner) if e.get("level") == "warning" and text in json.dumps(e)]


def hold(seconds: float, *runners) -> None:
    """Let a fault last `seconds`; fail at once if a runner exits meanwhile (no runner should)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for runner in runners:
            if runner.proc.poll() is not None:
                raise AssertionError(f"runner exited ({runner.proc.returncode}) during the fault:\n"
                                     f"{runner.log()[-4000:]}")
        time.sleep(0.2)


def runner_flags(lease_seconds: int = 20, *more: str) -> tuple[str, ...]:
    """Settings shortened so that a fault's cost shows within a test's time: a lease of lease_seconds and
    recovery every second (a claim lost by a fault is charged soon after), and at most 5 s between
    reconnects (broker.notify_retry_seconds caps the backoff)."""
    return ("--lease-seconds", str(lease_seconds), "--stale-job-recovery-sec", "1", "--notify-retry-seconds", "5",
            *more)

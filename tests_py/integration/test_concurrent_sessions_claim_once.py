"""Concurrent sessions: no double claims, exact dependency counters, no concurrent cycles, one job per key."""
from __future__ import annotations

import random
import threading
import time

import psycopg

from pgsql_broker.states import JobState
from conftest import add_job, connect
from job_checks import COUNTER_DRIFT

def _worker(db: str, stop: threading.Event, claimed: list[int], batch: int = 3, queue: int = 1) -> None:
    conn = connect(db)
    idle = 0
    while not stop.is_set() or idle < 3:
        rows = conn.execute("SELECT job_id, lease_token FROM broker.broker_get(%s, NULL, 30, %s)", (queue, batch)).fetchall()
        if not rows:
            idle += 1
            time.sleep(0.02)
            continue
        idle = 0
        for job_id, token in rows:
            claimed.append(job_id)
            conn.execute("SELECT broker.broker_run(%s, %s)", (job_id, token))
    conn.close()


def test_concurrent_workers_never_claim_a_job_twice(db):
    admin = connect(db)
    admin.execute("CREATE TABLE ran (job_id bigint)")
    admin.execute("SELECT broker.broker_add_job('j' || i, 'INSERT INTO ran VALUES (' || i || ')') "
                  "FROM generate_series(1, 400) i")
    stop = threading.Event()
    stop.set()  # drain, then stop
    claims: list[list[int]] = [[] for _ in range(4)]
    threads = [threading.Thread(target=_worker, args=(db, stop, claims[i])) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = [j for c in claims for j in c]
    assert len(every) == 400 and len(set(every)) == 400
    assert sum(1 for c in claims if c) >= 2  # the work really was shared
    assert admin.execute("SELECT count(*), count(DISTINCT job_id) FROM ran").fetchone() == (400, 400)
    assert admin.execute("SELECT complete_status, count(*) FROM broker.broker_jobs GROUP BY 1").fetchall() == [(JobState.COMPLETED, 400)]


def test_dependency_counters_stay_exact_while_jobs_finish_and_join_groups(db):
    stop = threading.Event()
    claimed: list[int] = []
    workers = [threading.Thread(target=_worker, args=(db, stop, claimed, 2)) for _ in range(2)]
    for w in workers:
        w.start()

    errors: list[BaseException] = []

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        conn = connect(db)
        recent: list[int] = []
        try:
            for i in range(150):
                group = f"G{rng.randrange(4)}"
                if rng.random() < 0.6:
                    recent.append(add_job(conn, f"member {seed}.{i}", "SELECT pg_sleep(0.001)", job_group=group))
                else:
                    ids = rng.sample(recent, k=min(len(recent), rng.randrange(3))) if recent else []
                    add_job(conn, f"dependent {seed}.{i}", "SELECT 1", job_group="dependents",
                            depends_on_groups=rng.sample(["G0", "G1", "G2", "G3"], k=1 + rng.randrange(2)),
                            depends_on_job_ids=ids or None)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            conn.close()

    producers = [threading.Thread(target=producer, args=(seed,)) for seed in (1, 2)]
    for p in producers:
        p.start()
    for p in producers:
        p.join(120)
    assert not errors

    admin = connect(db)
    assert admin.execute(COUNTER_DRIFT).fetchall() == []  # quiescent: counters match a recount
    stop.set()
    for w in workers:
        w.join(120)
    left = admin.execute("SELECT complete_status, count(*) FROM broker.broker_jobs "
                         "WHERE complete_status <> 2 GROUP BY 1").fetchall()
    assert left == []  # everything ran: nothing waits forever on a miscounted dependency
    assert len(claimed) == len(set(claimed)) == 300


def test_concurrent_opposite_edges_cannot_form_a_cycle(db):
    one = connect(db, autocommit=False)
    two = connect(db)
    add_job(one, "a", "SELECT 1", job_group="A", depends_on_groups=["B"])  # uncommitted
    outcome: dict[str, BaseException | int] = {}

    def second() -> None:
        try:
            outcome["two"] = add_job(two, "b", "SELECT 1", job_group="B", depends_on_groups=["A"])
        except BaseException as exc:
            outcome["two"] = exc

    t = threading.Thread(target=second)
    t.start()
    time.sleep(0.5)
    assert t.is_alive(), "the second enqueue must wait for the first transaction"
    one.commit()
    t.join(10)
    assert isinstance(outcome["two"], psycopg.errors.CheckViolation)
    assert "dependency cycle" in str(outcome["two"])


def test_concurrent_enqueues_with_one_idempotency_key_make_one_job(db):
    one = connect(db, autocommit=False)
    two = connect(db)
    first = add_job(one, "once", "SELECT 1", idempotency_key="k")
    result: dict[str, int] = {}
    t = threading.Thread(target=lambda: result.setdefault("two", add_job(two, "once", "SELECT 1", idempotency_key="k")))
    t.start()
    time.sleep(0.3)
    one.commit()
    t.join(10)
    assert result["two"] == first
    assert two.execute("SELECT count(*) FROM broker.broker_jobs").fetchone() == (1,)

"""A chain of 10,000 jobs, each waiting on the one before, enqueues in one broker_add_jobs call (and a second one
in calls of 1,000, each call's first job waiting on the previous call's last), and the runner then runs the
first chain in its order. How long the enqueue takes is in docs/benchmarks.md (bench/chain_enqueue.py); here
only that it is accepted, exactly, and runs in order."""
from __future__ import annotations

import json

from conftest import connect
from job_checks import wait_until

LENGTH = 10_000


def _chain(first: int, last: int, prefix: str, after: int | None = None) -> str:
    jobs = []
    for i in range(first, last + 1):
        job = {"job_name": f"{prefix}{i}", "execute_str": f"INSERT INTO public.ran VALUES ({i})",
               "job_group": f"{prefix.upper()}{i}"}
        if i > first:
            job["depends_on_groups"] = [f"{prefix.upper()}{i - 1}"]
        elif after is not None:
            job["depends_on_job_ids"] = [after]
        jobs.append(job)
    return json.dumps(jobs)


def test_a_chain_of_ten_thousand_enqueues_in_one_call_or_in_calls_and_runs_in_order(db, start):
    conn = connect(db)
    conn.execute("CREATE TABLE public.ran (i integer NOT NULL UNIQUE, at bigserial)")
    ids = [r[0] for r in conn.execute("SELECT job_id FROM broker.broker_add_jobs(%s::jsonb) ORDER BY ord",
                                      (_chain(1, LENGTH, "a"),)).fetchall()]
    assert len(ids) == LENGTH
    assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_name LIKE 'a%%' AND pending_deps = 1"
                        ).fetchone()[0] == LENGTH - 1, "each job waits on the one before"

    # the same length in calls of 1,000, kept waiting behind a job of its own that never runs
    gate = conn.execute("SELECT job_id FROM broker.broker_add_job('gate', 'SELECT 1', p_job_queue => 2, "
                        "p_run_after => now() + interval '100 years')").fetchone()[0]
    last = gate
    for k in range(10):
        got = conn.execute("SELECT max(job_id), count(*) FROM broker.broker_add_jobs(%s::jsonb)",
                           (_chain(k * 1000 + 1, k * 1000 + 1000, "b", after=last),)).fetchone()
        assert got[1] == 1000
        last = got[0]
    assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_name LIKE 'b%%' AND pending_deps = 1"
                        ).fetchone()[0] == LENGTH

    start(db)
    wait_until(lambda: conn.execute("SELECT count(*) FROM public.ran").fetchone()[0] == LENGTH, 600,
               "the first chain to run")
    order = [r[0] for r in conn.execute("SELECT i FROM public.ran ORDER BY at").fetchall()]
    assert order == list(range(1, LENGTH + 1)), "the chain ran in its order"
    assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_name LIKE 'a%%' AND complete_status = 2"
                        ).fetchone()[0] == LENGTH
    assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_name LIKE 'b%%' AND complete_status = 0"
                        ).fetchone()[0] == LENGTH, "the chain behind the gate still waits"

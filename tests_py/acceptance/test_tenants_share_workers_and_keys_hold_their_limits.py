"""Tenants share a queue's workers by weight, and limits on concurrency keys hold (issue 33), with the real runner
at its defaults except where named:
- a tenant's flood (20,000 jobs, at priority 100 or at the other's priority) does not hold up another tenant's 50:
  they complete before the flood's 2,000th; with weights 3 and 1 the heavier tenant gets 0.7 to 0.8 of the
  completions;
- a cap of 2 on 6 workers: never more than 2 of the key's jobs run at once, and 2 do; unkeyed jobs enqueued after
  them complete while they wait;
- a rate of 10 a second: 40 jobs start over at least 2.5 s (the limiter's own bound);
- a cap holds across two queues and across two runners, the standby taking over mid-run;
- a runner whose next regular poll is an hour away starts a job dated a second later, and a rate's next jobs.
Order and overlap are read from what the jobs themselves wrote (a sequence, the database's clock around each
run), not from the test's timing."""
from __future__ import annotations

import json
import signal
import time

from conftest import connect


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def setup(db: str) -> None:
    with connect(db) as conn:
        conn.execute("CREATE TABLE done (n bigserial PRIMARY KEY, tenant text NOT NULL, job text NOT NULL)")
        conn.execute("CREATE TABLE spans (job text PRIMARY KEY, key text, started timestamptz NOT NULL, ended timestamptz)")
        conn.execute("GRANT ALL ON done, spans, done_n_seq TO PUBLIC")


def enqueue(db: str, tenant: str, jobs: list[dict]) -> None:
    with connect(db) as conn:
        for i in range(0, len(jobs), 5000):
            conn.execute("SELECT count(*) FROM broker.broker_add_jobs(%s::jsonb, p_tenant_id => %s)",
                         (json.dumps(jobs[i:i + 5000]), tenant))


def flood(tenant: str, n: int, priority: int) -> list[dict]:
    return [{"job_name": f"{tenant} {i}", "job_priority": priority,
             "execute_str": f"INSERT INTO done (tenant, job) VALUES ('{tenant}', '{tenant} {i}')"} for i in range(n)]


def completions(db: str) -> list[str]:
    with connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT tenant FROM done ORDER BY n")]


def span_job(name: str, key: str | None, seconds: float, queue: int = 1) -> dict:
    body = (f"BEGIN INSERT INTO spans (job, key, started) VALUES ('{name}', {repr(key) if key else 'NULL'}, clock_timestamp()); "
            f"PERFORM pg_sleep({seconds}); UPDATE spans SET ended = clock_timestamp() WHERE job = '{name}'; END")
    job = {"job_name": name, "job_language": "plpgsql", "execute_str": body, "job_queue": queue}
    if key:
        job["concurrency_key"] = key
    return job


def spans(db: str, key: str | None = None) -> list[tuple]:
    with connect(db) as conn:
        return conn.execute("SELECT job, started, ended FROM spans WHERE key IS NOT DISTINCT FROM %s ORDER BY started",
                            (key,)).fetchall()


def most_at_once(intervals: list[tuple]) -> int:
    """The most intervals (start, end) that overlap at one instant."""
    events = sorted([(s, 1) for _, s, _ in intervals] + [(e, -1) for _, _, e in intervals], key=lambda x: (x[0], x[1]))
    now = top = 0
    for _, step in events:
        now += step
        top = max(top, now)
    return top


def test_a_flood_does_not_hold_up_another_tenants_jobs(db, start):
    for priority in (100, 0):
        with connect(db) as conn:
            conn.execute("DROP TABLE IF EXISTS done, spans")
            conn.execute("DELETE FROM broker.broker_jobs")
        setup(db)
        enqueue(db, "a", flood("a", 20000, priority))
        enqueue(db, "b", flood("b", 50, 0))
        runner = start(db, name=f"flood-{priority}")
        wait_until(lambda: completions(db).count("b") == 50, 120, "b's 50 jobs")
        runner.kill()
        order = completions(db)
        before = order[:max(i for i, t in enumerate(order) if t == "b") + 1].count("a")
        assert before < 2000, f"a at priority {priority}: {before} of a's jobs completed before b's last"


def test_weights_3_and_1_share_the_completions(db, start):
    setup(db)
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set_tenant_weight('a', 3)")
    enqueue(db, "a", flood("a", 6000, 0))
    enqueue(db, "b", flood("b", 6000, 0))
    runner = start(db)
    wait_until(lambda: len(completions(db)) >= 4000, 120, "4,000 completions")
    runner.kill()
    first = completions(db)[:4000]
    share = first.count("a") / len(first)
    assert 0.7 <= share <= 0.8, f"a's share of the first 4,000 completions: {share:.3f}"


def test_a_cap_of_2_runs_2_at_once_and_unkeyed_jobs_pass(db, start):
    setup(db)
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set_limit('k2', 2, NULL)")
    enqueue(db, "default", [span_job(f"k2 {i}", "k2", 0.5) for i in range(12)])
    enqueue(db, "default", [span_job(f"free {i}", None, 0.05) for i in range(10)])
    runner = start(db, extra=("--workers-per-queue", "6"))
    wait_until(lambda: sum(1 for s in spans(db, "k2") if s[2]) == 12, 60, "the 12 k2 jobs")
    runner.kill()
    keyed, free = spans(db, "k2"), spans(db)
    assert most_at_once(keyed) == 2, f"k2 jobs at once: {most_at_once(keyed)}"
    assert len(free) == 10 and max(e for _, _, e in free) < max(e for _, _, e in keyed), \
        "the unkeyed jobs completed while the k2 jobs waited"


def test_a_rate_of_10_a_second_spreads_40_starts(db, start):
    setup(db)
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set_limit('r10', NULL, 10)")
    enqueue(db, "default", [span_job(f"r10 {i}", "r10", 0) for i in range(40)])
    runner = start(db, extra=("--workers-per-queue", "4"))
    wait_until(lambda: sum(1 for s in spans(db, "r10") if s[2]) == 40, 60, "the 40 r10 jobs")
    runner.kill()
    starts = [s for _, s, _ in spans(db, "r10")]
    spread = (starts[-1] - starts[0]).total_seconds()
    assert spread >= 2.5, f"40 starts at 10 a second with a burst of 10 took {spread:.2f} s, under 2.5 s"


def test_a_cap_holds_across_queues_and_a_standby_that_takes_over(db, start):
    setup(db)
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set_limit('k2', 2, NULL)")
    enqueue(db, "default", [span_job(f"k2 {i}", "k2", 0.5, queue=1 + i % 2) for i in range(16)])
    first = start(db, name="first", extra=("--workers-per-queue", "4"))
    first.wait_for(lambda r: r.role(db) == "active", what="the first runner active")
    second = start(db, name="second", extra=("--workers-per-queue", "4"))
    wait_until(lambda: sum(1 for s in spans(db, "k2") if s[2]) >= 4, 60, "4 k2 jobs done")
    first.signal(signal.SIGTERM)  # mid-run: it hands back what it had not run, the standby takes over
    first.wait()
    wait_until(lambda: sum(1 for s in spans(db, "k2") if s[2]) == 16, 120, "the 16 k2 jobs")
    second.kill()
    done = [s for s in spans(db, "k2") if s[2]]
    assert most_at_once(done) <= 2, f"k2 jobs at once across queues and runners: {most_at_once(done)}"


def test_an_idle_runner_polls_when_a_later_job_or_a_rate_comes_due(db, start):
    """A runner whose regular poll is an hour away still starts a job enqueued for a second later, and a rate's
    next tokens: the parking tells it when (NOTIFY '<database>/due'), it does not wait for that poll."""
    setup(db)
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_set_limit('r2', NULL, 2, 2)")
    runner = start(db, extra=("--queue-timer-sec", "3600", "--workers-per-queue", "2"))
    runner.wait_for(lambda r: r.role(db) == "active", what="the runner active")
    enqueue(db, "default", [span_job("warm", None, 0)])
    wait_until(lambda: len(spans(db)) == 1, 60, "the first job (the runner idle after it)")
    enqueue(db, "default", [span_job(f"r2 {i}", "r2", 0) for i in range(6)])
    wait_until(lambda: sum(1 for s in spans(db, "r2") if s[2]) == 6, 60, "the 6 r2 jobs, 2 per token refill")
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_add_job('later', %s, p_job_language => 'plpgsql', "
                     "p_run_after => now() + interval '1 second')",
                     (span_job("later", "later", 0)["execute_str"],))
    wait_until(lambda: len(spans(db, "later")) == 1, 60, "the job dated a second later")
    runner.kill()

"""Large fan-ins under concurrency: completions that defer releases (more than 500 dependents), the
maintenance calls that apply them (broker_apply_deferred_releases, several at once), and new dependents
enqueued meanwhile; the counters end exact, nothing deadlocks."""
from __future__ import annotations

import json
import threading
import time

from conftest import connect
from job_checks import COUNTER_DRIFT


def _dependents(conn, prefix: str, groups: list[str], n: int) -> None:
    jobs = [{"job_name": f"{prefix} {i}", "execute_str": "SELECT 1", "job_queue": 2, "depends_on_groups": groups}
            for i in range(n)]
    conn.execute("SELECT count(*) FROM broker.broker_add_jobs(%s::jsonb)", (json.dumps(jobs),))


def _claimer(db: str, until: threading.Event, warnings: list[str], errors: list[BaseException]) -> None:
    """Applies deferred releases (as the runner's maintenance does) until told to stop and nothing is left."""
    try:
        conn = connect(db)
        conn.add_notice_handler(lambda d: warnings.append(d.message_primary) if d.severity == "WARNING" else None)
        while True:
            conn.execute("SELECT broker.broker_apply_deferred_releases(500)")
            left = conn.execute("SELECT count(*) FROM broker.broker_deferred_release").fetchone()[0]
            if until.is_set() and left == 0:
                break
            time.sleep(0.001)
        conn.close()
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def _complete(db: str, name: str, errors: list[BaseException]) -> None:
    try:
        conn = connect(db)
        job_id = conn.execute("SELECT job_id FROM broker.broker_jobs WHERE job_name = %s", (name,)).fetchone()[0]
        conn.execute("SELECT broker.broker_run(%s)", (job_id,))
        conn.close()
    except BaseException as exc:
        errors.append(exc)


def _late_waiters(db: str, groups: list[str], n: int, errors: list[BaseException]) -> None:
    try:
        conn = connect(db)
        for i in range(n):
            conn.execute("SELECT broker.broker_add_job(%s, 'SELECT 1', 2, p_depends_on_groups => %s)",
                         (f"late {i}", groups))
        conn.close()
    except BaseException as exc:
        errors.append(exc)


def test_deferred_releases_stay_exact_under_concurrency(db):
    admin = connect(db)
    for name, group in (("m1", "g1"), ("m2", "g2")):
        admin.execute("SELECT broker.broker_add_job(%s, 'SELECT 1', 1, p_job_group => %s)", (name, group))
    _dependents(admin, "a", ["g1"], 700)
    _dependents(admin, "b", ["g1", "g2"], 700)
    _dependents(admin, "c", ["g2"], 700)
    # claimed (running) before the completions, as a runner would
    admin.execute("SELECT count(*) FROM broker.broker_get(1, NULL, 60, 2)")
    assert admin.execute("SELECT count(*) FROM broker.broker_jobs WHERE pending_deps > 0").fetchone()[0] == 2100

    stop, warnings, errors = threading.Event(), [], []
    threads = [threading.Thread(target=_claimer, args=(db, stop, warnings, errors)) for _ in range(3)]
    threads += [threading.Thread(target=_complete, args=(db, name, errors)) for name in ("m1", "m2")]
    threads += [threading.Thread(target=_late_waiters, args=(db, ["g1", "g2"], 30, errors))]
    for t in threads:
        t.start()
    for t in threads[3:]:
        t.join(60)
    stop.set()
    for t in threads[:3]:
        t.join(60)

    assert not errors and not warnings
    assert all(not t.is_alive() for t in threads)
    assert admin.execute("SELECT count(*) FROM broker.broker_deferred_release").fetchone()[0] == 0
    assert admin.execute(COUNTER_DRIFT).fetchall() == []
    assert admin.execute("SELECT count(*) FROM broker.broker_jobs "
                         "WHERE job_queue = 2 AND complete_status = 0 AND pending_deps = 0").fetchone()[0] == 2130
    assert admin.execute("SELECT min(pending_deps) FROM broker.broker_jobs").fetchone()[0] == 0


def test_a_runner_runs_every_dependent_of_a_large_fan_in(db, start):
    """The runner's claims apply the deferred releases: all 1,600 dependents run, none is left blocked."""
    from job_checks import wait_until
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_add_job('member', 'SELECT pg_sleep(0.5)', 1, p_job_group => 'big')")
        _dependents(conn, "d", ["big"], 1600)
    runner = start(db)
    runner.wait_for(lambda r: r.role(db) == "active", what="active")

    def done() -> bool:
        with connect(db) as conn:
            return conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 2").fetchone()[0] == 1601
    wait_until(done, what="the member and its 1,600 dependents", timeout=60)
    with connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM broker.broker_deferred_release").fetchone()[0] == 0

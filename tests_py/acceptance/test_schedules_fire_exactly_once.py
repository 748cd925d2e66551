"""Schedules across sessions and with a real runner: exactly-once ticks, runner wake-ups, no busy loop."""
from __future__ import annotations

import re
import threading
import time


from conftest import connect
from runner_process import Runner

SCHEDULES = 30
ROUNDS = 15
# the instant the tests tick at (broker._schedule_tick_at): no outcome depends on the date they run
TICK_AT = "2027-06-15 10:00:30+00"


def _tick_in_transaction(db: str, barrier: threading.Barrier, hold: float, results: list[int]) -> None:
    with connect(db, autocommit=False) as conn:
        barrier.wait()
        results.append(conn.execute("SELECT jobs_enqueued FROM broker._schedule_tick_at(%s)", (TICK_AT,)).fetchone()[0])
        time.sleep(hold)  # keep the row locks a moment: the other session ticks meanwhile
        conn.commit()


def test_two_sessions_ticking_at_once_enqueue_each_fire_exactly_once(db):
    with connect(db) as conn:
        for i in range(SCHEDULES):
            conn.execute("SELECT broker.broker_add_schedule(%s, '* * * * *', 'SELECT 1', p_catch_up => 'all',"
                         " p_overlap => 'allow')", (f"s{i}",))
        last_job = 0
        for round_ in range(ROUNDS):
            # every schedule is 4 fires behind TICK_AT (catch-up all): both sessions find them due at once
            conn.execute("UPDATE broker.broker_schedule SET next_fire_at = %s::timestamptz - interval '3 minutes 30 seconds'",
                         (TICK_AT,))
            start = conn.execute("SELECT min(next_fire_at) FROM broker.broker_schedule").fetchone()[0]
            enqueued: list[int] = []
            barrier = threading.Barrier(2)
            threads = [threading.Thread(target=_tick_in_transaction, args=(db, barrier, hold, enqueued))
                       for hold in (0.15, 0.0)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rows = conn.execute("""
                SELECT s.schedule_name, count(j.job_id), count(DISTINCT j.idempotency_key),
                       (extract(epoch FROM s.last_fire_at - %s) / 60)::int + 1
                  FROM broker.broker_schedule s
                  LEFT JOIN broker.broker_jobs j ON j.schedule_id = s.schedule_id AND j.job_id > %s
                 GROUP BY s.schedule_name, s.last_fire_at""", (start, last_job)).fetchall()
            for name, jobs, keys, fires in rows:
                assert jobs == keys == fires, f"round {round_}, {name}: {jobs} jobs, {keys} keys, {fires} fires"
            new = sum(r[1] for r in rows)
            assert sum(enqueued) == new, "the two ticks together report exactly the jobs enqueued"
            assert new == SCHEDULES * 4
            # finish them, so the same fire times may be used again next round
            conn.execute("UPDATE broker.broker_jobs SET complete_status = 2, finished_at = now() WHERE complete_status = 0")
            last_job = conn.execute("SELECT max(job_id) FROM broker.broker_jobs").fetchone()[0]


def _metric(runner: Runner, name: str) -> float:
    text = runner.get("/metrics")[1].decode()
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.M))


def test_the_runner_fires_a_schedule_when_due_and_sleeps_in_between(db, start):
    runner = start(db)
    runner.wait_for(lambda r: r.state()["databases"][0]["role"] == "active", what="active")
    with connect(db) as conn:
        conn.execute("CREATE TABLE public.fired (at timestamptz)")
        # a schedule due in two seconds: add it (NOTIFY wakes the runner), then move its fire time
        conn.execute("SELECT broker.broker_add_schedule('soon', '0 0 1 1 *', 'INSERT INTO public.fired VALUES (now())')")
        # the ticks counted from before the fire time is moved: however late the test reads them, the fire's is in
        runner.wait_for(lambda r: r.state()["databases"][0]["next_schedule_fire"] is not None, what="planned")
        ticks_before = _metric(runner, "broker_schedule_ticks_total")
        with conn.transaction():
            conn.execute("UPDATE broker.broker_schedule SET next_fire_at = now() + interval '2 seconds'")
            conn.execute("SELECT broker._schedule_notify()")
        # a deadline, not a measurement: a runner that did not tick at the fire time would tick next at its
        # longest sleep (schedules.MAX_SLEEP_SEC, 60 s)
        deadline = time.monotonic() + 30
        while not conn.execute("SELECT count(*) FROM public.fired").fetchone()[0]:
            assert time.monotonic() < deadline, runner.log()
            time.sleep(0.1)
        fired_late = conn.execute("""SELECT extract(epoch FROM f.at - s.last_fire_at)
                                       FROM public.fired f, broker.broker_schedule s""").fetchone()[0]
        time.sleep(3)  # the next fire is next 1 January: the runner must just sleep now
        assert conn.execute("SELECT count(*) FROM public.fired").fetchone()[0] == 1
    ticks = _metric(runner, "broker_schedule_ticks_total") - ticks_before
    # the fire's, the NOTIFY's (unless the fire time had passed when it came), the add's NOTIFY (if the runner
    # had planned from its first tick)
    assert 1 <= ticks <= 3, f"{ticks} ticks: the runner should sleep until the fire time, not poll"
    assert _metric(runner, "broker_schedule_jobs_total") == 1
    assert fired_late >= 0, "the job ran before its fire time"


def test_a_locked_due_schedule_is_retried_in_a_second_and_job_inserts_do_not_block_the_tick(db):
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_add_schedule('s', '* * * * *', 'SELECT 1', p_overlap => 'allow')")
        sid = conn.execute("SELECT schedule_id FROM broker.broker_schedule").fetchone()[0]
        conn.execute("UPDATE broker.broker_schedule SET next_fire_at = %s::timestamptz - interval '30 seconds'", (TICK_AT,))
        with connect(db, autocommit=False) as holder:
            # its owner holds the row: the tick skips it and asks to be called again soon, not at once
            holder.execute("SELECT 1 FROM broker.broker_schedule FOR UPDATE")
            jobs, _, seconds = conn.execute("SELECT * FROM broker._schedule_tick_at(%s)", (TICK_AT,)).fetchone()
            assert (jobs, seconds) == (0, 1)
            holder.rollback()
            # a job of the schedule being inserted (its foreign key locks the row FOR KEY SHARE) does not stop it
            holder.execute("SELECT broker.broker_add_job('linked', 'SELECT 1', p_schedule_id => %s)", (sid,))
            jobs, _, seconds = conn.execute("SELECT * FROM broker._schedule_tick_at(%s)", (TICK_AT,)).fetchone()
            assert jobs == 1 and seconds > 0
            holder.rollback()

"""Two broker_run_schedule_now calls at once on a schedule with overlap skip: the second waits on the schedule's row
lock, then finds the first one's job unfinished and returns it (is_new false). One job, not two, without an
idempotency key."""
from __future__ import annotations

import threading
import time

from conftest import connect

RUN_NOW = "SELECT job_id, is_new FROM broker.broker_run_schedule_now('nightly')"


def test_a_second_call_waits_for_the_first_and_returns_its_job(db):
    with connect(db) as owner:
        owner.execute("SELECT broker.broker_add_schedule('nightly', '0 3 * * *', 'SELECT 1')")
        first = connect(db, autocommit=False)
        second = connect(db, autocommit=False)
        try:
            first_job, first_new = first.execute(RUN_NOW).fetchone()   # (its transaction holds the row lock)
            answers: list[tuple] = []

            def call_second() -> None:
                answers.append(second.execute(RUN_NOW).fetchone())
                second.commit()
            thread = threading.Thread(target=call_second)
            thread.start()
            pid = second.info.backend_pid
            for _ in range(3000):  # until the second call waits on the lock (a bound, not a timing)
                if owner.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                                 (pid,)).fetchone()[0]:
                    break
                time.sleep(0.01)
            else:
                raise AssertionError("the second call never waited on the schedule's lock")
            first.commit()
            thread.join(timeout=60)
            assert answers == [(first_job, False)] and first_new is True
            assert owner.execute("SELECT count(*) FROM broker.broker_jobs").fetchone()[0] == 1
        finally:
            first.close()
            second.close()

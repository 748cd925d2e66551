"""NOTIFY on enqueue: one per statement and queue, tiny payload, only on commit; a job parked until a time sends
'<database>/due' instead of waking its queue."""
from __future__ import annotations

import json

import psycopg

from conftest import add_job, connect


def _drain(listener: psycopg.Connection, timeout: float = 0.5) -> list[str]:
    return [n.payload for n in listener.notifies(timeout=timeout) if n.channel == "pgsql_broker"]


def test_notifications_are_sent_on_commit_once_per_queue(db):
    listener = connect(db)
    listener.execute("LISTEN pgsql_broker")
    with connect(db, autocommit=False) as producer:
        producer.execute("SELECT broker.broker_add_job('a', 'SELECT 1', 1)")
        producer.execute("SELECT broker.broker_add_job('b', 'SELECT 1', 1)")
        producer.execute("SELECT broker.broker_add_job('c', 'SELECT 1', 2)")
        assert _drain(listener, 0.3) == []  # nothing before commit
        producer.commit()
    assert sorted(_drain(listener)) == [f"{db}/1", f"{db}/2"]


def test_a_bulk_insert_statement_notifies_each_queue_once(db):
    listener = connect(db)
    listener.execute("LISTEN pgsql_broker")
    producer = connect(db)
    producer.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
                     "SELECT 'n' || i, 'n', 'SELECT 1', 1 + i % 3 FROM generate_series(1, 300) i")
    assert sorted(_drain(listener)) == [f"{db}/1", f"{db}/2", f"{db}/3"]


def test_rolled_back_future_and_blocked_jobs_do_not_notify(db):
    listener = connect(db)
    listener.execute("LISTEN pgsql_broker")
    with connect(db, autocommit=False) as producer:
        producer.execute("SELECT broker.broker_add_job('gone', 'SELECT 1')")
        producer.rollback()
    producer = connect(db)
    producer.execute("SELECT broker.broker_add_job('later', 'SELECT 1', 4, p_run_after => now() + interval '1 hour')")
    # a job for later wakes no queue: it tells the runners that a parked job's time may come sooner
    assert _drain(listener) == [f"{db}/due"]

    with connect(db, autocommit=False) as tx:
        first = add_job(tx, "first", "SELECT 1", job_queue=5)
        add_job(tx, "second", "SELECT 1", job_queue=6, depends_on_job_ids=[first])
        tx.commit()
    assert _drain(listener) == [f"{db}/5"]  # queue 6's job is blocked

    # completing the dependency wakes the dependent's queue
    producer.execute("SELECT broker.broker_run(job_id) FROM broker.broker_get(5)")
    assert _drain(listener) == [f"{db}/6"]


def test_broker_add_jobs_notifies_each_queue_with_a_claimable_job_once(db):
    listener = connect(db)
    listener.execute("LISTEN pgsql_broker")
    producer = connect(db)
    jobs = [{"job_name": f"n{i}", "execute_str": "SELECT 1", "job_queue": 1 + i % 2} for i in range(50)]
    jobs += [{"job_name": "later", "execute_str": "SELECT 1", "job_queue": 3, "run_after": "2999-01-01T00:00:00Z"},
             {"job_name": "blocked", "execute_str": "SELECT 1", "job_queue": 4, "depends_on_groups": ["n1"]},
             {"job_name": "free", "execute_str": "SELECT 1", "job_queue": 5, "depends_on_groups": ["nobody"]}]
    producer.execute("SELECT count(*) FROM broker.broker_add_jobs(%s::jsonb)", (json.dumps(jobs),))
    # not the queues of the future or the blocked job (the future one is parked: '<database>/due')
    assert sorted(_drain(listener)) == [f"{db}/1", f"{db}/2", f"{db}/5", f"{db}/due"]


def test_jobs_a_procedure_enqueues_after_its_commit_are_due_and_notified(db):
    """A procedure that commits goes on in a new transaction under the same CALL statement: now() is then later
    than statement_timestamp(), and a job enqueued for now() (the default) is due, not parked for later; each
    way of enqueueing wakes its queue (with and without dependency edges, one job or many, a task)."""
    listener = connect(db)
    listener.execute("LISTEN pgsql_broker")
    listener.execute("LISTEN pgsql_broker_task")
    producer = connect(db)
    producer.execute("""
        CREATE PROCEDURE enqueue_in_steps() LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM broker.broker_add_job('first', 'SELECT 1', 1);
            COMMIT;
            PERFORM pg_sleep(0.01);   -- (so that the new transaction starts visibly after the CALL)
            PERFORM broker.broker_add_job('second', 'SELECT 1', 2);
            PERFORM broker.broker_add_job('third', 'SELECT 1', 3, p_depends_on_groups => ARRAY['nobody']);
            PERFORM broker.broker_add_jobs('[{"job_name": "fourth", "execute_str": "SELECT 1", "job_queue": 4},
                                             {"job_name": "fifth", "execute_str": "SELECT 1", "job_queue": 5,
                                              "depends_on_groups": ["nobody"]}]');
            PERFORM broker.broker_add_task('sixth');
            COMMIT;
        END $$""")
    producer.execute("CALL enqueue_in_steps()")
    rows = producer.execute("SELECT job_name, parked FROM broker.broker_jobs ORDER BY job_id").fetchall()
    assert rows == [("first", 0), ("second", 0), ("third", 0), ("fourth", 0), ("fifth", 0), ("sixth", 0)]
    task_queue = producer.execute("SELECT job_queue FROM broker.broker_task_queue WHERE task_name = 'sixth'").fetchone()[0]
    notes = sorted((n.channel, n.payload) for n in listener.notifies(timeout=0.5))
    assert notes == sorted([("pgsql_broker", f"{db}/{q}") for q in range(1, 6)] +
                           [("pgsql_broker_task", f"{db}/{task_queue}")])

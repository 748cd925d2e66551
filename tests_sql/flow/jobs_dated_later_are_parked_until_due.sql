-- Jobs dated later are parked (out of the claim index) from their enqueue or their return to pending until
-- their run_after; the claim of their queue puts the due ones back, and the runner's poll names their queue.
-- A job that comes back pending is never left parked by a limit. (Times are set, not waited for.)
BEGIN;
SELECT plan(10);

SELECT broker.broker_add_job('later', 'SELECT 1', 3, p_run_after => now() + interval '1 hour');
SELECT is((SELECT parked FROM broker.broker_jobs WHERE job_name = 'later'), 1::smallint, 'a job dated later is parked');
SELECT is((SELECT count(*) FROM broker.broker_get(3, NULL, 60, 10)), 0::bigint, 'and not claimed');
SELECT is(broker.broker_ready_queues(), '{}'::integer[], 'the poll names no queue for it');

-- its run_after moved to now (an operator): it is claimable at once
UPDATE broker.broker_jobs SET run_after = now() WHERE job_name = 'later';
SELECT is((SELECT parked FROM broker.broker_jobs WHERE job_name = 'later'), 0::smallint, 'moved to now: no longer parked');
SELECT is((SELECT job_name FROM broker.broker_get(3, NULL, 60, 10)), 'later', 'and claimed');

-- parked until a time that has come (written as if that time had passed: the triggers are off for the row)
SET LOCAL session_replication_role = replica;
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, run_after, parked)
VALUES ('due', 'due', 'SELECT 1', 4, now() - interval '1 second', 1);
SET LOCAL session_replication_role = origin;
SELECT is(broker.broker_ready_queues(), ARRAY[4], 'the poll names the queue of a parked job that is due');
SELECT is((SELECT job_name FROM broker.broker_get(4, NULL, 60, 10)), 'due', 'its queue''s claim puts it back and claims it');

-- a running job back to pending with a backoff is parked; one held by a limit comes back unparked
UPDATE broker.broker_jobs SET complete_status = 0, run_after = now() + interval '1 minute', lease_token = NULL,
       lease_expires_at = NULL
 WHERE job_name = 'due';
SELECT is((SELECT parked FROM broker.broker_jobs WHERE job_name = 'due'), 1::smallint, 'back to pending with a backoff: parked');
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, concurrency_key) VALUES ('held', 'held', 'SELECT 1', 5, 'k');
UPDATE broker.broker_jobs SET parked = 2 WHERE job_name = 'held';   -- (as a claim parks it at its key's cap)
UPDATE broker.broker_jobs SET complete_status = 4, finished_at = now() WHERE job_name = 'held';
SELECT is((SELECT parked FROM broker.broker_jobs WHERE job_name = 'held'), 2::smallint, 'cancelled while held');
UPDATE broker.broker_jobs SET complete_status = 0, finished_at = NULL WHERE job_name = 'held';  -- (as broker_retry_job)
SELECT is((SELECT parked FROM broker.broker_jobs WHERE job_name = 'held'), 0::smallint,
          'retried: pending again and not parked (a claim looks at its key''s limit afresh)');

SELECT * FROM finish();
ROLLBACK;

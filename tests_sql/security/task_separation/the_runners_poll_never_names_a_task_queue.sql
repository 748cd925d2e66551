-- A task is application code's: no runner serves its queue (negative, broker_task_queue). The
-- runner's poll (broker_ready_queues, broker_next_due) must never name one: a runner wakes a
-- worker of each queue the poll names, and a task's queue is none of its own (a runner whose
-- poll named queue -1 failed its session over and over, so that one broker_add_task by any
-- enqueuer stopped the SQL jobs of every tenant). Tasks pending, parked until a time and held by
-- their key's rate; SQL jobs beside them still show.
BEGIN;
SELECT plan(7);

CREATE ROLE broker_test_enq NOLOGIN IN ROLE broker_enqueue;
SET LOCAL SESSION AUTHORIZATION broker_test_enq;
SELECT broker.broker_set_tenant('a');
SELECT broker.broker_add_task('render', '{"page": 1}');
RESET SESSION AUTHORIZATION;
SELECT is(broker.broker_ready_queues(), '{}'::integer[], 'a pending task: the poll names no queue');
SELECT is(broker.broker_next_due(), NULL, 'and nothing is due');

SET LOCAL SESSION AUTHORIZATION broker_test_enq;
SELECT broker.broker_set_tenant('a');
SELECT broker.broker_add_task('later', '{}', p_run_after => statement_timestamp() + interval '1 hour');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT parked FROM broker.broker_jobs WHERE job_name = 'later'), 1::smallint, 'a task for later is parked until its time');
SELECT is(broker.broker_next_due(), NULL, 'a task parked until a time: the runner''s next poll is not set by it');
-- its time has come (handed to the code: the row says so)
UPDATE broker.broker_jobs SET run_after = statement_timestamp() - interval '1 second' WHERE job_name = 'later';
SELECT is(broker.broker_ready_queues(), '{}'::integer[], 'a parked task whose time came: the poll names no queue');

-- tasks held by their key's rate, the key's next token due
SET LOCAL SESSION AUTHORIZATION broker_test_enq;
SELECT broker.broker_set_tenant('a');
SELECT broker.broker_set_limit('mail', NULL, 1);
SELECT broker.broker_add_task('mail', '{}', p_concurrency_key => 'mail') FROM generate_series(1, 3);
RESET SESSION AUTHORIZATION;
SELECT broker.broker_set_tenant('a');
SELECT count(*) FROM broker.broker_claim_tasks(ARRAY['mail'], 3);
UPDATE broker.broker_key_limit SET wake_at = statement_timestamp() - interval '1 second' WHERE concurrency_key = 'mail';
SELECT is(broker.broker_ready_queues(), '{}'::integer[], 'tasks whose key''s next token is due: the poll names no queue');

-- a SQL job beside them is named as before
SET LOCAL SESSION AUTHORIZATION broker_test_enq;
SELECT broker.broker_set_tenant('a');
SELECT broker.broker_add_job('sql job', 'SELECT 1', 3);
RESET SESSION AUTHORIZATION;
SELECT is(broker.broker_ready_queues(), '{3}'::integer[], 'a SQL job''s queue is named, the tasks'' are not');

SELECT * FROM finish();
ROLLBACK;

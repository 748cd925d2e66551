-- A task's failure follows a SQL job's rules: retried after the backoff while attempts are left,
-- failed for good with its dependents cancelled otherwise (or at once without p_retry); a cancel
-- request reaches a running task through its heartbeat and its completion; an expired lease is
-- recovered as a SQL job's is; a key's cap holds for tasks.
BEGIN;
SELECT plan(24);

CREATE FUNCTION pg_temp.claim(p_task text) RETURNS TABLE (job_id bigint, lease_token uuid) LANGUAGE sql AS $f$
    SELECT c.job_id, c.lease_token FROM broker.broker_claim_tasks(ARRAY[p_task], 1, 60) AS c;
$f$;
CREATE FUNCTION pg_temp.state(p_id bigint) RETURNS text LANGUAGE sql AS $f$
    SELECT (complete_status, attempts, last_error_sqlstate, last_error_message)::text FROM broker.broker_jobs WHERE job_id = p_id;
$f$;

-- retried while attempts are left, then failed for good, its dependent cancelled
CREATE TEMP TABLE t AS SELECT job_id AS id FROM broker.broker_add_task('flaky', '{}', p_max_attempts => 2);
CREATE TEMP TABLE d AS SELECT job_id AS id FROM broker.broker_add_job('after flaky', 'SELECT 1', p_depends_on_job_ids => ARRAY[(SELECT id FROM t)]);
CREATE TEMP TABLE c AS SELECT * FROM pg_temp.claim('flaky');
SELECT is(broker.broker_fail_task((SELECT job_id FROM c), (SELECT lease_token FROM c), 'HTTP 503'), true, 'a failure is recorded');
SELECT is(pg_temp.state((SELECT id FROM t)), '(0,1,38000,"HTTP 503")', 'pending again, attempt 1 failed with 38000');
SELECT ok((SELECT run_after > now() FROM broker.broker_jobs WHERE job_id = (SELECT id FROM t)), 'after the retry backoff');
SELECT is((SELECT (outcome, error_sqlstate, error_message)::text FROM broker.broker_job_attempts WHERE job_id = (SELECT id FROM t)),
          '(failed,38000,"HTTP 503")', 'in the attempt history');
SELECT is(broker.broker_fail_task((SELECT job_id FROM c), (SELECT lease_token FROM c), 'again'), false,
          'the old lease cannot end it again');
UPDATE broker.broker_jobs SET run_after = now() WHERE job_id = (SELECT id FROM t);   -- (the backoff, handed over)
TRUNCATE c;
INSERT INTO c SELECT * FROM pg_temp.claim('flaky');
SELECT is((SELECT count(*) FROM c), 1::bigint, 'claimed again once due');
SELECT is(broker.broker_fail_task((SELECT job_id FROM c), (SELECT lease_token FROM c), 'HTTP 503'), true, 'fails a second time');
SELECT is(pg_temp.state((SELECT id FROM t)), '(3,2,38000,"HTTP 503")', 'no attempts left: failed');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_id = (SELECT id FROM d)), 4::smallint,
          'the SQL job that waited on it is cancelled');

-- no retry: failed at once
CREATE TEMP TABLE t2 AS SELECT job_id AS id FROM broker.broker_add_task('bad input', '{}', p_max_attempts => 5);
TRUNCATE c;
INSERT INTO c SELECT * FROM pg_temp.claim('bad input');
SELECT is(broker.broker_fail_task((SELECT job_id FROM c), (SELECT lease_token FROM c), 'no such user', false), true, 'no retry');
SELECT is(pg_temp.state((SELECT id FROM t2)), '(3,1,38000,"no such user")', 'failed with attempts left');

-- a cancel request reaches the running task
CREATE TEMP TABLE t3 AS SELECT job_id AS id FROM broker.broker_add_task('long', '{}', p_max_attempts => 3);
TRUNCATE c;
INSERT INTO c SELECT * FROM pg_temp.claim('long');
SELECT is(broker.broker_cancel_job((SELECT id FROM t3), 'superseded'), 1, 'a running task takes a cancel request');
SELECT is(broker.broker_extend_task((SELECT job_id FROM c), (SELECT lease_token FROM c)), 'cancelled', 'its heartbeat says so');
-- (57014 is query_canceled, which a PL/pgSQL handler catches only by name: throws_ok cannot)
CREATE FUNCTION pg_temp.complete_error(p_id bigint, p_token uuid) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM broker.broker_complete_task(p_id, p_token);
    RETURN 'completed';
EXCEPTION WHEN query_canceled THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END $f$;
SELECT is(pg_temp.complete_error((SELECT job_id FROM c), (SELECT lease_token FROM c)),
          format('57014 broker_complete_task: task %s was cancelled while it ran: superseded', (SELECT id FROM t3)),
          'its completion is refused (the worker rolls back its writes)');
SELECT is(broker.broker_fail_task((SELECT job_id FROM c), (SELECT lease_token FROM c), 'stopped'), true, 'the worker ends it');
SELECT is((SELECT (complete_status, cancel_reason)::text FROM broker.broker_jobs WHERE job_id = (SELECT id FROM t3)),
          '(4,superseded)', 'cancelled, not retried');

-- a lease nobody renews is recovered as a SQL job's
CREATE TEMP TABLE t4 AS SELECT job_id AS id FROM broker.broker_add_task('crashy', '{}', p_max_attempts => 2);
TRUNCATE c;
INSERT INTO c SELECT * FROM pg_temp.claim('crashy');
UPDATE broker.broker_jobs SET lease_expires_at = now() - interval '1 second' WHERE job_id = (SELECT id FROM t4);
SELECT is((SELECT complete_status FROM broker.broker_recover_stale_jobs() WHERE job_id = (SELECT id FROM t4)), 0::smallint,
          'an expired lease: pending again');
SELECT is(broker.broker_complete_task((SELECT job_id FROM c), (SELECT lease_token FROM c)), false,
          'the worker that lost it cannot complete it');

-- a worker's shutdown hands a task back, not counted
CREATE TEMP TABLE t5 AS SELECT job_id AS id FROM broker.broker_add_task('handed back', '{}');
TRUNCATE c;
INSERT INTO c SELECT * FROM pg_temp.claim('handed back');
SELECT is(broker.broker_release_task((SELECT job_id FROM c), (SELECT lease_token FROM c)), true, 'a worker hands a task back');
SELECT is((SELECT (complete_status, attempts, interruptions)::text FROM broker.broker_jobs WHERE job_id = (SELECT id FROM t5)),
          '(0,0,1)', 'pending, its attempt not counted');
SELECT is(broker.broker_release_task((SELECT job_id FROM c), (SELECT lease_token FROM c)), false, 'once');

-- a key's cap holds for tasks
SELECT ok(broker.broker_set_limit('smtp', 1, NULL), 'smtp: one at a time');
SELECT broker.broker_add_task('mail', '{}', p_concurrency_key => 'smtp') FROM generate_series(1, 3);
SELECT is((SELECT count(*) FROM broker.broker_claim_tasks(ARRAY['mail'], 10)), 1::bigint, 'one claimed under the cap');
SELECT is((SELECT count(*) FROM broker.broker_claim_tasks(ARRAY['mail'], 10)), 0::bigint, 'none while it runs');

SELECT * FROM finish();
ROLLBACK;

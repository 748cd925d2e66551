-- Retries: a failed attempt returns to pending with exponential backoff until max_attempts.
BEGIN;
SELECT plan(12);
CREATE FUNCTION pg_temp.attempt(p_id bigint) RETURNS smallint LANGUAGE plpgsql AS $f$
BEGIN
    UPDATE broker.broker_jobs SET run_after = now() - interval '1 second' WHERE job_id = p_id AND complete_status = 0;
    PERFORM broker.broker_get(1);
    RETURN (SELECT complete_status FROM broker.broker_run(p_id));
END $f$;

CREATE TEMP TABLE j AS SELECT job_id FROM broker.broker_add_job('flaky', 'SELECT 1/0', p_max_attempts => 3);
SELECT is(pg_temp.attempt((SELECT job_id FROM j)), 0::smallint, 'attempt 1 of 3 failed: back to pending');
SELECT results_eq($$SELECT attempts, last_error_sqlstate, run_after - clock_timestamp() > interval '4 seconds',
                           run_after - clock_timestamp() <= interval '5 seconds', lease_token IS NULL
                      FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM j)$$,
    $$VALUES (1, '22012', true, true, true)$$, 'first retry after ~5 s (retry_base_seconds), error kept, lease cleared');
SELECT is((SELECT count(*) FROM broker.broker_get(1)), 0::bigint, 'not claimable during the backoff');
SELECT is(pg_temp.attempt((SELECT job_id FROM j)), 0::smallint, 'attempt 2 of 3 failed: pending again');
SELECT ok((SELECT run_after - clock_timestamp() BETWEEN interval '9 seconds' AND interval '10 seconds'
             FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM j)), 'second retry after ~10 s: the delay doubles');
SELECT is(pg_temp.attempt((SELECT job_id FROM j)), 3::smallint, 'attempt 3 of 3 failed: failed for good');
SELECT results_eq($$SELECT attempts, complete_status, finished_at IS NOT NULL FROM broker.broker_jobs
                     WHERE job_id = (SELECT job_id FROM j)$$, $$VALUES (3, 3::smallint, true)$$, 'three attempts recorded');

-- a job that succeeds on a later attempt completes and clears nothing it should keep
CREATE TEMP TABLE flag (ok boolean);
INSERT INTO flag VALUES (false);
CREATE TEMP TABLE k AS SELECT job_id FROM broker.broker_add_job('second time lucky',
    $j$BEGIN IF NOT (SELECT ok FROM flag) THEN RAISE EXCEPTION 'not yet'; END IF; END$j$, 1, 0, 'plpgsql',
    p_max_attempts => 2);
SELECT is(pg_temp.attempt((SELECT job_id FROM k)), 0::smallint, 'first attempt failed');
UPDATE flag SET ok = true;
SELECT is(pg_temp.attempt((SELECT job_id FROM k)), 2::smallint, 'second attempt completed');
SELECT is((SELECT last_error_message FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM k)), 'not yet',
          'the last error stays visible after a later success');

-- the backoff settings
SELECT broker.broker_set('retry_base_seconds', '1', true);
SELECT broker.broker_set('retry_max_seconds', '3', true);
SELECT is(broker._retry_delay(1), interval '1 second', 'base delay');
SELECT is(broker._retry_delay(10), interval '3 seconds', 'capped at retry_max_seconds');

SELECT * FROM finish();
ROLLBACK;

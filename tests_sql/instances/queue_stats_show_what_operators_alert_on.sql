-- broker_queue_stats' operator columns (the gauges of /metrics): the oldest ready job's age per queue and
-- tenant, cancel requests and retries of the last hour, and paused queues, one row per queue and tenant
-- (a queue paused for every tenant gets a row of tenant '' only where no tenant has one).
BEGIN;
SELECT plan(6);
\ir ../lib/run_next.psql

SELECT broker.broker_add_job('ready 10 min', 'SELECT 1', 1, p_run_after => now() - interval '10 minutes');
SELECT broker.broker_add_job('ready 20 min', 'SELECT 1', 1, p_run_after => now() - interval '20 minutes');
SELECT broker.broker_add_job('not yet', 'SELECT 1', 1, p_run_after => now() + interval '1 day');
SELECT broker.broker_add_job('ready now', 'SELECT 1', 2);
SELECT ok((SELECT oldest_ready_seconds >= 1200 AND oldest_ready_seconds < 1800
             FROM broker.broker_queue_stats() WHERE job_queue = 1),
          'the oldest ready job''s age: since the earliest run_after of the ready jobs, not the delayed one');
SELECT results_eq($$SELECT job_queue, cancels_last_hour, retries_last_hour FROM broker.broker_queue_stats() ORDER BY 1$$,
                  $$VALUES (1, 0::bigint, 0::bigint), (2, 0::bigint, 0::bigint)$$, 'no cancels or retries yet');

-- queue 3: a job cancelled while running, retried, failed and retried again
SELECT broker.broker_add_job('operated', 'SELECT 1/0', 3);
SELECT broker.broker_get(3);
SELECT broker.broker_cancel_job(job_id, 'stop') FROM broker.broker_jobs WHERE job_name = 'operated';
SELECT broker.broker_run_batch(ARRAY[job_id], NULL) FROM broker.broker_jobs WHERE job_name = 'operated';
SELECT broker.broker_retry_job(job_id) FROM broker.broker_jobs WHERE job_name = 'operated';
SELECT pg_temp.run_next(3);
SELECT broker.broker_retry_job(job_id) FROM broker.broker_jobs WHERE job_name = 'operated';
-- a pending job's cancel is not a request to a runner: counted in cancelled_last_hour, not here
SELECT broker.broker_cancel_job(job_id) FROM broker.broker_jobs WHERE job_name = 'ready now';
SELECT results_eq($$SELECT job_queue, cancels_last_hour, retries_last_hour, cancelled_last_hour
                      FROM broker.broker_queue_stats() WHERE job_queue IN (2, 3) ORDER BY 1$$,
                  $$VALUES (2, 0::bigint, 0::bigint, 1::bigint), (3, 1::bigint, 2::bigint, 0::bigint)$$,
                  'the last hour''s cancel requests and retries, per queue and tenant');
UPDATE broker.broker_job_actions SET requested_at = now() - interval '61 minutes';
SELECT results_eq($$SELECT cancels_last_hour, retries_last_hour FROM broker.broker_queue_stats() WHERE job_queue = 3$$,
                  $$VALUES (0::bigint, 0::bigint)$$, 'older ones drop out');

-- paused for every tenant: queue 5 without jobs, queue 2 with only a finished one, queue 1 with ready ones
SELECT broker.broker_pause_queue(q) FROM unnest(ARRAY[1, 2, 5]) AS q;
SELECT results_eq($$SELECT job_queue, tenant_id, paused FROM broker.broker_queue_stats() WHERE job_queue IN (1, 2, 5) ORDER BY 1, 2$$,
                  $$VALUES (1, 'default'::text, true), (2, 'default', true), (5, '', true)$$,
                  'a pause for every tenant marks each tenant''s row, and has a row of its own only where there is none');
SELECT is((SELECT oldest_ready_seconds FROM broker.broker_queue_stats() WHERE job_queue = 5), 0::double precision,
          'a queue without ready jobs: age 0');

SELECT * FROM finish();
ROLLBACK;

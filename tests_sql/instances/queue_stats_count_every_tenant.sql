-- broker_queue_stats: queue depth across tenants, for monitoring.
BEGIN;
SELECT plan(8);

SELECT broker.broker_add_job('ready', 'SELECT 1');
SELECT broker.broker_add_job('later', 'SELECT 1', p_run_after => now() + interval '1 hour');
SELECT broker.broker_add_job_simple('blocked', 'SELECT 1', 0, ARRAY['ready']);
SELECT broker.broker_add_job('fails', 'SELECT 1/0', 2);
SELECT broker.broker_run(job_id) FROM broker.broker_get(2);
SELECT broker.broker_add_job('claimed', 'SELECT 1', 3);
SELECT broker.broker_get(3);
SELECT broker.broker_set_tenant('acme');
SELECT broker.broker_add_job('acme ready', 'SELECT 1');
SELECT broker.broker_set_tenant('default');

SELECT results_eq($$SELECT job_queue, tenant_id, ready, blocked, delayed, running, completed_last_hour, failed_last_hour,
                          cancelled_last_hour FROM broker.broker_queue_stats()$$,
    $$VALUES (1, 'acme', 1::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint),
             (1, 'default', 1, 1, 1, 0, 0, 0, 0),
             (2, 'default', 0, 0, 0, 0, 0, 1, 0),
             (3, 'default', 0, 0, 0, 1, 0, 0, 0)$$,
    'per queue and tenant: ready, blocked, delayed, running, finished in the last hour');
UPDATE broker.broker_jobs SET finished_at = now() - interval '2 hours' WHERE job_name = 'fails';
SELECT is((SELECT count(*) FROM broker.broker_queue_stats() WHERE job_queue = 2), 0::bigint, 'older finished jobs drop out');

SET LOCAL ROLE broker_runtime;
SELECT is((SELECT count(DISTINCT tenant_id) FROM broker.broker_queue_stats()), 2::bigint,
          'broker_runtime sees the depth of every tenant');
RESET ROLE;
SELECT function_privs_are('broker', 'broker_queue_stats', '{}'::text[], 'broker_enqueue', '{}'::text[],
                          'enqueuers cannot read other tenants'' queue depth');

-- The finished counts come from per-minute counters: they must say what the jobs table says (the last hour
-- in whole minutes: the current one and the 60 before it), whatever writes it (finishes, direct updates of
-- finished_at or state, deletes) and whenever the deltas are merged.
CREATE FUNCTION pg_temp.reference_stats()
RETURNS TABLE (job_queue integer, tenant_id text, ready bigint, blocked bigint, delayed bigint, running bigint,
               completed bigint, failed bigint, cancelled bigint)
LANGUAGE sql AS $$
    SELECT j.job_queue, j.tenant_id,
           count(*) FILTER (WHERE j.complete_status = 0 AND j.pending_deps = 0 AND j.run_after <= statement_timestamp()),
           count(*) FILTER (WHERE j.complete_status = 0 AND j.pending_deps > 0),
           count(*) FILTER (WHERE j.complete_status = 0 AND j.pending_deps = 0 AND j.run_after > statement_timestamp()),
           count(*) FILTER (WHERE j.complete_status = 1),
           count(*) FILTER (WHERE j.complete_status = 2),
           count(*) FILTER (WHERE j.complete_status = 3),
           count(*) FILTER (WHERE j.complete_status = 4)
      FROM broker.broker_jobs AS j
     WHERE j.complete_status IN (0, 1)
        OR (j.complete_status IN (2, 3, 4)
            AND j.finished_at >= date_bin('1 minute', statement_timestamp(), '2000-01-01 00:00:00+00') - interval '60 minutes')
     GROUP BY 1, 2 ORDER BY 1, 2
$$;
SELECT setseed(0.21);
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue)
SELECT CASE WHEN i % 3 = 0 THEN 'acme' ELSE 'default' END, 'r' || i, 'r', 'SELECT 1', 4 + i % 3
  FROM generate_series(1, 3000) AS i;
-- finish them as the finish functions would (one statement each for some, in bulk for the rest), spread
-- over the last 70 minutes, some a few seconds either side of the hour's edge
UPDATE broker.broker_jobs
   SET complete_status = 2 + (job_id % 3)::smallint, finished_at = now() - random() * interval '70 minutes'
 WHERE job_queue >= 4 AND job_id % 5 <> 0;
UPDATE broker.broker_jobs
   SET complete_status = 2, finished_at = now() - interval '1 hour' + (job_id % 7 - 3) * interval '1 second'
 WHERE job_queue >= 4 AND job_id % 5 = 0 AND job_id % 2 = 0;
SELECT results_eq($$SELECT job_queue, tenant_id, ready, blocked, delayed, running, completed_last_hour, failed_last_hour,
                          cancelled_last_hour FROM broker.broker_queue_stats()$$, $$SELECT * FROM pg_temp.reference_stats()$$,
                  'the counters say what the jobs table says');
SET LOCAL TimeZone = 'Asia/Kathmandu';
UPDATE broker.broker_jobs SET finished_at = finished_at + interval '17 minutes 30 seconds'
 WHERE job_queue = 5 AND complete_status >= 2;
UPDATE broker.broker_jobs SET complete_status = 3 WHERE job_queue = 6 AND complete_status = 2;
UPDATE broker.broker_jobs SET job_queue = 7 WHERE job_queue = 6 AND complete_status >= 2 AND job_id % 4 = 0;
UPDATE broker.broker_jobs SET complete_status = 0, finished_at = NULL  -- back to pending, as a retry does
 WHERE job_queue = 5 AND complete_status = 3 AND job_id % 2 = 0;
UPDATE broker.broker_jobs SET job_name = job_name || '!' WHERE complete_status >= 2 AND job_id % 9 = 0;
DELETE FROM broker.broker_jobs WHERE job_queue = 4 AND complete_status = 4;
SELECT broker.broker_purge_jobs(interval '40 minutes', 200);
SELECT results_eq($$SELECT job_queue, tenant_id, ready, blocked, delayed, running, completed_last_hour, failed_last_hour,
                          cancelled_last_hour FROM broker.broker_queue_stats()$$, $$SELECT * FROM pg_temp.reference_stats()$$,
                  'and still after finish times moved (another TimeZone), states and queues changed, retries, other columns rewritten, deletes and a purge');
SELECT ok((SELECT count(*) FROM broker.broker_finished_count)
          <= (SELECT count(DISTINCT (broker._finished_minute(finished_at), job_queue, tenant_id, complete_status))
                FROM broker.broker_jobs WHERE complete_status >= 2),
          'the merge folds the deltas: at most one row per minute, queue, tenant and state');
SELECT is(broker._merge_finished_counts(), 0::bigint, 'a second merge has nothing to fold');
RESET TimeZone;

SELECT * FROM finish();
ROLLBACK;

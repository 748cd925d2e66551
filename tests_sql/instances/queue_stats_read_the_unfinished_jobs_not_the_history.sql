-- broker_queue_stats counts the unfinished jobs through the index that holds them alone
-- (broker_jobs_group_idx), and the finished ones from their counts (broker_finished_count): a history of
-- many jobs finished long ago costs it no sequential scan of broker_jobs, and the rows it fetches do not grow
-- with that history. (Counted through pg_stat_xact_user_tables, not timed; finished_at is set, so no outcome
-- depends on the clock.)
BEGIN;
SELECT plan(4);

-- 30,000 finished two days ago, 300 ready over three queues, 20 running
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, started_at, finished_at)
SELECT 'old', 'old', 'SELECT 1', 2, now() - interval '2 days', now() - interval '2 days' FROM generate_series(1, 30000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue)
SELECT 'ready', 'ready', 'SELECT 1', 1 + i % 3 FROM generate_series(1, 300) AS i;
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, started_at, lease_token, lease_expires_at)
SELECT 'running', 'running', 'SELECT 1', 1, now(), gen_random_uuid(), now() + interval '1 hour' FROM generate_series(1, 20);
ANALYZE broker.broker_jobs;

CREATE TEMP TABLE reads (what text, seq_scan bigint, idx_tup_fetch bigint);
CREATE FUNCTION pg_temp.mark(p_what text) RETURNS void LANGUAGE sql AS $f$
    INSERT INTO reads SELECT p_what, seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables
     WHERE relid = 'broker.broker_jobs'::regclass;
$f$;

SELECT pg_temp.mark('start');
CREATE TEMP TABLE stats AS SELECT * FROM broker.broker_queue_stats();
SELECT pg_temp.mark('stats');

SELECT results_eq($$SELECT job_queue, ready, running FROM stats ORDER BY job_queue$$,
                  $$VALUES (1, 100::bigint, 20::bigint), (2, 100, 0), (3, 100, 0)$$,
                  'broker_queue_stats counts the ready and running jobs of each queue');
SELECT is((SELECT sum(completed_last_hour)::integer FROM stats), 0, 'and none of the jobs finished two days ago');
SELECT is((SELECT b.seq_scan - a.seq_scan FROM reads AS a, reads AS b WHERE a.what = 'start' AND b.what = 'stats'),
          0::bigint, 'broker_queue_stats: no sequential scan of broker_jobs');
SELECT cmp_ok((SELECT b.idx_tup_fetch - a.idx_tup_fetch FROM reads AS a, reads AS b WHERE a.what = 'start' AND b.what = 'stats'),
              '<=', 1000::bigint, 'broker_queue_stats: fetches the 320 unfinished jobs, not the 30,000 finished ones');

SELECT * FROM finish();
ROLLBACK;

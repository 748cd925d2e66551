-- The flow-control statistics (broker_tenant_stats, broker_key_stats, broker_job_waiting) read the jobs
-- they count through the indexes that hold them: a table of many jobs finished long ago, many ready
-- ones and a few keyed ones costs them no sequential scan, and the rows they fetch do not grow with
-- the finished jobs. (Counted through pg_stat_xact_user_tables, not timed; finished_at is set, so no
-- outcome depends on the clock.)
BEGIN;
SELECT plan(9);

-- 20,000 finished two days before the window, 2,000 ready in two tenants, 20 running, 30 keyed pending
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, started_at, finished_at)
SELECT 'old', 'old', 'SELECT 1', 2, now() - interval '2 days', now() - interval '2 days' FROM generate_series(1, 20000);
INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue)
SELECT CASE WHEN i % 2 = 0 THEN 'tenant_a' ELSE 'tenant_b' END, 'ready', 'ready', 'SELECT 1', 1 + i % 4
  FROM generate_series(1, 2000) AS i;
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, started_at, lease_token, lease_expires_at)
SELECT 'running', 'running', 'SELECT 1', 1, now(), gen_random_uuid(), now() + interval '1 hour' FROM generate_series(1, 20);
SELECT broker.broker_set_limit('stripe', 2, NULL);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, concurrency_key)
SELECT 'keyed', 'keyed', 'SELECT 1', 'stripe' FROM generate_series(1, 30);
ANALYZE broker.broker_jobs;

CREATE TEMP TABLE reads (what text, seq_scan bigint, idx_tup_fetch bigint);
CREATE FUNCTION pg_temp.mark(p_what text) RETURNS void LANGUAGE sql AS $f$
    INSERT INTO reads SELECT p_what, seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables
     WHERE relid = 'broker.broker_jobs'::regclass;
$f$;
-- what broker_jobs cost between two marks
CREATE FUNCTION pg_temp.cost(p_from text, p_to text, OUT seq_scans bigint, OUT fetched bigint) LANGUAGE sql AS $f$
    SELECT b.seq_scan - a.seq_scan, b.idx_tup_fetch - a.idx_tup_fetch
      FROM reads AS a, reads AS b WHERE a.what = p_from AND b.what = p_to;
$f$;

SELECT pg_temp.mark('start');
CREATE TEMP TABLE tenant_rows AS SELECT * FROM broker.broker_tenant_stats('1 minute');
SELECT pg_temp.mark('tenant_stats');
CREATE TEMP TABLE key_rows AS SELECT * FROM broker.broker_key_stats();
SELECT pg_temp.mark('key_stats');
CREATE TEMP TABLE why AS
SELECT broker.broker_job_waiting(j.job_id) AS reason
  FROM (SELECT job_id FROM broker.broker_jobs WHERE job_name = 'ready' ORDER BY job_id LIMIT 1) AS j;
SELECT pg_temp.mark('job_waiting');

SELECT is((SELECT sum(ready)::integer FROM tenant_rows WHERE tenant_id IN ('tenant_a', 'tenant_b')), 2000,
          'broker_tenant_stats counts the 2,000 ready jobs');
SELECT is((SELECT served::integer FROM tenant_rows WHERE tenant_id = 'default' AND job_queue = 1), 20,
          'and the running ones as served, none of the finished ones before the window');
SELECT is((SELECT seq_scans FROM pg_temp.cost('start', 'tenant_stats')), 0::bigint,
          'broker_tenant_stats: no sequential scan of broker_jobs');
SELECT cmp_ok((SELECT fetched FROM pg_temp.cost('start', 'tenant_stats')), '<', 5000::bigint,
              'broker_tenant_stats: fetches fewer rows than the 20,000 finished jobs (ready, running and recent ones only)');

SELECT is((SELECT waiting::integer FROM key_rows WHERE concurrency_key = 'stripe'), 30, 'broker_key_stats counts the keyed jobs');
SELECT is((SELECT seq_scans FROM pg_temp.cost('tenant_stats', 'key_stats')), 0::bigint,
          'broker_key_stats: no sequential scan of broker_jobs');
SELECT cmp_ok((SELECT fetched FROM pg_temp.cost('tenant_stats', 'key_stats')), '<=', 100::bigint,
              'broker_key_stats: fetches only the keyed jobs (key indexes), not the ready or finished ones');

SELECT is((SELECT reason FROM why), 'waiting: a free worker', 'broker_job_waiting says why the ready job waits');
SELECT is((SELECT seq_scans FROM pg_temp.cost('key_stats', 'job_waiting')), 0::bigint,
          'broker_job_waiting: no sequential scan of broker_jobs');

SELECT * FROM finish();
ROLLBACK;

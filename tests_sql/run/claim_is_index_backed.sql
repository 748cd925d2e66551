-- The claim is index-backed: its cost must not grow with finished, blocked, future or parked jobs.
BEGIN;
SELECT plan(11);

-- A realistic mix: many finished, blocked and future jobs, a few ready ones.
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, finished_at)
SELECT 'done', 'done', 'SELECT 1', 2, now() FROM generate_series(1, 20000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, pending_deps)
SELECT 'blocked', 'blocked', 'SELECT 1', 1 FROM generate_series(1, 3000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_priority, run_after)
SELECT 'future', 'future', 'SELECT 1', 5, now() + interval '1 hour' FROM generate_series(1, 3000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str)
SELECT 'ready', 'ready', 'SELECT 1' FROM generate_series(1, 10);
ANALYZE broker.broker_jobs;

\ir ../lib/claim_plan.psql

SELECT ok(pg_temp.plan_of('claim-range') IS NOT NULL AND pg_temp.plan_of('priority-probe') IS NOT NULL
          AND pg_temp.plan_of('claim-new') IS NOT NULL AND pg_temp.plan_of('claim-query') IS NOT NULL
          AND pg_temp.plan_of('claim-lock') IS NOT NULL AND pg_temp.plan_of('claim-tenants') IS NOT NULL,
          'the claim functions have the marked probe, tenant, window, lock and claim statements');
SELECT is((SELECT count(*)::integer FROM broker.broker_jobs WHERE job_name = 'future' AND parked = 1), 3000,
          'the jobs dated later are parked, out of the claim index');
SET LOCAL plan_cache_mode = force_custom_plan;
SELECT matches(pg_temp.plan_of('claim-range', false), '"Index Name": "broker_jobs_claim_idx"', 'custom plan: the window uses broker_jobs_claim_idx');
SELECT doesnt_match(pg_temp.plan_of('claim-range', false) || pg_temp.plan_of('priority-probe', false), '"Node Type": "Seq Scan"',
                    'custom plans: no sequential scan');
SELECT cmp_ok((SELECT count(*)::integer FROM regexp_matches(pg_temp.plan_of('priority-probe', false), '"Index Name": "broker_jobs_claim_idx"', 'g')),
          '>=', 2, 'custom plan: the probes from the hint and of the levels below it use broker_jobs_claim_idx');
-- the functions' own settings from here (force_generic_plan among them)
SELECT matches(pg_temp.plan_of('claim-range'), '"Index Name": "broker_jobs_claim_idx"', 'generic plan: the window uses broker_jobs_claim_idx');
SELECT doesnt_match(pg_temp.plan_of('claim-range') || pg_temp.plan_of('priority-probe') || pg_temp.plan_of('claim-new')
                    || pg_temp.plan_of('claim-query') || pg_temp.plan_of('claim-lock') || pg_temp.plan_of('claim-tenants'),
                    '"Node Type": "Seq Scan"', 'generic plans: no sequential scan');
SELECT is((SELECT array_agg(DISTINCT node || ' ' || COALESCE(index_name, relation)) FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-lock'))
            WHERE relation IS NOT NULL OR index_name IS NOT NULL),
          ARRAY['Tid Scan broker_jobs']::text[], 'generic plan: the lock fetches the row versions the window read by their tids, no index');
SELECT is((SELECT array_agg(DISTINCT index_name) FROM pg_temp.plan_nodes(pg_temp.plan_of('claim-tenants')) WHERE index_name IS NOT NULL),
          ARRAY['broker_jobs_claim_idx']::text[], 'generic plan: the tenants are found by descents of the claim index');

-- And the function as it runs: no sequential scan of broker_jobs at all.
RESET plan_cache_mode;
CREATE TEMP TABLE seq_before AS SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass;
CREATE TEMP TABLE claimed AS SELECT job_name FROM broker.broker_get(1, NULL, 60, 4);
SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass),
          (SELECT seq_scan FROM seq_before), 'broker_get ran without a sequential scan of broker_jobs');
SELECT is((SELECT array_agg(DISTINCT job_name) FROM claimed), ARRAY['ready'], 'only ready jobs were claimed');

SELECT * FROM finish();
ROLLBACK;
